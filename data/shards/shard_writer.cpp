// ShardWriter: validation on append, then one HDF5 write (page-aligned objects, contiguous datasets), fsync,
// rename and directory fsync on finish.
#include "data/shards/shard_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "data/shards/shard_hdf5.h"
#include "data/shards/shard_token_scan.h"
#include "h5/file.h"
#include "support/status.h"

namespace nanoforge {
namespace {

// fsync a file or a directory by path (a directory's fsync makes a rename inside it durable).
absl::Status fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::InternalError(fmt::format("{}: cannot open to sync: {}", path, std::strerror(errno)));
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0)
    return absl::DataLossError(fmt::format("{}: fsync failed: {}", path, std::strerror(error)));
  return absl::OkStatus();
}

}  // namespace

std::string shard_file_name(std::string_view split, int64_t index) {
  return fmt::format("{}_{:05d}.h5", split, index);
}

ShardWriter::ShardWriter(std::string path, ShardMetadata metadata)
    : path_(std::move(path)),
      metadata_(std::move(metadata)),
      uint16_tokens_(metadata_.vocab_size <= kShardMaxUint16Vocab) {}

absl::StatusOr<ShardWriter> ShardWriter::create(std::string path, ShardMetadata metadata) {
  if (metadata.vocab_size < 1 || metadata.vocab_size > (int64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: vocab_size {} is outside [1, 2^32]", path, metadata.vocab_size));
  }
  if (metadata.bos_id < 0 || metadata.bos_id >= metadata.vocab_size) {
    return absl::InvalidArgumentError(fmt::format("{}: BOS id {} is outside the vocabulary [0, {})", path,
                                                  metadata.bos_id, metadata.vocab_size));
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!parent.empty() && !std::filesystem::is_directory(parent, error)) {
    return absl::NotFoundError(fmt::format("{}: the directory {} does not exist", path, parent.string()));
  }
  return ShardWriter(std::move(path), std::move(metadata));
}

int64_t ShardWriter::token_count() const {
  return static_cast<int64_t>(uint16_tokens_ ? tokens16_.size() : tokens32_.size());
}

void ShardWriter::reserve_tokens(int64_t token_count) {
  if (uint16_tokens_) {
    tokens16_.reserve(static_cast<size_t>(token_count));
  } else {
    tokens32_.reserve(static_cast<size_t>(token_count));
  }
}

absl::Status ShardWriter::check_tokens(std::span<const int32_t> tokens, bool first_is_bos) const {
  if (finished_) return absl::FailedPreconditionError(fmt::format("{}: shard already finished", path_));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = tokens[i];
    if (id < 0 || id >= metadata_.vocab_size) {
      return absl::InvalidArgumentError(
          fmt::format("{}: document {}: token {} at position {} is outside the vocabulary [0, {})", path_,
                      doc_count(), id, i, metadata_.vocab_size));
    }
    if (id == metadata_.bos_id && !(first_is_bos && i == 0)) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: document {}: BOS ({}) at position {} inside the text; documents hold BOS only at their start "
          "(encode text with the ordinary encoder, which never yields special tokens)",
          path_, doc_count(), id, i));
    }
  }
  return absl::OkStatus();
}

void ShardWriter::append_tokens(std::span<const int32_t> tokens) {
  if (uint16_tokens_) {
    for (int32_t id : tokens)
      tokens16_.push_back(static_cast<uint16_t>(id));
  } else {
    for (int32_t id : tokens)
      tokens32_.push_back(static_cast<uint32_t>(id));
  }
}

absl::Status ShardWriter::append_document(std::span<const int32_t> text_tokens) {
  NANOFORGE_RETURN_IF_ERROR(check_tokens(text_tokens, /*first_is_bos=*/false));
  const int32_t bos = metadata_.bos_id;
  append_tokens(std::span<const int32_t>(&bos, 1));
  append_tokens(text_tokens);
  doc_offsets_.push_back(token_count());
  return absl::OkStatus();
}

absl::Status ShardWriter::append_document_with_bos(std::span<const int32_t> tokens) {
  if (tokens.empty() || tokens[0] != metadata_.bos_id) {
    return absl::InvalidArgumentError(fmt::format("{}: document {} must start with BOS ({}), found {}", path_,
                                                  doc_count(), metadata_.bos_id,
                                                  tokens.empty() ? "no tokens" : std::to_string(tokens[0])));
  }
  NANOFORGE_RETURN_IF_ERROR(check_tokens(tokens, /*first_is_bos=*/true));
  append_tokens(tokens);
  doc_offsets_.push_back(token_count());
  return absl::OkStatus();
}

absl::Status ShardWriter::finish() {
  if (finished_) return absl::FailedPreconditionError(fmt::format("{}: shard already finished", path_));
  if (doc_count() == 0) {
    return absl::FailedPreconditionError(
        fmt::format("{}: no documents appended: an empty shard is not written", path_));
  }
  finished_ = true;
  const std::string temporary = fmt::format("{}.partial-{}", path_, ::getpid());
  auto write = [&]() -> absl::Status {
    NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::create(temporary, kShardAlignmentBytes));
    const std::vector<int64_t> token_shape = {token_count()};
    uint64_t checksum = 0;
    if (uint16_tokens_) {
      NANOFORGE_RETURN_IF_ERROR(file.write(kShardTokensDataset, token_shape, tokens16_.data()));
      checksum = token_checksum(std::span<const uint16_t>(tokens16_));
    } else {
      NANOFORGE_RETURN_IF_ERROR(file.write(kShardTokensDataset, token_shape, tokens32_.data()));
      checksum = token_checksum(std::span<const uint32_t>(tokens32_));
    }
    NANOFORGE_RETURN_IF_ERROR(
        file.write(kShardOffsetsDataset, {static_cast<int64_t>(doc_offsets_.size())}, doc_offsets_.data()));
    NANOFORGE_RETURN_IF_ERROR(file.write_string_attribute("/", "format", kShardFormatName));
    NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute("/", "format_version", kShardFormatVersion));
    NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute("/", "vocab_size", metadata_.vocab_size));
    NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute("/", "bos_id", metadata_.bos_id));
    NANOFORGE_RETURN_IF_ERROR(file.write_string_attribute("/", "tokenizer_hash", metadata_.tokenizer_hash));
    NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute("/", "token_count", token_count()));
    NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute("/", "doc_count", doc_count()));
    NANOFORGE_RETURN_IF_ERROR(
        file.write_int_attribute("/", "token_checksum", static_cast<int64_t>(checksum)));
    return file.close();  // flushes: a write that failed late (a full disk) is reported here
  };
  absl::Status status = write();
  if (status.ok()) {
    // Read the file back before it takes the final name: what is renamed into place is known to open.
    ShardOpenOptions reopen;
    reopen.verify_tokens = false;
    absl::StatusOr<TokenShard> written = open_hdf5_shard(temporary, reopen);
    if (!written.ok()) {
      status =
          absl::DataLossError(fmt::format("{}: the shard just written does not read back ({}); disk full?",
                                          path_, std::string(written.status().message())));
    } else if (written->token_count() != token_count() || written->doc_count() != doc_count()) {
      status = absl::DataLossError(
          fmt::format("{}: the shard just written reads back {} tokens and {} documents, "
                      "expected {} and {}",
                      path_, written->token_count(), written->doc_count(), token_count(), doc_count()));
    }
  }
  if (status.ok()) status = fsync_path(temporary);
  if (status.ok()) {
    std::error_code error;
    std::filesystem::rename(temporary, path_, error);
    if (error) {
      status =
          absl::InternalError(fmt::format("cannot rename {} to {}: {}", temporary, path_, error.message()));
    }
  }
  if (status.ok()) {
    const std::string parent = std::filesystem::path(path_).parent_path().string();
    status = fsync_path(parent.empty() ? "." : parent);
  } else {
    std::error_code error;
    std::filesystem::remove(temporary, error);
  }
  std::vector<uint16_t>().swap(tokens16_);
  std::vector<uint32_t>().swap(tokens32_);
  return status;
}

}  // namespace nanoforge
