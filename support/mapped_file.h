// A whole file mapped read-only into memory. Token shards point into the mapping instead of copying: every
// process that maps the same shard shares one copy in the page cache, and opening a shard costs no reading.
// A mapped file must not be truncated or rewritten in place while mapped (reading a page past the new end
// raises SIGBUS); nanoforge's writers replace files by rename, which leaves existing mappings intact.
#pragma once

#include <absl/status/statusor.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace nanoforge {

class MappedFile {
 public:
  // Maps `path` read-only (an empty file gives an empty span).
  static absl::StatusOr<MappedFile> open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  int64_t size_bytes() const { return static_cast<int64_t>(size_bytes_); }
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_bytes_}; }

  // Hints for the kernel's read-ahead (madvise); failures are ignored, they only cost speed.
  enum class Access { kNormal, kSequential, kRandom, kWillNeed };
  void advise(Access access, int64_t offset_bytes = 0, int64_t length_bytes = -1) const;

 private:
  MappedFile(std::string path, void* data, size_t size_bytes)
      : path_(std::move(path)), data_(data), size_bytes_(size_bytes) {}
  void unmap();

  std::string path_;
  void* data_ = nullptr;
  size_t size_bytes_ = 0;
};

}  // namespace nanoforge
