// open_token_shard: which format a file is, from its first bytes, then that format's reader.
#include "data/shards/open_shard.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/shards/llmc_bin.h"
#include "data/shards/shard_hdf5.h"

namespace nanoforge {

absl::StatusOr<TokenShard> open_token_shard(const std::string& path, const ShardOpenOptions& options) {
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    return absl::NotFoundError(fmt::format("{}: no such file", path));
  if (!std::filesystem::is_regular_file(path, error))
    return absl::InvalidArgumentError(fmt::format("{}: not a regular file", path));
  std::array<unsigned char, 8> head{};
  {
    std::ifstream file(path, std::ios::binary);
    if (!file) return absl::PermissionDeniedError(fmt::format("{}: cannot open for reading", path));
    file.read(reinterpret_cast<char*>(head.data()), head.size());
    if (file.gcount() == 0) {
      return absl::InvalidArgumentError(
          fmt::format("{}: empty file (0 bytes): not a token shard; was it written completely?", path));
    }
  }
  static constexpr std::array<unsigned char, 8> kHdf5Signature = {0x89, 'H',  'D',  'F',
                                                                  '\r', '\n', 0x1a, '\n'};
  if (head == kHdf5Signature) return open_hdf5_shard(path, options);
  int32_t magic = 0;
  std::memcpy(&magic, head.data(), sizeof(magic));
  if (is_llmc_magic(magic)) return open_llmc_bin(path, options);
  const std::string extension = std::filesystem::path(path).extension().string();
  if (extension == ".bin") return open_llmc_bin(path, options);  // reports the bad magic number
  return absl::InvalidArgumentError(
      fmt::format("{}: not a token shard: it starts with neither the HDF5 signature nor an llm.c magic "
                  "number ({} or {}); "
                  "the file is corrupt or of another kind",
                  path, kLlmcMagicUint16, kLlmcMagicUint32));
}

}  // namespace nanoforge
