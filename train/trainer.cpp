// run_training: set-up (every check first), then the loop of nanochat's base_train — evaluate / sample /
// checkpoint when due, then one optimizer step over grad_accum micro-batches — with one console line and one
// metrics record per step.
#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "kernels/backend_info.h"
#include "model/flops.h"
#include "model/gpt.h"
#include "optim/muon_adamw.h"
#include "optim/param_groups.h"
#include "support/status.h"
#include "train/checkpoint.h"
#include "train/checkpoint_model.h"
#include "train/evaluate.h"
#include "train/generate.h"
#include "train/metrics_log.h"
#include "train/peak_flops.h"
#include "train/run_setup.h"
#include "train/token_batch_tensors.h"

namespace nanoforge {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string minutes(double seconds) {
  return fmt::format("{:.1f}m", seconds / 60.0);
}

// "4,321".
std::string grouped(int64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

absl::Status write_text_file(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  if (!file) return absl::PermissionDeniedError(fmt::format("{}: cannot write", path));
  return absl::OkStatus();
}

// model.init_from: weights from a model.h5 file, a checkpoint directory or a run directory, for runs that
// must start where another framework's did (same-init comparisons) or from a previous run's model.
absl::Status load_initial_weights(const std::string& location, GPT& model) {
  const std::filesystem::path path(location);
  const std::string directory = path.filename() == "model.h5" ? path.parent_path().string() : location;
  absl::StatusOr<std::string> checkpoint = resolve_checkpoint(directory);
  if (!checkpoint.ok()) {
    return absl::NotFoundError(
        fmt::format("model.init_from: {}", std::string(checkpoint.status().message())));
  }
  absl::StatusOr<GPTConfig> stored = read_checkpoint_config(*checkpoint);
  if (!stored.ok()) return stored.status();
  if (stored->describe() != model.config().describe()) {
    return absl::InvalidArgumentError(
        fmt::format("model.init_from: {} holds a model with {}, the recipe builds {}", *checkpoint,
                    stored->describe(), model.config().describe()));
  }
  return load_model_weights(*checkpoint, model);
}

void print_setup(const Recipe& recipe, const RunSetup& setup, const GPT& model, const MuonAdamW& optimizer) {
  fmt::print("{}", recipe_to_toml(recipe));
  fmt::print("\nmodel: {}\n{}", setup.model.describe(), format_param_counts(model.layout().counts()));
  fmt::print("train data: {}\nval data: {}\n", setup.train_data->describe(), setup.val_data->describe());
  fmt::print(
      "horizon: {} steps of {} tokens ({} micro-batches of {} x {} per rank, {} rank{}), target {} tokens\n",
      setup.horizon.num_iterations, grouped(setup.horizon.total_batch_size), setup.grad_accum_steps,
      recipe.train.device_batch_size, recipe.model.max_seq_len, setup.world_size,
      setup.world_size > 1 ? "s" : "", grouped(setup.horizon.target_tokens));
  fmt::print("scaling: batch lr scale {:.6f}, muon weight decay {:.6f}; FLOPs/token {}\n",
             setup.horizon.batch_lr_scale, setup.horizon.weight_decay, grouped(flops_per_token(setup.model)));
  for (const ParamGroup& group : optimizer.groups()) {
    fmt::print("  {:<22} {:>3} tensors  lr {:.6g}\n", group.label, group.params.size(), group.initial_lr);
  }
  fmt::print("memory: {:.1f} MB parameters+gradients, {:.1f} MB optimizer state, {:.1f} MB activations\n",
             2.0 * model.params().bytes() / 1e6, optimizer.state_bytes() / 1e6,
             model.activation_bytes() / 1e6);
}

}  // namespace

absl::Status run_training(const Recipe& recipe, const TrainRunOptions& options) {
  set_cpu_threads(static_cast<int>(recipe.train.threads));
  NANOFORGE_ASSIGN_OR_RETURN(RunSetup setup, set_up_run(recipe, /*world_size=*/1));
  std::error_code error;
  std::filesystem::create_directories(options.run_dir, error);
  if (error)
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot create the run directory: {}", options.run_dir, error.message()));
  NANOFORGE_RETURN_IF_ERROR(write_text_file(options.run_dir + "/config.toml", recipe_to_toml(recipe)));
  NANOFORGE_ASSIGN_OR_RETURN(MetricsLog metrics, MetricsLog::open(options.run_dir + "/metrics.jsonl"));

  const int64_t batch = recipe.train.device_batch_size, seq = recipe.model.max_seq_len;
  GPT model(setup.model, Device::kCpu, DType::kF32);
  model.init_weights(static_cast<uint64_t>(recipe.train.seed));
  if (!recipe.model.init_from.empty())
    NANOFORGE_RETURN_IF_ERROR(load_initial_weights(recipe.model.init_from, model));
  model.plan(batch, seq);
  OptimizerHyperparameters hyper{recipe.optim.unembedding_lr, recipe.optim.embedding_lr,
                                 recipe.optim.scalar_lr, recipe.optim.matrix_lr, recipe.optim.weight_decay};
  MuonAdamW optimizer(nanochat_param_groups(setup.model, model.layout(), hyper, setup.horizon.batch_lr_scale,
                                            setup.horizon.weight_decay),
                      model.layout(), model.params(), model.grads());

  LoaderOptions train_options{batch, seq, /*rank=*/0, setup.world_size,
                              static_cast<uint64_t>(recipe.train.seed)};
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Loader> train_loader,
                             Loader::create(setup.train_data, train_options));
  LoaderOptions val_options = train_options;
  val_options.shuffle = false;
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Loader> val_loader, Loader::create(setup.val_data, val_options));
  const std::vector<int32_t> token_bytes = setup.tokenizer.token_byte_lengths();

  print_setup(recipe, setup, model, optimizer);
  const int64_t num_iterations = setup.horizon.num_iterations;
  const int64_t last_step =
      options.stop_at_step > 0 ? std::min(options.stop_at_step, num_iterations) : num_iterations;
  const double tokens_per_step = static_cast<double>(setup.horizon.total_batch_size);
  const double flops_per_token_value = static_cast<double>(flops_per_token(setup.model));
  TokenBatchTensors tensors(batch, seq);
  double training_seconds = 0;  // summed over timed steps (not evaluation), as nanochat's total_training_time
  int64_t timed_steps = 0;
  const Clock::time_point run_start = Clock::now();

  for (int64_t step = 0;; ++step) {
    const bool final_step = step == num_iterations;
    if (recipe.train.eval_every > 0 && (step % recipe.train.eval_every == 0 || final_step)) {
      const Clock::time_point start = Clock::now();
      NANOFORGE_ASSIGN_OR_RETURN(const BitsPerByteSums sums,
                                 evaluate_bits_per_byte(model, *val_loader, setup.eval_steps, token_bytes));
      fmt::print("step {:05d} | val bpb {:.6f} ({} tokens, {:.1f}s)\n", step, sums.bits_per_byte(),
                 grouped(sums.tokens), seconds_since(start));
      NANOFORGE_RETURN_IF_ERROR(metrics.write({{"step", step}, {"val_bpb", sums.bits_per_byte()}}));
    }
    if (recipe.train.sample_every > 0 && step > 0 && (step % recipe.train.sample_every == 0 || final_step)) {
      for (const char* prompt : sample_prompts()) {
        std::vector<int32_t> ids = {setup.tokenizer.bos_id()};
        setup.tokenizer.encode(prompt, ids);
        const std::vector<int32_t> out = generate(model, ids, {recipe.train.sample_tokens, 0.0, 0, 0});
        fmt::print("sample: {}{}\n", prompt, setup.tokenizer.decode(out));
      }
      model.plan(batch, seq);
    }
    const bool stop_here = step == last_step;
    const bool checkpoint_due =
        recipe.checkpoint.every > 0 && step > 0 && step % recipe.checkpoint.every == 0;
    if (stop_here || checkpoint_due) {
      TrainerState state;
      state.step = step;
      state.loader_state = train_loader->state().to_bytes();
      state.recipe_toml = recipe_to_toml(recipe);
      state.tokenizer_hash = setup.tokenizer.hash();
      state.training_seconds = training_seconds;
      const Clock::time_point start = Clock::now();
      NANOFORGE_RETURN_IF_ERROR(save_checkpoint(options.run_dir, model, optimizer, state));
      fmt::print("step {:05d} | checkpoint {} ({:.1f}s)\n", step, checkpoint_name(step),
                 seconds_since(start));
    }
    if (stop_here) break;

    const Clock::time_point step_start = Clock::now();
    model.zero_grad();
    double loss_sum = 0;
    for (int64_t micro = 0; micro < setup.grad_accum_steps; ++micro) {
      NANOFORGE_ASSIGN_OR_RETURN(const TokenBatch token_batch, train_loader->next());
      tensors.fill(token_batch);
      loss_sum += model.forward(tensors.ids(), tensors.targets());
      model.backward(1.0 / static_cast<double>(setup.grad_accum_steps));
    }
    const ScheduleValues schedule = schedule_at(setup.schedule, step);
    optimizer.step(schedule);
    const double step_seconds = seconds_since(step_start);
    const double loss = loss_sum / static_cast<double>(setup.grad_accum_steps);
    if (!std::isfinite(loss)) {
      return absl::InternalError(
          fmt::format("loss is {} at step {}: training diverged (lower the learning rates)", loss, step));
    }
    if (step >= 1) {  // the first step includes warm-up effects (page faults, thread start-up)
      training_seconds += step_seconds;
      ++timed_steps;
    }
    const double tokens_per_second = tokens_per_step / step_seconds;
    const std::optional<double> mfu = mfu_percent(tokens_per_second, flops_per_token_value, setup.device_name,
                                                  static_cast<int>(setup.world_size));
    const double mean_step =
        timed_steps > 0 ? training_seconds / static_cast<double>(timed_steps) : step_seconds;
    const double eta = mean_step * static_cast<double>(last_step - step - 1);
    fmt::print(
        "step {:05d}/{:05d} ({:5.2f}%) | loss {:.6f} | lrm {:.3f} | dt {:.1f}ms | tok/s {} | mfu {} | "
        "elapsed {} | eta {}\n",
        step + 1, num_iterations, 100.0 * static_cast<double>(step + 1) / static_cast<double>(num_iterations),
        loss, schedule.lr_multiplier, 1e3 * step_seconds, grouped(static_cast<int64_t>(tokens_per_second)),
        mfu ? fmt::format("{:.2f}%", *mfu) : std::string("n/a"), minutes(seconds_since(run_start)),
        minutes(eta));
    std::fflush(stdout);
    MetricRecord record = {{"step", step + 1},
                           {"loss", loss},
                           {"lr_multiplier", schedule.lr_multiplier},
                           {"tokens_per_s", tokens_per_second},
                           {"step_ms", 1e3 * step_seconds},
                           {"elapsed_s", seconds_since(run_start)}};
    if (mfu) record.push_back({"mfu", *mfu});
    NANOFORGE_RETURN_IF_ERROR(metrics.write(record));
  }
  fmt::print("done: {} steps in {}; run directory {}\n", last_step, minutes(seconds_since(run_start)),
             options.run_dir);
  return absl::OkStatus();
}

}  // namespace nanoforge
