// The parquet reader of a build without Apache Arrow (cmake/Arrow.cmake found no pyarrow): parquet input is
// refused when it is opened, with the ways to get it; everything else works.
#include <fmt/format.h>

#include "data/documents/parquet_documents.h"

namespace nanoforge {

bool parquet_supported() {
  return false;
}

absl::StatusOr<std::unique_ptr<ParquetTextReader>> open_parquet_text(const std::string& path,
                                                                     const ParquetReadOptions& /*options*/) {
  return absl::FailedPreconditionError(fmt::format(
      "{}: this nanoforge was built without Apache Arrow, so it cannot read parquet. Arrow's C++ libraries "
      "come with the pyarrow wheel: `make build` sets it up (scripts/install-deps.sh BUILD_DIR/python makes "
      "the build tree's Python, CMake is pointed at it), or `pip install pyarrow` into any python3 and "
      "configure with -DPython3_EXECUTABLE=that/python3; CMake's summary says \"parquet input ON\" when "
      "it is found.",
      path));
}

}  // namespace nanoforge
