// gzip (zlib's inflate) and zstd (libzstd's streaming decoder) over a ByteSource, one input block of 1 MiB at
// a time. Both take concatenated members/frames as one stream (what `cat a.gz b.gz` and `zstd -c` of several
// files give), and tell a stream cut short (DataLoss, with how far it got) from corrupt data.
#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <vector>

#include "data/documents/byte_source.h"
#include "support/status.h"

namespace nanoforge {
namespace {

constexpr size_t kInputBlockBytes = 1 << 20;

// The compressed input, refilled block by block.
class InputBlocks {
 public:
  explicit InputBlocks(std::unique_ptr<ByteSource> source)
      : source_(std::move(source)), buffer_(kInputBlockBytes) {}
  // Refills when all was consumed; false at the end of the input.
  absl::StatusOr<bool> ensure() {
    if (position_ < size_) return true;
    NANOFORGE_ASSIGN_OR_RETURN(size_, source_->read(buffer_.data(), buffer_.size()));
    position_ = 0;
    return size_ > 0;
  }
  const char* data() const { return buffer_.data() + position_; }
  size_t available() const { return size_ - position_; }
  void consume(size_t bytes) { position_ += bytes; }
  uint64_t consumed_bytes() const { return source_->source_bytes_read() - available(); }
  uint64_t source_bytes_read() const { return source_->source_bytes_read(); }

 private:
  std::unique_ptr<ByteSource> source_;
  std::vector<char> buffer_;
  size_t position_ = 0, size_ = 0;
};

class GzipSource final : public ByteSource {
 public:
  GzipSource(std::unique_ptr<ByteSource> compressed, std::string name)
      : input_(std::move(compressed)), name_(std::move(name)) {
    // 15 + 32: the largest window, and a gzip or zlib header detected automatically.
    initialized_ = inflateInit2(&stream_, 15 + 32) == Z_OK;
  }
  ~GzipSource() override { inflateEnd(&stream_); }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  absl::StatusOr<size_t> read(char* buffer, size_t size) override {
    if (!initialized_) return absl::ResourceExhaustedError(fmt::format("{}: zlib cannot start", name_));
    size_t produced = 0;
    while (produced < size) {
      NANOFORGE_ASSIGN_OR_RETURN(const bool more, input_.ensure());
      if (!more) {
        if (in_member_) {
          return absl::DataLossError(
              fmt::format("{}: the gzip stream is cut short (ends inside a member after {} compressed "
                          "bytes): the file is "
                          "truncated; download or copy it again",
                          name_, input_.consumed_bytes()));
        }
        break;
      }
      if (!in_member_) {  // a new member starts (the first, or one following another)
        if (inflateReset(&stream_) != Z_OK)
          return absl::InternalError(fmt::format("{}: zlib cannot reset", name_));
        in_member_ = true;
      }
      stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input_.data()));
      stream_.avail_in = static_cast<uInt>(input_.available());
      stream_.next_out = reinterpret_cast<Bytef*>(buffer + produced);
      stream_.avail_out = static_cast<uInt>(std::min<size_t>(size - produced, 1u << 30));
      const int result = inflate(&stream_, Z_NO_FLUSH);
      input_.consume(input_.available() - stream_.avail_in);
      produced = static_cast<size_t>(reinterpret_cast<char*>(stream_.next_out) - buffer);
      if (result == Z_STREAM_END) {
        in_member_ = false;
      } else if (result != Z_OK && result != Z_BUF_ERROR) {
        return absl::DataLossError(fmt::format("{}: corrupt gzip data near compressed byte {}: {}", name_,
                                               input_.consumed_bytes(),
                                               stream_.msg != nullptr ? stream_.msg : zError(result)));
      }
    }
    return produced;
  }
  uint64_t source_bytes_read() const override { return input_.source_bytes_read(); }

 private:
  InputBlocks input_;
  std::string name_;
  z_stream stream_{};
  bool initialized_ = false;
  bool in_member_ = false;
};

class ZstdSource final : public ByteSource {
 public:
  ZstdSource(std::unique_ptr<ByteSource> compressed, std::string name)
      : input_(std::move(compressed)), name_(std::move(name)), context_(ZSTD_createDCtx()) {}
  ~ZstdSource() override { ZSTD_freeDCtx(context_); }
  ZstdSource(const ZstdSource&) = delete;
  ZstdSource& operator=(const ZstdSource&) = delete;

  absl::StatusOr<size_t> read(char* buffer, size_t size) override {
    if (context_ == nullptr) return absl::ResourceExhaustedError(fmt::format("{}: zstd cannot start", name_));
    ZSTD_outBuffer out{buffer, size, 0};
    while (out.pos < out.size) {
      NANOFORGE_ASSIGN_OR_RETURN(const bool more, input_.ensure());
      if (!more) {
        if (in_frame_) {
          return absl::DataLossError(fmt::format(
              "{}: the zstd stream is cut short (ends inside a frame after {} compressed bytes): the file is "
              "truncated; download or copy it again",
              name_, input_.consumed_bytes()));
        }
        break;
      }
      ZSTD_inBuffer in{input_.data(), input_.available(), 0};
      const size_t result = ZSTD_decompressStream(context_, &out, &in);
      input_.consume(in.pos);
      if (ZSTD_isError(result)) {
        const bool too_large = ZSTD_getErrorCode(result) == ZSTD_error_frameParameter_windowTooLarge;
        return absl::DataLossError(fmt::format(
            "{}: corrupt zstd data near compressed byte {}: {}{}", name_, input_.consumed_bytes(),
            ZSTD_getErrorName(result),
            too_large ? " (written with zstd --long: recompress without it, or decompress with zstd -d "
                        "--long=31 and pipe the text in with --input -)"
                      : ""));
      }
      in_frame_ = result != 0;  // 0: a frame just ended and its output is all flushed
    }
    return out.pos;
  }
  uint64_t source_bytes_read() const override { return input_.source_bytes_read(); }

 private:
  InputBlocks input_;
  std::string name_;
  ZSTD_DCtx* context_;
  bool in_frame_ = false;
};

}  // namespace

std::unique_ptr<ByteSource> gzip_decompressor(std::unique_ptr<ByteSource> compressed, std::string name) {
  return std::make_unique<GzipSource>(std::move(compressed), std::move(name));
}

std::unique_ptr<ByteSource> zstd_decompressor(std::unique_ptr<ByteSource> compressed, std::string name) {
  return std::make_unique<ZstdSource>(std::move(compressed), std::move(name));
}

}  // namespace nanoforge
