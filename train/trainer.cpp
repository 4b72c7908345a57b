// run_training: set-up (every check first), optional resume, then the loop of nanochat's base_train —
// evaluate / sample / checkpoint when due, then one optimizer step over grad_accum micro-batches — with one
// console line and one metrics record per step. Checkpoints are written in the background (a failed save
// stops the run at the next step); SIGTERM/SIGINT end start-up at once and stop the loop after the current
// step with a checkpoint.
#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "data/tokenizer/utf8_text.h"
#include "dist/create_communicator.h"
#include "dist/launch_env.h"
#include "doctor/nccl_env_apply.h"
#include "eval/bits_per_byte.h"
#include "eval/core/core_eval.h"
#include "eval/generate.h"
#include "eval/token_batch_tensors.h"
#include "kernels/backend_info.h"
#include "kernels/host_transfer.h"
#include "kernels/ops.h"
#include "model/flops.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "optim/param_groups.h"
#include "perf/peak_flops.h"
#include "step/training_step.h"
#include "support/number_format.h"
#include "support/status.h"
#include "support/stop_signal.h"
#include "train/checkpoint/agreement.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/model_file.h"
#include "train/checkpoint/resume.h"
#include "train/checkpoint/writer.h"
#include "train/kernel_choice.h"
#include "step/memory_plan.h"
#include "train/metrics_log.h"
#include "train/metrics_sidecar.h"
#include "train/run_dir_lock.h"
#include "train/run_directory.h"
#include "train/run_setup.h"
#include "train/run_summary.h"

namespace nanoforge {
namespace {

using Clock = std::chrono::steady_clock;

// Evaluation (bits per byte, CORE, samples) runs with FP8 off, as base_train's disable_fp8: for its scope.
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

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string minutes(double seconds) {
  return fmt::format("{:.1f}m", seconds / 60.0);
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

// The most scalars one sum_over_ranks call adds up (the bits-per-byte sums).
constexpr size_t kMaxSummedScalars = 3;

// What every rank contributed to and learnt from a step's stop votes.
struct StopVotes {
  int local_signal = 0;
  absl::Status local_failure;
  double ranks_signalled = 0, ranks_failed = 0;
};

// Everything a run holds, and the steps of the loop.
class Trainer {
 public:
  Trainer(RunSetup setup, std::optional<CoreBundle> core_bundle, const TrainRunOptions& options,
          Communicator& communicator)
      : setup_(std::move(setup)),
        core_bundle_(std::move(core_bundle)),
        recipe_(setup_.recipe),
        options_(options),
        communicator_(communicator),
        chief_(communicator.rank() == 0),
        batch_(recipe_.train.device_batch_size),
        seq_(setup_.model.sequence_len),
        // On the GPU the activations are bf16; weights, gradients and optimizer state stay fp32.
        model_(setup_.model, setup_.device, training_dtype(setup_.device)),
        optimizer_(setup_.param_groups, *setup_.layout, model_.params(), model_.grads(), communicator,
                   static_cast<int64_t>(recipe_.dist.bucket_mb * 1024 * 1024),
                   {model_.compute_copy(), model_.compute_layout().copy_offset}),
        step_(model_, optimizer_, static_cast<int>(communicator.world_size())),
        tensors_(batch_, seq_, setup_.device),
        token_bytes_(setup_.tokenizer.token_byte_lengths()),
        writer_(options.run_dir, {recipe_.checkpoint.keep_last, recipe_.checkpoint.keep_every, -1}, chief_),
        scalar_buffer_(setup_.device, kMaxSummedScalars * sizeof(double)) {
    model_.set_kernel_settings(setup_.kernel_settings);
  }

  absl::Status start();
  absl::Status run();

 private:
  absl::Status resume(const std::string& checkpoint);
  absl::StatusOr<std::vector<std::string>> check_resume_data(const std::string& checkpoint,
                                                             const TrainerState& state) const;
  absl::Status evaluate(int64_t step);
  absl::Status evaluate_core_metric(int64_t step);
  absl::Status sample(int64_t step);
  absl::Status save(int64_t step, bool wait);
  absl::Status train_step(int64_t step);
  void print_setup() const;
  int agreed_stop(absl::Status& failure);
  template <size_t kCount>
  absl::StatusOr<std::array<double, kCount>> sum_over_ranks(std::array<double, kCount> values);

  RunSetup setup_;
  std::optional<CoreBundle> core_bundle_;  // read before the run when train.core_bundle is set
  const Recipe& recipe_;                   // setup_.recipe
  const TrainRunOptions& options_;
  Communicator& communicator_;
  bool chief_;                               // rank 0: prints, writes metrics and checkpoints, samples
  std::optional<MetricsLog> metrics_;        // opened once a resume has trimmed what it will write again
  std::unique_ptr<MetricsSidecar> sidecar_;  // forwards metrics.jsonl to W&B / TensorBoard (log.*)
  int64_t batch_, seq_;
  GPT model_;
  DataParallelOptimizer optimizer_;
  TrainingStep step_;  // step/training_step.h: the step this loop, bench step and the performance model run
  std::unique_ptr<Loader> train_loader_, val_loader_;
  TokenBatchTensors tensors_;
  std::vector<int32_t> token_bytes_;
  CheckpointWriter writer_;
  DeviceBuffer scalar_buffer_;      // a few f64 on the run's device, for sum_over_ranks
  std::optional<StopVotes> votes_;  // from the step just taken, until agreed_stop uses them
  int64_t start_step_ = 0;
  double training_seconds_ = 0;  // timed steps only (not evaluation), as nanochat's total_training_time
  double resumed_training_seconds_ = 0;  // what training_seconds_ was at the resumed checkpoint
  int64_t timed_steps_ = 0;              // by this process: its ETA is its own rate
  Clock::time_point run_start_ = Clock::now();
};

// Scalars all ranks sum (loss and gradient norm, bits-per-byte sums, stop requests): one f64 all-reduce for
// all of them, through a buffer on the run's device (the NCCL engine reduces GPU buffers only). A lost rank
// fails the all-reduce: that error is returned, for the program to exit with kCommFailureExitCode.
template <size_t kCount>
absl::StatusOr<std::array<double, kCount>> Trainer::sum_over_ranks(std::array<double, kCount> values) {
  static_assert(kCount <= kMaxSummedScalars);
  if (communicator_.world_size() == 1) return values;
  const TensorView scalars(scalar_buffer_.data(), {static_cast<int64_t>(kCount)}, DType::kF64, setup_.device);
  upload<double>(scalars, values.data());
  NANOFORGE_RETURN_IF_ERROR(communicator_.all_reduce(scalars, ReduceOp::kSum).wait());
  const std::vector<double> summed = download<double>(scalars);
  std::copy(summed.begin(), summed.end(), values.begin());
  return values;
}

absl::Status Trainer::start() {
  model_.init_weights(static_cast<uint64_t>(recipe_.train.seed));
  if (!recipe_.model.init_from.empty())
    NANOFORGE_RETURN_IF_ERROR(load_initial_weights(recipe_.model.init_from, model_));
  model_.refresh_compute_weights();
  model_.plan(batch_, seq_);
  LoaderOptions val_options{batch_, seq_, communicator_.rank(), setup_.world_size,
                            static_cast<uint64_t>(recipe_.train.seed)};
  val_options.shuffle = false;
  NANOFORGE_ASSIGN_OR_RETURN(val_loader_, Loader::create(setup_.val_data, val_options));

  std::string checkpoint;
  if (options_.resume || !options_.resume_from.empty()) {
    // Every rank must start from rank 0's checkpoint: agreed before any rank loads or writes anything.
    const ResumeChoice choice = choose_resume_checkpoint(options_.run_dir, options_.resume_from, chief_);
    NANOFORGE_RETURN_IF_ERROR(agree_on_resume_checkpoint(
        choice, options_.run_dir, options_.resume_from, communicator_.rank(), communicator_.world_size(),
        [this](std::array<double, 3> values) { return sum_over_ranks(values); }));
    checkpoint = choice.checkpoint;
    if (checkpoint.empty()) {
      // Killed before its first checkpoint (a requeued job resumes blindly): the run starts over.
      if (chief_) fmt::print("resume: {} has no checkpoint yet; starting from step 0\n", options_.run_dir);
      if (chief_) NANOFORGE_RETURN_IF_ERROR(trim_metrics_after(options_.run_dir + "/metrics.jsonl", 0));
    }
  }
  if (!checkpoint.empty()) {
    NANOFORGE_RETURN_IF_ERROR(resume(checkpoint));
  } else {
    LoaderOptions train_options = val_options;
    train_options.shuffle = true;
    NANOFORGE_ASSIGN_OR_RETURN(train_loader_, Loader::create(setup_.train_data, train_options));
  }
  if (chief_) {
    NANOFORGE_ASSIGN_OR_RETURN(MetricsLog metrics, MetricsLog::open(options_.run_dir + "/metrics.jsonl"));
    metrics_.emplace(std::move(metrics));
    sidecar_ = MetricsSidecar::start_if_asked(recipe_.log, options_.run_dir);
  }
  return absl::OkStatus();
}

// The checkpoint's tokenizer and training data against this run's: what changed ("the tokenizer: ..."),
// refused unless --allow-data-change. A checkpoint without a data manifest hash cannot tell (the loader's
// fingerprint still refuses other shards when it restores its state).
absl::StatusOr<std::vector<std::string>> Trainer::check_resume_data(const std::string& checkpoint,
                                                                    const TrainerState& state) const {
  std::vector<std::string> changes;
  if (state.tokenizer_hash != setup_.tokenizer.hash()) {
    changes.push_back(
        fmt::format("tokenizer: the checkpoint was trained with tokenizer {}, data.tokenizer ({}) is {}",
                    state.tokenizer_hash, recipe_.data.tokenizer, setup_.tokenizer.hash()));
  }
  if (!state.data_manifest_hash.empty() && state.data_manifest_hash != setup_.train_manifest_hash) {
    changes.push_back(
        fmt::format("training data: the checkpoint was trained on the data set whose manifest hash is {}, "
                    "data.train ({}) "
                    "{}",
                    state.data_manifest_hash, recipe_.data.train,
                    setup_.train_manifest_hash.empty()
                        ? std::string("has no manifest")
                        : fmt::format("has manifest hash {}", setup_.train_manifest_hash)));
  }
  if (!changes.empty() && !options_.allow_data_change) {
    return absl::FailedPreconditionError(fmt::format(
        "{} cannot be resumed on this data: the {}. Resume with the data it was trained on, or add "
        "--allow-data-change to continue on the new data (the data loader then starts it from its beginning)",
        checkpoint, fmt::join(changes, "; the ")));
  }
  return changes;
}

// `checkpoint` has passed verify_checkpoint: what is checked here is whether this run may continue it.
absl::Status Trainer::resume(const std::string& checkpoint) {
  NANOFORGE_ASSIGN_OR_RETURN(const TrainerState state, read_trainer_state(checkpoint));
  NANOFORGE_ASSIGN_OR_RETURN(const Recipe saved,
                             parse_recipe(state.recipe_toml, checkpoint + "/trainer.h5 recipe"));
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<std::string> changes, resume_changes(saved, recipe_));
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<std::string> data_changes,
                             check_resume_data(checkpoint, state));
  NANOFORGE_ASSIGN_OR_RETURN(const GPTConfig stored, read_checkpoint_config(checkpoint));
  if (stored.describe() != setup_.model.describe()) {
    return absl::FailedPreconditionError(fmt::format("{}/model.h5 holds a model with {}, this run builds {}",
                                                     checkpoint, stored.describe(), setup_.model.describe()));
  }
  const int64_t num_iterations = setup_.horizon.num_iterations;
  if (state.step > num_iterations) {
    return absl::FailedPreconditionError(fmt::format(
        "{} is at step {}, beyond the run's {} steps (train.num_iterations): raise train.num_iterations to "
        "train on from it (an allowed change), or resume an earlier checkpoint with --resume-from",
        checkpoint, state.step, num_iterations));
  }
  if (options_.stop_at_step > 0 && options_.stop_at_step <= state.step) {
    return absl::InvalidArgumentError(
        fmt::format("--stop-at-step {} is not after the step {} of {}; give a later "
                    "step",
                    options_.stop_at_step, state.step, checkpoint));
  }
  // Every rank reads the checkpoint (a multi-node run keeps its run directory where all nodes see it) and
  // keeps its own share of the optimizer state, whatever the world size that wrote it.
  NANOFORGE_RETURN_IF_ERROR(load_model_weights(checkpoint, model_));
  model_.refresh_compute_weights();
  NANOFORGE_ASSIGN_OR_RETURN(const int64_t optimizer_steps, read_optimizer_steps(checkpoint));
  NANOFORGE_RETURN_IF_ERROR(
      optimizer_.load_state([&](const std::string& dataset,
                                int64_t numel) { return read_optimizer_tensor(checkpoint, dataset, numel); },
                            optimizer_steps));
  NANOFORGE_ASSIGN_OR_RETURN(const LoaderState loader_state, LoaderState::from_bytes(state.loader_state));
  LoaderOptions train_options{batch_, seq_, communicator_.rank(), setup_.world_size,
                              static_cast<uint64_t>(recipe_.train.seed)};
  absl::StatusOr<std::unique_ptr<Loader>> loader =
      Loader::create(setup_.train_data, train_options, &loader_state);
  if (!loader.ok() && options_.allow_data_change) {
    if (chief_) {
      fmt::print(
          "resume: --allow-data-change: the data loader starts the training data from its beginning "
          "({})\n",
          std::string(loader.status().message()));
    }
    loader = Loader::create(setup_.train_data, train_options);
  }
  if (!loader.ok()) {
    return absl::Status(loader.status().code(), fmt::format("resuming the data stream of {}: {}", checkpoint,
                                                            std::string(loader.status().message())));
  }
  train_loader_ = std::move(*loader);
  start_step_ = state.step;
  training_seconds_ = resumed_training_seconds_ = state.training_seconds;
  writer_.protect_step(start_step_);  // never pruned: the run may need to resume from it again
  if (!chief_) return absl::OkStatus();
  NANOFORGE_RETURN_IF_ERROR(trim_metrics_after(options_.run_dir + "/metrics.jsonl", start_step_));
  fmt::print("resume: {} at step {}{}\n", checkpoint, start_step_,
             start_step_ == num_iterations ? " (the run is complete: nothing left to train)" : "");
  for (const std::string& change : changes)
    fmt::print("resume: recipe changed: {}\n", change);
  for (const std::string& change : data_changes)
    fmt::print("resume: --allow-data-change: continuing on changed {}\n", change);
  if (state.data_manifest_hash.empty() && !setup_.train_manifest_hash.empty()) {
    fmt::print(
        "resume: {} records no data manifest (written before nanoforge recorded one): the training "
        "data is checked by the data loader's fingerprint only\n",
        checkpoint);
  }
  return absl::OkStatus();
}

absl::Status Trainer::evaluate(int64_t step) {
  const Clock::time_point start = Clock::now();
  const FullPrecision full_precision(model_);
  NANOFORGE_ASSIGN_OR_RETURN(BitsPerByteSums sums,
                             evaluate_bits_per_byte(model_, *val_loader_, setup_.eval_steps, token_bytes_));
  // Every rank evaluated its own rows of the validation stream; the sums are the whole set's.
  NANOFORGE_ASSIGN_OR_RETURN(const auto summed,
                             sum_over_ranks(std::array<double, 3>{sums.nats, static_cast<double>(sums.bytes),
                                                                  static_cast<double>(sums.tokens)}));
  const auto [nats, bytes, tokens] = summed;
  sums.nats = nats;
  sums.bytes = static_cast<int64_t>(bytes);
  sums.tokens = static_cast<int64_t>(tokens);
  NANOFORGE_RETURN_IF_ERROR(sums.check_defined());  // the same sums on every rank: all stop together
  if (!chief_) return absl::OkStatus();
  fmt::print("step {:05d} | val bpb {:.6f} ({} tokens, {:.1f}s)\n", step, sums.bits_per_byte(),
             with_thousands(sums.tokens), seconds_since(start));
  return metrics_->write({{"step", step}, {"val_bpb", sums.bits_per_byte()}});
}

// nanochat's CORE metric on every rank's share of the examples (train.core_*), then back to training shapes.
absl::Status Trainer::evaluate_core_metric(int64_t step) {
  const FullPrecision full_precision(model_);
  CoreEvalOptions options;
  options.max_per_task = recipe_.train.core.max_per_task;
  NANOFORGE_ASSIGN_OR_RETURN(const CoreResults results,
                             evaluate_core(model_, setup_.tokenizer, *core_bundle_, options, communicator_));
  model_.plan(batch_, seq_);
  if (!chief_) return absl::OkStatus();
  fmt::print("step {:05d} | CORE {:.4f} ({} tasks, {} examples, {:.1f}s)\n", step, results.core_metric,
             results.tasks.size(), results.examples, results.seconds);
  MetricRecord record = {{"step", step}, {"core_metric", results.core_metric}};
  for (const CoreTaskResult& task : results.tasks)
    record.push_back({"core/" + task.label, task.centered});  // centred accuracy, as nanochat logs
  return metrics_->write(record);
}

absl::Status Trainer::sample(int64_t step) {
  if (!chief_) return absl::OkStatus();  // one process generates; the others go on to the next collectives
  const FullPrecision full_precision(model_);
  for (const char* prompt : sample_prompts()) {
    std::vector<int32_t> ids = {setup_.tokenizer.bos_id()};
    setup_.tokenizer.encode(prompt, ids);
    const std::vector<int32_t> out = generate(model_, ids, {recipe_.train.sample_tokens, 0.0, 0, 0, {}});
    const std::string text = prompt + replace_invalid_utf8(setup_.tokenizer.decode(out));
    fmt::print("sample: {}\n", text);
    NANOFORGE_RETURN_IF_ERROR(metrics_->write({{"step", step}, {"sample", text}}));
  }
  model_.plan(batch_, seq_);
  return absl::OkStatus();
}

absl::Status Trainer::save(int64_t step, bool wait) {
  TrainerState state;
  state.step = step;
  state.loader_state = train_loader_->state().to_bytes();
  state.recipe_toml = recipe_to_toml(recipe_);
  state.tokenizer_hash = setup_.tokenizer.hash();
  state.data_manifest_hash = setup_.train_manifest_hash;
  state.training_seconds = training_seconds_;
  const Clock::time_point start = Clock::now();
  NANOFORGE_RETURN_IF_ERROR(optimizer_.sync_masters());  // collective: whole fp32 weights on every rank
  NANOFORGE_RETURN_IF_ERROR(writer_.save_async(model_, optimizer_, std::move(state)));
  if (chief_) {
    const double host_copy_seconds = seconds_since(start);
    fmt::print("step {:05d} | checkpoint {}: {:.2f}s host copy, written in the background\n", step,
               checkpoint_name(step), host_copy_seconds);
    NANOFORGE_RETURN_IF_ERROR(metrics_->write({{"step", step}, {"checkpoint_ms", 1e3 * host_copy_seconds}}));
  }
  return wait ? writer_.wait() : absl::OkStatus();
}

absl::Status Trainer::train_step(int64_t step) {
  const Clock::time_point step_start = Clock::now();
  model_.plan(batch_, seq_);  // evaluation and sampling plan other shapes
  double data_seconds = 0;
  StopVotes votes{stop_signal(), writer_.failed_write()};
  StepRequest request;
  request.grad_accum_steps = setup_.grad_accum_steps;
  request.schedule = schedule_at(setup_.schedule, step);
  request.next_micro_batch = [&](int64_t) -> absl::StatusOr<MicroBatch> {
    const Clock::time_point data_start = Clock::now();
    NANOFORGE_ASSIGN_OR_RETURN(const TokenBatch token_batch, train_loader_->next());
    data_seconds += seconds_since(data_start);
    tensors_.fill(token_batch);
    return MicroBatch{tensors_.ids(), tensors_.targets()};
  };
  request.signalled = votes.local_signal != 0;
  request.failed_save = !votes.local_failure.ok();
  NANOFORGE_ASSIGN_OR_RETURN(const StepResult result, step_.run(request));
  votes.ranks_signalled = result.ranks_signalled;
  votes.ranks_failed = result.ranks_failed_save;
  votes_ = std::move(votes);
  const ScheduleValues& schedule = request.schedule;
  const double loss = result.loss;
  const double grad_norm = result.grad_norm;
  const double step_seconds = seconds_since(step_start);
  if (!std::isfinite(loss)) {
    return absl::InternalError(
        fmt::format("loss is {} at step {}: training diverged (lower the learning rates)", loss, step));
  }
  if (step > start_step_) {  // the first step of a process includes warm-up (page faults, thread start-up)
    training_seconds_ += step_seconds;
    ++timed_steps_;
  }
  const int64_t num_iterations = setup_.horizon.num_iterations;
  const int64_t last_step =
      options_.stop_at_step > 0 ? std::min(options_.stop_at_step, num_iterations) : num_iterations;
  const double tokens_per_second = static_cast<double>(setup_.horizon.total_batch_size) / step_seconds;
  const std::optional<double> mfu =
      mfu_percent(tokens_per_second, static_cast<double>(flops_per_token(setup_.model)), setup_.device_name,
                  static_cast<int>(setup_.world_size));
  const double mean_step =
      timed_steps_ > 0 ? (training_seconds_ - resumed_training_seconds_) / static_cast<double>(timed_steps_)
                       : step_seconds;
  const double eta_seconds = mean_step * static_cast<double>(last_step - step - 1);
  if (options_.on_step) {
    options_.on_step({step + 1, setup_.horizon.total_batch_size, step_seconds,
                      optimizer_.last_exposed_seconds(), data_seconds});
  }
  if (!chief_) return absl::OkStatus();
  fmt::print(
      "step {:05d}/{:05d} ({:5.2f}%) | loss {:.6f} | gnorm {:.4f} | lrm {:.3f} | dt {:.1f}ms | tok/s {} | "
      "mfu {} | elapsed {} | eta {}\n",
      step + 1, num_iterations, 100.0 * static_cast<double>(step + 1) / static_cast<double>(num_iterations),
      loss, grad_norm, schedule.lr_multiplier, 1e3 * step_seconds,
      with_thousands(static_cast<int64_t>(tokens_per_second)),
      mfu ? fmt::format("{:.2f}%", *mfu) : std::string("n/a"), minutes(seconds_since(run_start_)),
      minutes(eta_seconds));
  std::fflush(stdout);
  MetricRecord record = {{"step", step + 1},
                         {"loss", loss},
                         {"grad_norm", grad_norm},
                         {"lr_multiplier", schedule.lr_multiplier},
                         {"tokens_per_s", tokens_per_second},
                         {"step_ms", 1e3 * step_seconds},
                         {"exposed_comm_ms", 1e3 * optimizer_.last_exposed_seconds()},
                         {"data_wait_ms", 1e3 * data_seconds},
                         {"elapsed_s", seconds_since(run_start_)},
                         {"eta_s", eta_seconds}};
  if (mfu) record.push_back({"mfu", *mfu});
  if (setup_.on_cuda_emulator) record.push_back({"emulated_gpu", setup_.device_name});  // never on a GPU
  NANOFORGE_RETURN_IF_ERROR(metrics_->write(record));
  if (sidecar_) sidecar_->check();
  return absl::OkStatus();
}

// A signal may reach some ranks and not others (a scheduler signals one node first), and only rank 0 learns
// that its background save failed; every rank must stop after the same step, so the stop is agreed on.
// Returns this rank's signal, or kSignalElsewhere when only others saw one; `failure` is set when the save
// failed (on rank 0, to its error) or the vote itself failed (a lost rank).
constexpr int kSignalElsewhere = -1;

int Trainer::agreed_stop(absl::Status& failure) {
  StopVotes votes;
  if (votes_) {  // voted in the step just taken
    votes = std::move(*votes_);
    votes_.reset();
  } else {
    votes.local_signal = stop_signal();
    votes.local_failure = writer_.failed_write();
    if (communicator_.world_size() > 1) {
      const auto summed = sum_over_ranks(
          std::array<double, 2>{votes.local_signal != 0 ? 1.0 : 0.0, votes.local_failure.ok() ? 0.0 : 1.0});
      if (!summed.ok()) {  // a lost rank: the run stops on the communicator's error
        failure = summed.status();
        return 0;
      }
      votes.ranks_signalled = (*summed)[0];
      votes.ranks_failed = (*summed)[1];
    }
  }
  if (communicator_.world_size() == 1) {  // nothing to agree on: what happened since the vote counts too
    failure = votes.local_failure.ok() ? writer_.failed_write() : votes.local_failure;
    return votes.local_signal != 0 ? votes.local_signal : stop_signal();
  }
  // Several ranks: only what every rank voted (a signal since the vote counts at the next step).
  failure = votes.local_failure;
  if (failure.ok() && votes.ranks_failed > 0)
    failure = absl::AbortedError("rank 0 could not save a checkpoint (its error says why)");
  if (votes.local_signal != 0) return votes.local_signal;
  return votes.ranks_signalled > 0 ? kSignalElsewhere : 0;
}

absl::Status Trainer::run() {
  if (chief_) print_setup();
  set_on_stop_signal(OnStopSignal::kAskToStop);  // the first signal: a checkpoint after this step
  const int64_t num_iterations = setup_.horizon.num_iterations;
  const int64_t last_step =
      options_.stop_at_step > 0 ? std::min(options_.stop_at_step, num_iterations) : num_iterations;
  for (int64_t step = start_step_;; ++step) {
    const bool final_step = step == num_iterations;
    if (recipe_.train.eval_every > 0 && (step % recipe_.train.eval_every == 0 || final_step)) {
      NANOFORGE_RETURN_IF_ERROR(evaluate(step));
    }
    // A resumed run logged the resumed step's CORE before its checkpoint.
    if (core_bundle_ && recipe_.train.core.due(step, final_step) && !(step == start_step_ && step > 0))
      NANOFORGE_RETURN_IF_ERROR(evaluate_core_metric(step));
    const bool sample_due =
        recipe_.train.sample_every > 0 && (step % recipe_.train.sample_every == 0 || final_step);
    if (sample_due && step > 0 && step != start_step_) NANOFORGE_RETURN_IF_ERROR(sample(step));
    const bool stop_here = step >= last_step;
    absl::Status save_failure;
    const int signal = agreed_stop(save_failure);
    NANOFORGE_RETURN_IF_ERROR(save_failure);
    const bool checkpoint_due = recipe_.checkpoint.every > 0 && step % recipe_.checkpoint.every == 0;
    if (options_.checkpoints && step != start_step_ && (stop_here || checkpoint_due || signal != 0)) {
      NANOFORGE_RETURN_IF_ERROR(save(step, /*wait=*/stop_here || signal != 0));
    }
    if (signal != 0 && !stop_here) {  // after the last step a signal changes nothing: the run ends as planned
      if (chief_) {
        const std::string by = signal == kSignalElsewhere ? std::string("a signal to another rank")
                                                          : fmt::format("signal {}", signal);
        if (step != start_step_ && options_.checkpoints) {
          fmt::print("stopped by {} after step {} (checkpoint {} saved); continue with --resume\n", by, step,
                     checkpoint_name(step));
        } else if (start_step_ > 0) {
          fmt::print(
              "stopped by {} before training a step; the checkpoint of step {} it resumed from is still "
              "the latest; continue with --resume\n",
              by, start_step_);
        } else {
          fmt::print("stopped by {} before the first step: nothing was trained and no checkpoint written\n",
                     by);
        }
      }
      return absl::OkStatus();
    }
    if (stop_here) break;
    NANOFORGE_RETURN_IF_ERROR(train_step(step));
  }
  NANOFORGE_RETURN_IF_ERROR(writer_.wait());  // the summary names the last checkpoint
  if (!chief_) return absl::OkStatus();
  const RunSummary summary =
      summarize_run({options_.run_dir, last_step, num_iterations, start_step_, setup_.device,
                     setup_.device_name, seconds_since(run_start_), options_.checkpoints});
  fmt::print("{}", summary.text);
  return metrics_->write(summary.record);
}

void Trainer::print_setup() const {
  if (setup_.on_cuda_emulator) {
    fmt::print(
        "WARNING: training on {}: the CPU emulator of CUDA in nanoforge-emulated, the tests' program, "
        "thousands "
        "of times slower than a GPU; train with bin/nanoforge, the GPU build\n",
        setup_.device_name);
  }
  fmt::print("{}", recipe_to_toml(recipe_));
  fmt::print("\nmodel: {}\n{}", setup_.model.describe(), format_param_counts(model_.layout().counts()));
  fmt::print("train data: {}\nval data: {}\n", setup_.train_data->describe(), setup_.val_data->describe());
  fmt::print(
      "horizon: {} steps of {} tokens ({} micro-batches of {} x {} per rank, {} rank{}), target {} tokens\n",
      setup_.horizon.num_iterations, with_thousands(setup_.horizon.total_batch_size), setup_.grad_accum_steps,
      batch_, seq_, setup_.world_size, setup_.world_size > 1 ? "s" : "",
      with_thousands(setup_.horizon.target_tokens));
  fmt::print("scaling: batch lr scale {:.6f}, muon weight decay {:.6f}; FLOPs/token {}\n",
             setup_.horizon.batch_lr_scale, setup_.horizon.weight_decay,
             with_thousands(flops_per_token(setup_.model)));
  for (const ParamGroup& group : optimizer_.groups()) {
    fmt::print("  {:<22} {:>3} tensors  lr {:.6g}\n", group.label, group.params.size(), group.initial_lr);
  }
  fmt::print("{}\n", optimizer_.describe());
  fmt::print(
      "memory allocated by this rank: {:.3f} GB on {} ({:.1f} MB optimizer state, {:.1f} MB activations)\n",
      device_bytes_in_use(setup_.device) / 1e9, setup_.device_name, optimizer_.state_bytes() / 1e6,
      model_.activation_bytes() / 1e6);
  std::fflush(stdout);
}

// The run's memory, planned before anything is allocated, printed by rank 0 and checked by every rank against
// what its machine has free (a GPU sharing host memory can freeze the machine when it runs out).
absl::Status check_run_fits(const RunSetup& setup, const Communicator& communicator) {
  const MemoryPlan plan = plan_training_memory(
      setup.model, setup.param_groups, setup.device, setup.recipe.train.device_batch_size,
      setup.model.sequence_len, communicator.rank(), communicator.world_size(),
      static_cast<int64_t>(setup.recipe.dist.bucket_mb * 1024 * 1024), setup.recipe.model.fp8);
  NANOFORGE_ASSIGN_OR_RETURN(const AvailableMemory available, available_memory(setup.device));
  const absl::Status fits = check_memory_plan(plan, available);
  if (!fits.ok()) {  // the refusal holds the table
    return absl::Status(fits.code(),
                        fmt::format("rank {}: {}", communicator.rank(), std::string(fits.message())));
  }
  if (communicator.rank() == 0) fmt::print("{}", plan.table());
  return absl::OkStatus();
}

}  // namespace

// Slurm preemption, Ctrl-C (docs/checkpoints.md, "Stopping and resuming").
constexpr StopSignalMessages kTrainingStopMessages = {
    "\nnanoforge: signal during start-up: exiting now (no step was trained by this process)\n",
    "\nnanoforge: stopping after this step (a second signal stops at once)\n",
    "\nnanoforge: second signal: exiting now (checkpoints/latest still names the last complete "
    "checkpoint)\n"};

absl::Status run_training(const Recipe& recipe, const TrainRunOptions& options) {
  install_stop_handlers(OnStopSignal::kExit, kTrainingStopMessages);
  if (options.resume && !options.resume_from.empty()) {
    return absl::InvalidArgumentError("give --resume or --resume-from, not both");
  }
  if (options.stop_at_step == 0 || options.stop_at_step < -1) {
    return absl::InvalidArgumentError(fmt::format(
        "--stop-at-step {}: give a step >= 1 to stop after (or leave it unset)", options.stop_at_step));
  }
  if (!options.resume_from.empty())
    NANOFORGE_RETURN_IF_ERROR(check_resume_from_exists(options.resume_from, options.run_dir));
  NANOFORGE_RETURN_IF_ERROR(validate_recipe(recipe));  // before any rank starts talking to the others
  set_cpu_threads(static_cast<int>(recipe.train.threads));
  NANOFORGE_RETURN_IF_ERROR(recipe.train.core.validate());
  std::optional<CoreBundle> core_bundle;
  if (recipe.train.core.enabled()) {
    NANOFORGE_ASSIGN_OR_RETURN(core_bundle, recipe.train.core.read_bundle());
  }
  NANOFORGE_ASSIGN_OR_RETURN(const Device device, resolve_train_device(recipe));
  // NCCL reads its environment when the communicator is created: doctor's settings for this machine first
  // (one process creates no NCCL communicator: nothing to set or print).
  NANOFORGE_ASSIGN_OR_RETURN(const LaunchEnv launch, launch_env_from_process());
  if (device == Device::kCuda && launch.world_size > 1) apply_advised_nccl_environment_for_run();
  // The NCCL engine binds this rank's GPU (local rank) before anything else touches CUDA.
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> communicator,
                             create_communicator(device, {recipe.dist.timeout_seconds}));
  install_stop_handlers(OnStopSignal::kExit, kTrainingStopMessages);  // again: MPI may have replaced them
  NANOFORGE_ASSIGN_OR_RETURN(RunSetup setup, set_up_run(recipe, communicator->world_size(), device));
  // The run's kernels and its memory, before the run directory is touched: a refusal writes nothing.
  NANOFORGE_ASSIGN_OR_RETURN(const ChosenKernels kernels, choose_kernels(recipe, device, setup.model));
  setup.kernel_settings = kernels.settings;
  if (communicator->rank() == 0) fmt::print("{}", kernels.lines);
  NANOFORGE_RETURN_IF_ERROR(check_run_fits(setup, *communicator));
  std::optional<RunDirLock> run_dir_lock;  // held until the trainer (and its checkpoint writer) is gone
  if (communicator->rank() == 0) {
    NANOFORGE_ASSIGN_OR_RETURN(
        RunDirLock lock, claim_run_directory(options.run_dir, !options.resume && options.resume_from.empty(),
                                             recipe_to_toml(recipe)));
    run_dir_lock.emplace(std::move(lock));
    fmt::print("dist: {} rank{} ({})\n", communicator->world_size(),
               communicator->world_size() > 1 ? "s" : "", communicator->engine_name());
  }
  // Rank 0 made the run directory; the others read from it (resume) only after this.
  NANOFORGE_RETURN_IF_ERROR(communicator->barrier());
  Trainer trainer(std::move(setup), std::move(core_bundle), options, *communicator);
  NANOFORGE_RETURN_IF_ERROR(trainer.start());
  return trainer.run();
}

}  // namespace nanoforge
