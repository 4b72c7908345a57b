// Fuzz target: a nanoforge HDF5 token shard (data/shards/shard_hdf5.h) as training reads it — opened,
// every document copied, every token checked, a loader run over it. Seeds: shards written by ShardWriter.
#include <cstddef>
#include <cstdint>

#include "data/shards/open_shard.h"
#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_path("shard.h5");
  fuzz::write_file(path, data, size);
  ShardOpenOptions options;
  options.verify_tokens = false;  // use_shard checks the tokens the way the loader does, then in full
  const absl::StatusOr<TokenShard> shard = open_token_shard(path, options);
  fuzz::require_named(shard.status(), path);
  if (shard.ok()) fuzz::use_shard(*shard);
  return 0;
}
