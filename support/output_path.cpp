#include "support/output_path.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace nanoforge {

absl::Status check_output_file_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::symlink_status(path, error);
  if (error || status.type() == fs::file_type::not_found || status.type() == fs::file_type::regular) {
    return absl::OkStatus();  // a path that cannot be inspected fails, with its reason, when written
  }
  const char* kind = status.type() == fs::file_type::directory ? "a directory"
                     : status.type() == fs::file_type::symlink ? "a symbolic link"
                     : status.type() == fs::file_type::fifo    ? "a pipe"
                     : status.type() == fs::file_type::socket  ? "a socket"
                                                               : "a device";
  return absl::InvalidArgumentError(fmt::format(
      "{} is {}, not a regular file: results are written to a new file renamed into place, which would "
      "replace it; give the path of a file",
      path, kind));
}

absl::Status rename_into_place(const std::string& temporary, const std::string& path) {
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error)
    return absl::InternalError(fmt::format("cannot rename {} to {}: {}", temporary, path, error.message()));
  return absl::OkStatus();
}

absl::Status write_file_atomically(const std::string& path, std::string_view contents) {
  if (absl::Status usable = check_output_file_path(path); !usable.ok()) return usable;
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::PermissionDeniedError(
          fmt::format("{}: cannot create: {}", temporary, std::strerror(errno)));
    }
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) return absl::DataLossError(fmt::format("{}: write failed (disk full?)", temporary));
  }
  return rename_into_place(temporary, path);
}

}  // namespace nanoforge
