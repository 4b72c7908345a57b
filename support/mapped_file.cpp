// MappedFile over POSIX open/fstat/mmap. The file descriptor is closed right after mapping: the mapping keeps
// the file (its inode) alive on its own.
#include "support/mapped_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace nanoforge {

absl::StatusOr<MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) return absl::NotFoundError(fmt::format("{}: no such file", path));
    return absl::PermissionDeniedError(fmt::format("{}: cannot open: {}", path, std::strerror(error)));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(fmt::format("{}: not a regular file", path));
  }
  const auto size_bytes = static_cast<size_t>(info.st_size);
  void* data = nullptr;
  if (size_bytes > 0) {
    data = ::mmap(nullptr, size_bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      return absl::ResourceExhaustedError(
          fmt::format("{}: cannot map {} bytes: {}", path, size_bytes, std::strerror(error)));
    }
  }
  ::close(fd);
  return MappedFile(path, data, size_bytes);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_bytes_(other.size_bytes_) {
  other.data_ = nullptr;
  other.size_bytes_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_bytes_ = other.size_bytes_;
    other.data_ = nullptr;
    other.size_bytes_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() {
  unmap();
}

void MappedFile::unmap() {
  if (data_ != nullptr) ::munmap(data_, size_bytes_);
  data_ = nullptr;
  size_bytes_ = 0;
}

void MappedFile::advise(Access access, int64_t offset_bytes, int64_t length_bytes) const {
  if (data_ == nullptr || offset_bytes < 0 || offset_bytes >= size_bytes()) return;
  // madvise wants a page-aligned start: round the offset down to its page.
  const auto page = static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
  const int64_t start = offset_bytes / page * page;
  const int64_t end = length_bytes < 0 ? size_bytes() : std::min(size_bytes(), offset_bytes + length_bytes);
  int advice = MADV_NORMAL;
  switch (access) {
    case Access::kNormal:
      advice = MADV_NORMAL;
      break;
    case Access::kSequential:
      advice = MADV_SEQUENTIAL;
      break;
    case Access::kRandom:
      advice = MADV_RANDOM;
      break;
    case Access::kWillNeed:
      advice = MADV_WILLNEED;
      break;
  }
  ::madvise(static_cast<char*>(data_) + start, static_cast<size_t>(end - start), advice);
}

}  // namespace nanoforge
