// The second half of BPE training: the merge loop, as rustbpe (nanochat's trainer) runs it. Each round
// merges the adjacent pair with the highest count over all pieces (weighted by piece counts), ties broken by
// the smaller (left id, right id); the merged token gets the next id. Pair counts are updated incrementally:
// a max-heap holds one entry per pair with the pieces it occurs in, stale counts are refreshed lazily when
// an entry reaches the top, and a merge only visits the pieces that contain its pair.
//
// One difference from rustbpe, where a rank file requires it: when the chosen pair's bytes are already a
// token (the same bytes reached by another split, e.g. "ab"+"c" after "a"+"bc"), rustbpe would create a
// second token with the same bytes, which a tiktoken rank file cannot hold. Here the existing token is
// reused: the pieces are merged into it and no id is spent (counted in `reused_merges`). And a second: a pair
// whose token would be longer than Tokenizer::kMaxTokenBytes is never merged (text that repeats one character
// for megabytes would otherwise make megabyte tokens; rustbpe has no such limit).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer/bpe_piece_counts.h"

namespace nanoforge {

struct MergeProgress {
  int32_t merges_done = 0;
  int32_t num_merges = 0;
  int64_t last_count = 0;  // the count of the pair merged last
  double seconds = 0;
  bool finished = false;  // the last call
};

struct BpeTrainOptions {
  int32_t num_merges = 0;  // new tokens to learn after the 256 bytes
  int threads = 0;         // for the initial pair count (0: all cores)
  // Called about once a second, and once at the end.
  std::function<void(const MergeProgress&)> progress;
};

struct BpeTrainResult {
  std::vector<std::string> tokens_by_rank;  // 256 single bytes in byte order, then the merges in order
  int32_t merges = 0;                       // < num_merges when no pair was left to merge
  int64_t reused_merges = 0;                // merges whose bytes were already a token (see above)
  int64_t initial_pairs = 0;                // distinct adjacent pairs before the first merge
  int64_t skipped_long_pairs = 0;           // pairs not merged: the token would exceed kMaxTokenBytes
  double seconds = 0;
};

BpeTrainResult train_bpe(const PieceCounts& counts, const BpeTrainOptions& options);

}  // namespace nanoforge
