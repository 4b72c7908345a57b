// The manifest's text: "nanoforge-checkpoint FORMAT", then "NAME BYTES CRC32" per file (CRC in 8 hex digits).
#include "train/checkpoint/manifest.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "support/file_checksum.h"
#include "support/status.h"

namespace nanoforge {
namespace {

constexpr char kMagic[] = "nanoforge-checkpoint";
constexpr int64_t kMaxManifestBytes = 4096;  // three short lines; anything longer is not a manifest

std::string upgrade_hint(const std::string& dir) {
  return fmt::format("python3 tools/upgrade_h5.py checkpoint {}", dir);
}

}  // namespace

absl::Status write_manifest(const std::string& dir, const std::vector<std::string>& files) {
  std::string text = fmt::format("{} {}\n", kMagic, kCheckpointFormat);
  for (const std::string& name : files) {
    NANOFORGE_ASSIGN_OR_RETURN(const FileChecksum checksum, checksum_file(dir + "/" + name));
    text += fmt::format("{} {} {:08x}\n", name, checksum.bytes, checksum.crc32);
  }
  const std::string path = dir + "/" + kManifestFile;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::PermissionDeniedError(fmt::format("{}: cannot create", path));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool synced = written && ::fsync(fd) == 0;
  const bool closed = ::close(fd) == 0;
  if (!written || !synced || !closed)
    return absl::DataLossError(fmt::format("{}: cannot write (disk full or failing?)", path));
  return absl::OkStatus();
}

absl::Status verify_manifest(const std::string& dir, const std::vector<std::string>& files) {
  const std::string path = dir + "/" + kManifestFile;
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::DataLossError(fmt::format(
        "{}: no {}: an incomplete checkpoint, or one of format 1 written by an older nanoforge (upgrade it "
        "with {})",
        dir, kManifestFile, upgrade_hint(dir)));
  }
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, error));
  if (error || size > kMaxManifestBytes)
    return absl::DataLossError(fmt::format("{}: {} bytes, not a checkpoint manifest (corrupt)", path, size));
  std::ifstream in(path);
  std::string magic;
  int format = 0;
  if (!(in >> magic >> format) || magic != kMagic) {
    return absl::DataLossError(
        fmt::format("{}: does not start with \"{} FORMAT\" (corrupt manifest)", path, kMagic));
  }
  if (format != kCheckpointFormat) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: checkpoint format {}; this nanoforge reads format {}{}", path, format, kCheckpointFormat,
        format > kCheckpointFormat ? " (written by a newer nanoforge: update)" : ""));
  }
  std::map<std::string, std::pair<int64_t, std::string>> listed;
  std::string name, crc;
  int64_t bytes = 0;
  while (in >> name >> bytes >> crc)
    listed[name] = {bytes, crc};
  if (!in.eof()) return absl::DataLossError(fmt::format("{}: unreadable line (corrupt manifest)", path));
  for (const std::string& file : files) {
    const auto entry = listed.find(file);
    if (entry == listed.end())
      return absl::DataLossError(fmt::format("{}: {} is not listed (corrupt manifest)", path, file));
    const std::string file_path = dir + "/" + file;
    const auto actual_bytes = static_cast<int64_t>(std::filesystem::file_size(file_path, error));
    if (error) return absl::DataLossError(fmt::format("{}: missing ({})", file_path, error.message()));
    if (actual_bytes != entry->second.first) {
      return absl::DataLossError(fmt::format("{}: {} bytes, but {} bytes were written (truncated or changed)",
                                             file_path, actual_bytes, entry->second.first));
    }
    NANOFORGE_ASSIGN_OR_RETURN(const FileChecksum checksum, checksum_file(file_path));
    if (fmt::format("{:08x}", checksum.crc32) != entry->second.second) {
      return absl::DataLossError(
          fmt::format("{}: CRC-32 {:08x} does not match the {} recorded when it was written: the file is "
                      "damaged (bit rot, a partial copy, an edit)",
                      file_path, checksum.crc32, entry->second.second));
    }
  }
  return absl::OkStatus();
}

}  // namespace nanoforge
