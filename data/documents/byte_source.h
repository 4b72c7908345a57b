// The bytes of one input, read in blocks: a plain file, standard input ("-"), or either decompressed on the
// fly (gzip with zlib, zstd with libzstd). Line-oriented readers (documents.cpp) sit on top, so a .jsonl.zst
// file reads like a .jsonl one without ever being decompressed to disk. Compression is chosen by the file's
// extension, and sniffed from its first bytes on standard input (the gzip and zstd magic numbers).
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <memory>
#include <string>

namespace nanoforge {

enum class Compression { kNone, kGzip, kZstd, kSniff };

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to `size` bytes into `buffer`; 0 at the end. Errors name the input and say what is wrong with it.
  virtual absl::StatusOr<size_t> read(char* buffer, size_t size) = 0;
  // Bytes taken from the underlying file or pipe so far (compressed bytes for a compressed input): progress.
  virtual uint64_t source_bytes_read() const = 0;
};

// "-" is standard input. kSniff looks at the first bytes (only for standard input: files go by extension).
absl::StatusOr<std::unique_ptr<ByteSource>> open_byte_source(const std::string& path,
                                                             Compression compression);

// Decompressing wrappers over another source; `name` is the input named in errors. Several gzip members or
// zstd frames back to back read as one stream; one cut short is an error (DataLoss), as is corrupt data.
std::unique_ptr<ByteSource> gzip_decompressor(std::unique_ptr<ByteSource> compressed, std::string name);
std::unique_ptr<ByteSource> zstd_decompressor(std::unique_ptr<ByteSource> compressed, std::string name);

}  // namespace nanoforge
