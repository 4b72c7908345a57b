// The rule of a global batch on a world size, and the world sizes that keep a recipe's batch.
#include "train/batch_split.h"

#include <fmt/format.h>

#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "optim/training_horizon.h"

namespace nanoforge {

std::string BatchSplit::dividing_world_sizes() const {
  std::vector<int64_t> world_sizes;
  for (int64_t w = 1; w <= kMaxListedWorldSize; ++w) {
    if (divides_on(w)) world_sizes.push_back(w);
  }
  return world_sizes.empty() ? std::string("none") : fmt::format("{}", fmt::join(world_sizes, ", "));
}

absl::StatusOr<BatchSplit> recipe_batch_split(const Recipe& recipe) {
  BatchSplit split{recipe.train.horizon.total_batch_size,
                   recipe.train.device_batch_size * recipe.model.max_seq_len};
  if (split.total_batch_size > 0) return split;
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load(recipe.data.tokenizer);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        fmt::format("data.tokenizer: {}", std::string(tokenizer.status().message())));
  }
  split.total_batch_size =
      training_horizon(recipe.model, tokenizer->vocab_size(), recipe.train.horizon, recipe.optim.weight_decay)
          .total_batch_size;
  return split;
}

}  // namespace nanoforge
