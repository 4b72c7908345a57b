// Reader of nanoforge's HDF5 token shards. HDF5 (through H5File) reads the attributes and says where each
// contiguous dataset's bytes are; the bytes themselves are used in place through one read-only mapping of
// the whole file, shared by the tokens and the offsets.
#include "data/shards/shard_hdf5.h"

#include <fmt/format.h>

#include <vector>

#include "h5/file.h"
#include "support/mapped_file.h"
#include "support/status.h"

namespace nanoforge {
namespace {

using Layout = H5File::DatasetLayout;

// A dataset's values: a pointer into the mapping when its bytes can be used as they lie, else a copy.
template <class T>
absl::Status locate_values(const H5File& file, const std::string& dataset, const Layout& layout,
                           const std::shared_ptr<const MappedFile>& mapping,
                           std::shared_ptr<const void>& owner, const void*& values, bool& mapped) {
  const int64_t count = layout.shape[0];
  const int64_t bytes = count * static_cast<int64_t>(sizeof(T));
  if (layout.contiguous && layout.file_offset >= 0) {
    // The size check that catches a truncated file whose header still opens.
    if (layout.file_offset + bytes > mapping->size_bytes()) {
      return absl::DataLossError(fmt::format(
          "{}: truncated: dataset {} needs bytes {}..{} but the file has {} bytes; re-create or re-copy it",
          file.path(), dataset, layout.file_offset, layout.file_offset + bytes, mapping->size_bytes()));
    }
  }
  if (layout.contiguous && layout.file_offset >= 0 && layout.is_little_endian &&
      layout.file_offset % static_cast<int64_t>(alignof(T)) == 0) {
    owner = mapping;
    values = mapping->bytes().data() + layout.file_offset;
    mapped = true;
    return absl::OkStatus();
  }
  NANOFORGE_ASSIGN_OR_RETURN(HostArray<T> array, file.read<T>(dataset));
  auto copy = std::make_shared<std::vector<T>>(std::move(array.values));
  values = copy->data();
  owner = std::move(copy);
  mapped = false;
  return absl::OkStatus();
}

absl::StatusOr<Layout> one_dimensional_integers(const H5File& file, const std::string& dataset,
                                                int64_t expected_count, const char* count_attribute) {
  NANOFORGE_ASSIGN_OR_RETURN(Layout layout, file.dataset_layout(dataset));
  if (layout.value_class != Layout::ValueClass::kInteger || layout.shape.size() != 1) {
    return absl::InvalidArgumentError(
        fmt::format("{}: dataset {} must be a 1-D integer array, found {}-D {} values (corrupt shard?)",
                    file.path(), dataset, layout.shape.size(),
                    layout.value_class == Layout::ValueClass::kFloat ? "floating-point" : "non-integer"));
  }
  if (layout.shape[0] != expected_count) {
    return absl::DataLossError(
        fmt::format("{}: dataset {} holds {} values but the attribute {} says {} (corrupt "
                    "shard)",
                    file.path(), dataset, layout.shape[0], count_attribute, expected_count));
  }
  return layout;
}

}  // namespace

absl::StatusOr<TokenShard> open_hdf5_shard(const std::string& path, const ShardOpenOptions& options) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(path));
  auto format = file.read_string_attribute("/", "format");
  if (!format.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: an HDF5 file but not a nanoforge token shard ({})",
                                                  path, std::string(format.status().message())));
  }
  if (*format != kShardFormatName) {
    return absl::InvalidArgumentError(
        fmt::format("{}: format attribute is \"{}\", expected \"{}\"", path, *format, kShardFormatName));
  }
  NANOFORGE_ASSIGN_OR_RETURN(const int64_t version, file.read_int_attribute("/", "format_version"));
  if (version != kShardFormatVersion) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: shard format version {}; this nanoforge reads version {}{}", path, version, kShardFormatVersion,
        version > kShardFormatVersion ? " (written by a newer nanoforge: update)" : ""));
  }

  TokenShardParts parts;
  parts.path = path;
  parts.format = ShardFormat::kNanoforgeHdf5;
  NANOFORGE_ASSIGN_OR_RETURN(parts.vocab_size, file.read_int_attribute("/", "vocab_size"));
  NANOFORGE_ASSIGN_OR_RETURN(const int64_t bos_id, file.read_int_attribute("/", "bos_id"));
  if (bos_id < 0 || bos_id > INT32_MAX)
    return absl::InvalidArgumentError(fmt::format("{}: bos_id {} is not a token id", path, bos_id));
  parts.bos_id = static_cast<int32_t>(bos_id);
  NANOFORGE_ASSIGN_OR_RETURN(parts.tokenizer_hash, file.read_string_attribute("/", "tokenizer_hash"));
  NANOFORGE_ASSIGN_OR_RETURN(parts.token_count, file.read_int_attribute("/", "token_count"));
  NANOFORGE_ASSIGN_OR_RETURN(parts.doc_count, file.read_int_attribute("/", "doc_count"));
  NANOFORGE_ASSIGN_OR_RETURN(const int64_t checksum, file.read_int_attribute("/", "token_checksum"));
  parts.stored_checksum = static_cast<uint64_t>(checksum);
  if (parts.token_count < 0 || parts.doc_count < 0) {
    return absl::DataLossError(fmt::format("{}: negative token_count {} or doc_count {} (corrupt shard)",
                                           path, parts.token_count, parts.doc_count));
  }
  if (parts.token_count == 0 || parts.doc_count == 0) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: empty shard ({} tokens, {} documents): nothing to train on; remove it or re-create it", path,
        parts.token_count, parts.doc_count));
  }

  NANOFORGE_ASSIGN_OR_RETURN(const Layout tokens, one_dimensional_integers(file, kShardTokensDataset,
                                                                           parts.token_count, "token_count"));
  if (tokens.is_signed || (tokens.element_bytes != 2 && tokens.element_bytes != 4)) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: dataset {} holds {}-bit {} integers; token shards store uint16 or uint32 tokens", path,
        kShardTokensDataset, 8 * tokens.element_bytes, tokens.is_signed ? "signed" : "unsigned"));
  }
  parts.bytes_per_token = static_cast<int>(tokens.element_bytes);
  NANOFORGE_ASSIGN_OR_RETURN(
      const Layout offsets,
      one_dimensional_integers(file, kShardOffsetsDataset, parts.doc_count + 1, "doc_count"));
  if (!offsets.is_signed || offsets.element_bytes != 8) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: dataset {} holds {}-bit {} integers; document offsets are int64", path, kShardOffsetsDataset,
        8 * offsets.element_bytes, offsets.is_signed ? "signed" : "unsigned"));
  }

  NANOFORGE_ASSIGN_OR_RETURN(MappedFile mapped_file, MappedFile::open(path));
  auto mapping = std::make_shared<const MappedFile>(std::move(mapped_file));
  const void* token_values = nullptr;
  if (parts.bytes_per_token == 2) {
    NANOFORGE_RETURN_IF_ERROR(locate_values<uint16_t>(file, kShardTokensDataset, tokens, mapping,
                                                      parts.token_owner, token_values,
                                                      parts.tokens_memory_mapped));
  } else {
    NANOFORGE_RETURN_IF_ERROR(locate_values<uint32_t>(file, kShardTokensDataset, tokens, mapping,
                                                      parts.token_owner, token_values,
                                                      parts.tokens_memory_mapped));
  }
  parts.tokens = token_values;
  const void* offset_values = nullptr;
  bool offsets_mapped = false;
  NANOFORGE_RETURN_IF_ERROR(locate_values<int64_t>(file, kShardOffsetsDataset, offsets, mapping,
                                                   parts.offsets_owner, offset_values, offsets_mapped));
  parts.doc_offsets = static_cast<const int64_t*>(offset_values);
  if (parts.doc_offsets[0] != 0) {
    return absl::DataLossError(fmt::format("{}: the first document offset is {}, expected 0 (corrupt shard)",
                                           path, parts.doc_offsets[0]));
  }

  NANOFORGE_RETURN_IF_ERROR(validate_shard_structure(parts, options.expect));
  TokenShard shard(std::move(parts));
  if (options.verify_tokens) {
    // One sequential pass: ask the kernel to read ahead for it, then go back to the default.
    mapping->advise(MappedFile::Access::kSequential);
    NANOFORGE_RETURN_IF_ERROR(shard.verify_tokens());
    mapping->advise(MappedFile::Access::kNormal);
  }
  return shard;
}

}  // namespace nanoforge
