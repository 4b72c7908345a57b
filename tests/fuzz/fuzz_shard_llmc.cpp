// Fuzz target: an llm.c .bin token shard (data/shards/llmc_bin.h) as training reads it, with the
// vocabulary and BOS the fixtures use. Seeds: files written by write_llmc_bin, uint16 and uint32.
#include <cstddef>
#include <cstdint>

#include "data/shards/open_shard.h"
#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_path("shard.bin");
  fuzz::write_file(path, data, size);
  ShardOpenOptions options;
  options.expect.vocab_size = fuzz::kFixtureVocab;
  options.expect.bos_id = fuzz::kFixtureBos;
  const absl::StatusOr<TokenShard> shard = open_token_shard(path, options);
  fuzz::require_named(shard.status(), path);
  if (shard.ok()) fuzz::use_shard(*shard);
  return 0;
}
