// Evaluation: each result printed as "step NNNNN | ..." and recorded with its step; CORE and sampling plan
// other shapes, so the model is planned for the training micro-batch again after them.
#include "train/evaluation.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <string>

#include "data/tokenizer/utf8_text.h"
#include "eval/bits_per_byte.h"
#include "eval/core/core_eval.h"
#include "eval/generate.h"
#include "support/number_format.h"
#include "support/status.h"

namespace nanoforge {
namespace {

// FP8 off for its scope.
class FullPrecision {
 public:
  explicit FullPrecision(GPT& model) : model_(model), settings_(model.kernel_settings()) {
    ops::KernelSettings without_fp8 = settings_;
    without_fp8.fp8 = false;
    model_.set_kernel_settings(without_fp8);
  }
  ~FullPrecision() { model_.set_kernel_settings(settings_); }
  FullPrecision(const FullPrecision&) = delete;
  FullPrecision& operator=(const FullPrecision&) = delete;

 private:
  GPT& model_;
  ops::KernelSettings settings_;
};

}  // namespace

Evaluation::Evaluation(GPT& model, const RunSetup& setup, std::optional<CoreBundle> core_bundle,
                       std::unique_ptr<Loader> val_loader, int64_t first_step, Communicator& communicator,
                       RankSums& rank_sums, MetricsLog* metrics)
    : model_(model),
      setup_(setup),
      core_bundle_(std::move(core_bundle)),
      val_loader_(std::move(val_loader)),
      first_step_(first_step),
      communicator_(communicator),
      rank_sums_(rank_sums),
      metrics_(metrics),
      chief_(communicator.rank() == 0),
      token_bytes_(setup.tokenizer.token_byte_lengths()) {}

bool Evaluation::bits_per_byte_due(int64_t step) const {
  const int64_t every = setup_.recipe.train.eval_every;
  return every > 0 && (step % every == 0 || last_step(step));
}

absl::Status Evaluation::bits_per_byte(int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  const FullPrecision full_precision(model_);
  NANOFORGE_ASSIGN_OR_RETURN(BitsPerByteSums sums,
                             evaluate_bits_per_byte(model_, *val_loader_, setup_.eval_steps, token_bytes_));
  // Every rank evaluated its own rows of the validation stream; the sums are the whole set's.
  NANOFORGE_ASSIGN_OR_RETURN(const auto summed,
                             rank_sums_.sum(std::array<double, 3>{sums.nats, static_cast<double>(sums.bytes),
                                                                  static_cast<double>(sums.tokens)}));
  const auto [nats, bytes, tokens] = summed;
  sums.nats = nats;
  sums.bytes = static_cast<int64_t>(bytes);
  sums.tokens = static_cast<int64_t>(tokens);
  NANOFORGE_RETURN_IF_ERROR(sums.check_defined());  // the same sums on every rank: all stop together
  if (!chief_) return absl::OkStatus();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("step {:05d} | val bpb {:.6f} ({} tokens, {:.1f}s)\n", step, sums.bits_per_byte(),
             with_thousands(sums.tokens), seconds);
  return metrics_->write({{"step", step}, {"val_bpb", sums.bits_per_byte()}});
}

// A resumed run logged the resumed step's CORE before its checkpoint.
bool Evaluation::core_metric_due(int64_t step) const {
  return core_bundle_ && setup_.recipe.train.core.due(step, last_step(step)) &&
         !(step == first_step_ && step > 0);
}

// On every rank's share of the examples (train.core_*).
absl::Status Evaluation::core_metric(int64_t step) {
  const FullPrecision full_precision(model_);
  CoreEvalOptions options;
  options.max_per_task = setup_.recipe.train.core.max_per_task;
  NANOFORGE_ASSIGN_OR_RETURN(const CoreResults results,
                             evaluate_core(model_, setup_.tokenizer, *core_bundle_, options, communicator_));
  model_.plan(setup_.device_batch_size, setup_.model.sequence_len);
  if (!chief_) return absl::OkStatus();
  fmt::print("step {:05d} | CORE {:.4f} ({} tasks, {} examples, {:.1f}s)\n", step, results.core_metric,
             results.tasks.size(), results.examples, results.seconds);
  MetricRecord record = {{"step", step}, {"core_metric", results.core_metric}};
  for (const CoreTaskResult& task : results.tasks)
    record.push_back({"core/" + task.label, task.centered});  // centred accuracy, as nanochat logs
  return metrics_->write(record);
}

// Not at step 0 (an untrained model) nor at the step a resumed run starts from (sampled before its
// checkpoint).
bool Evaluation::samples_due(int64_t step) const {
  const int64_t every = setup_.recipe.train.sample_every;
  return every > 0 && (step % every == 0 || last_step(step)) && step > 0 && step != first_step_;
}

absl::Status Evaluation::samples(int64_t step) {
  if (!chief_) return absl::OkStatus();  // one process generates; the others go on to the next collectives
  const FullPrecision full_precision(model_);
  for (const char* prompt : sample_prompts()) {
    std::vector<int32_t> ids = {setup_.tokenizer.bos_id()};
    setup_.tokenizer.encode(prompt, ids);
    const std::vector<int32_t> out =
        generate(model_, ids, {setup_.recipe.train.sample_tokens, 0.0, 0, 0, {}});
    const std::string text = prompt + replace_invalid_utf8(setup_.tokenizer.decode(out));
    fmt::print("sample: {}\n", text);
    NANOFORGE_RETURN_IF_ERROR(metrics_->write({{"step", step}, {"sample", text}}));
  }
  model_.plan(setup_.device_batch_size, setup_.model.sequence_len);
  return absl::OkStatus();
}

}  // namespace nanoforge
