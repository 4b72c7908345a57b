// What a run measures besides the loss, each part saying when it is due: bits per byte on the validation
// shards (train.eval_every and the horizon's last step), nanochat's CORE metric (train.core_*) and samples
// from fixed prompts (train.sample_every), all with FP8 off as base_train's disable_fp8. Every rank
// evaluates its share; rank 0 prints the results and writes them to metrics.jsonl.
#pragma once

#include <absl/status/status.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "data/loader/loader.h"
#include "dist/communicator.h"
#include "eval/core/core_bundle.h"
#include "model/gpt.h"
#include "train/metrics_log.h"
#include "train/rank_sums.h"
#include "train/run_setup.h"

namespace nanoforge {

class Evaluation {
 public:
  // `first_step`: the step this process starts from (0, or the resumed checkpoint's); `metrics` is rank 0's
  // (null on the other ranks).
  Evaluation(GPT& model, const RunSetup& setup, std::optional<CoreBundle> core_bundle,
             std::unique_ptr<Loader> val_loader, int64_t first_step, Communicator& communicator,
             RankSums& rank_sums, MetricsLog* metrics);

  bool bits_per_byte_due(int64_t step) const;
  absl::Status bits_per_byte(int64_t step);
  bool core_metric_due(int64_t step) const;
  absl::Status core_metric(int64_t step);
  bool samples_due(int64_t step) const;
  absl::Status samples(int64_t step);

 private:
  bool last_step(int64_t step) const { return step == setup_.horizon.num_iterations; }

  GPT& model_;
  const RunSetup& setup_;
  std::optional<CoreBundle> core_bundle_;  // read before the run when train.core_bundle is set
  std::unique_ptr<Loader> val_loader_;
  int64_t first_step_;
  Communicator& communicator_;
  RankSums& rank_sums_;
  MetricsLog* metrics_;
  bool chief_;
  std::vector<int32_t> token_bytes_;  // each token's length in bytes, for bits per byte
};

}  // namespace nanoforge
