// libhdf5's error stack, silenced and read for the cause of a failure (h5/hdf5_api.h).
#include "h5/hdf5_api.h"

#include <mutex>

namespace nanoforge::h5_api {

void silence_hdf5_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5dont_atexit(); });
  thread_local bool silenced = false;
  if (!silenced) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
}

std::string innermost_hdf5_error() {
  std::string description;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* error, void* out) -> herr_t {
        if (error->desc != nullptr) *static_cast<std::string*>(out) = error->desc;
        return 0;
      },
      &description);
  return description;
}

std::string hdf5_cause() {
  const std::string description = innermost_hdf5_error();
  const std::string marker = "error message = '";
  const size_t at = description.find(marker);
  if (at != std::string::npos) {
    const size_t end = description.find('\'', at + marker.size());
    return ": " +
           description.substr(at + marker.size(), end == std::string::npos ? end : end - at - marker.size());
  }
  return description.empty() ? "" : ": HDF5 says " + description;
}

}  // namespace nanoforge::h5_api
