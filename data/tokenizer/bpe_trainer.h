// The second half of BPE training: the merge loop, as rustbpe (nanochat's trainer) runs it. Each round
// merges the adjacent pair with the highest count over all pieces (weighted by piece counts), ties broken by
// the smaller (left id, right id); the merged token gets the next id. Pair counts are updated incrementally
// (a max-heap, stale entries refreshed when they reach the top). Two differences from rustbpe, argued in
// docs/tokenizer.md (Training): a pair whose bytes are already a token merges into it without spending an id
// (`reused_merges`), and no token grows past Tokenizer::kMaxTokenBytes.
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
