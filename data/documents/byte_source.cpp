// Plain files and standard input as byte sources, and the choice of decompressor. Standard input is read
// through a small look-ahead so that its first bytes can be sniffed and then handed on unchanged.
#include "data/documents/byte_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "support/status.h"

namespace nanoforge {
namespace {

constexpr std::string_view kGzipMagic = "\x1f\x8b";
constexpr std::string_view kZstdMagic = "\x28\xb5\x2f\xfd";

class FileSource final : public ByteSource {
 public:
  FileSource(FILE* file, std::string name, bool owned) : file_(file), name_(std::move(name)), owned_(owned) {}
  ~FileSource() override {
    if (owned_) std::fclose(file_);
  }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  absl::StatusOr<size_t> read(char* buffer, size_t size) override {
    if (lookahead_.empty()) return read_raw(buffer, size);
    const size_t got = std::min(size, lookahead_.size());  // bytes sniffed earlier come first
    std::memcpy(buffer, lookahead_.data(), got);
    lookahead_.erase(0, got);
    return got;
  }
  uint64_t source_bytes_read() const override { return bytes_read_; }

  // Reads the first bytes (fewer if the input is shorter) into lookahead(), to be read again.
  absl::Status peek(size_t size) {
    lookahead_.resize(size);
    size_t got = 0;
    while (got < size) {
      NANOFORGE_ASSIGN_OR_RETURN(size_t n, read_raw(lookahead_.data() + got, size - got));
      if (n == 0) break;
      got += n;
    }
    lookahead_.resize(got);
    return absl::OkStatus();
  }
  std::string_view lookahead() const { return lookahead_; }

 private:
  // read() without the look-ahead.
  absl::StatusOr<size_t> read_raw(char* buffer, size_t size) {
    const size_t got = std::fread(buffer, 1, size, file_);
    if (got < size && std::ferror(file_)) {
      return absl::DataLossError(
          fmt::format("{}: read error after {} bytes: {}", name_, bytes_read_, std::strerror(errno)));
    }
    bytes_read_ += got;
    return got;
  }

  FILE* file_;
  std::string name_;
  bool owned_;
  std::string lookahead_;
  uint64_t bytes_read_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ByteSource>> open_byte_source(const std::string& path,
                                                             Compression compression) {
  std::unique_ptr<FileSource> source;
  const std::string name = path == "-" ? "standard input" : path;
  if (path == "-") {
    source = std::make_unique<FileSource>(stdin, name, false);
  } else {
    FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr)
      return absl::NotFoundError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    source = std::make_unique<FileSource>(file, name, true);
  }
  if (compression == Compression::kSniff) {
    NANOFORGE_RETURN_IF_ERROR(source->peek(kZstdMagic.size()));
    compression = source->lookahead().starts_with(kGzipMagic)   ? Compression::kGzip
                  : source->lookahead().starts_with(kZstdMagic) ? Compression::kZstd
                                                                : Compression::kNone;
  }
  switch (compression) {
    case Compression::kGzip:
      return gzip_decompressor(std::move(source), name);
    case Compression::kZstd:
      return zstd_decompressor(std::move(source), name);
    default:
      return std::unique_ptr<ByteSource>(std::move(source));
  }
}

}  // namespace nanoforge
