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
      "come with the pyarrow wheel: run scripts/install-deps.sh (it sets pyarrow up in the build tree's "
      "Python environment) and configure again, or `pip install pyarrow` into the python3 that CMake finds "
      "and configure with -DPython3_EXECUTABLE=that/python3. The CMake summary line says whether parquet "
      "input is built.",
      path));
}

}  // namespace nanoforge
