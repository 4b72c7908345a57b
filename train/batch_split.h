// How a step's global batch splits over the ranks: train.total_batch_size tokens must be a whole number of
// micro-batches (device_batch_size x max_seq_len tokens) on every rank. Trainer::open refuses a world size
// the batch does not divide, and `nanoforge launch` a --nnodes range with one, both naming the world sizes
// that divide it from this one rule, so that the two messages never disagree.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <string>

#include "train/recipe.h"

namespace nanoforge {

// A batch that does not divide names the world sizes that would, up to this many ranks.
inline constexpr int64_t kMaxListedWorldSize = 64;

struct BatchSplit {
  int64_t total_batch_size = 0;  // tokens per optimizer step
  int64_t rank_tokens = 0;       // one rank's micro-batch: device_batch_size x max_seq_len

  bool divides_on(int64_t world_size) const { return total_batch_size % (rank_tokens * world_size) == 0; }
  // "1, 2, 4, 8, 16, 32, 64": the world sizes up to kMaxListedWorldSize it divides on ("none" if none).
  std::string dividing_world_sizes() const;
};

// The split `nanoforge train` runs `recipe` with (a recipe that has passed validate_recipe): its
// train.total_batch_size, or with -1 nanochat's power law on the model it builds with its tokenizer's
// vocabulary (data.tokenizer is read; an error names the key as the run's own would).
absl::StatusOr<BatchSplit> recipe_batch_split(const Recipe& recipe);

}  // namespace nanoforge
