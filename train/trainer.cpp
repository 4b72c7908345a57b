// Trainer: the loop, and what it does at a step — build the step's request, save a checkpoint in the
// background (a failed save stops the run at the next step), report a stop, end the run with its summary.
// The set-up (Trainer::open) is train/run_setup.cpp's, the resume train/checkpoint/resume.cpp's.
#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "dist/launch_env.h"
#include "kernels/device_buffer.h"
#include "model/flops.h"
#include "optim/param_groups.h"
#include "step/memory_plan.h"
#include "support/number_format.h"
#include "support/status.h"
#include "support/stop_signal.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/model_file.h"
#include "train/checkpoint/resume.h"
#include "train/reformation_record.h"
#include "train/run_summary.h"

namespace nanoforge {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

}  // namespace

absl::Status Trainer::run() {
  if (chief_) print_setup();
  set_on_stop_signal(OnStopSignal::kAskToStop);  // the first signal: a checkpoint after this step
  for (int64_t step = first_step_;; ++step) {
    if (evaluation_->bits_per_byte_due(step)) NANOFORGE_RETURN_IF_ERROR(evaluation_->bits_per_byte(step));
    if (evaluation_->core_metric_due(step)) NANOFORGE_RETURN_IF_ERROR(evaluation_->core_metric(step));
    if (evaluation_->samples_due(step)) NANOFORGE_RETURN_IF_ERROR(evaluation_->samples(step));
    const bool last = step >= last_step_;
    // A signal on any rank, or a failed background save (an error), agreed by every rank.
    NANOFORGE_ASSIGN_OR_RETURN(const StopRequest stop, stop_vote_.agree());
    if (checkpoint_due(step, last, stop))
      NANOFORGE_RETURN_IF_ERROR(save(step, /*wait=*/last || stop.requested()));
    if (stop.requested() && !last) {  // after the last step a signal changes nothing: the run ends as planned
      report_stop(stop, step);
      return absl::OkStatus();
    }
    if (last) break;
    const Clock::time_point step_start = Clock::now();
    NANOFORGE_ASSIGN_OR_RETURN(const StepResult result, step_.run(request_for(step)));
    stop_vote_.count(result);
    NANOFORGE_RETURN_IF_ERROR(step_log_->write(
        step, result, {seconds_since(step_start), optimizer_.last_exposed_seconds(), data_wait_seconds_}));
  }
  return finish();
}

Trainer::Trainer(RunSetup setup, std::optional<CoreBundle> core_bundle, const TrainRunOptions& options,
                 std::unique_ptr<Communicator> communicator, std::optional<RunDirLock> run_dir_lock)
    : communicator_(std::move(communicator)),
      run_dir_lock_(std::move(run_dir_lock)),
      setup_(std::move(setup)),
      recipe_(setup_.recipe),
      options_(options),
      chief_(communicator_->rank() == 0),
      core_bundle_(std::move(core_bundle)),
      // On the GPU the activations are bf16; weights, gradients and optimizer state stay fp32.
      model_(setup_.model, setup_.device, training_dtype(setup_.device)),
      optimizer_(setup_.param_groups, *setup_.layout, model_.params(), model_.grads(), *communicator_,
                 static_cast<int64_t>(recipe_.dist.bucket_mb * 1024 * 1024),
                 {model_.compute_copy(), model_.compute_layout().copy_offset}),
      step_(model_, optimizer_, static_cast<int>(communicator_->world_size())),
      tensors_(setup_.device_batch_size, setup_.model.sequence_len, setup_.device),
      writer_(options.run_dir, {recipe_.checkpoint.keep_last, recipe_.checkpoint.keep_every, -1}, chief_),
      rank_sums_(*communicator_, setup_.device),
      stop_vote_(communicator_->world_size(), rank_sums_, writer_),
      last_step_(options.stop_at_step > 0 ? std::min(options.stop_at_step, setup_.horizon.num_iterations)
                                          : setup_.horizon.num_iterations) {
  model_.set_kernel_settings(setup_.kernel_settings);
}

// The weights (initialised, model.init_from, or the resumed checkpoint's), the data streams, the metrics.
absl::Status Trainer::start() {
  model_.init_weights(static_cast<uint64_t>(recipe_.train.seed));
  if (!recipe_.model.init_from.empty())
    NANOFORGE_RETURN_IF_ERROR(load_initial_weights(recipe_.model.init_from, model_));
  model_.refresh_compute_weights();
  model_.plan(setup_.device_batch_size, setup_.model.sequence_len);
  LoaderOptions val_options{setup_.device_batch_size, setup_.model.sequence_len, communicator_->rank(),
                            setup_.world_size, static_cast<uint64_t>(recipe_.train.seed)};
  val_options.shuffle = false;
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Loader> val_loader,
                             Loader::create(setup_.val_data, val_options));
  NANOFORGE_ASSIGN_OR_RETURN(
      const std::string checkpoint,
      agreed_resume_checkpoint(options_, communicator_->rank(), communicator_->world_size(),
                               [this](std::array<double, 3> values) { return rank_sums_.sum(values); }));
  double resumed_training_seconds = 0;
  DroppedSteps redone;  // rank 0's: the steps after the checkpoint that are trained again
  if (checkpoint.empty()) {
    LoaderOptions train_options = val_options;
    train_options.shuffle = true;
    NANOFORGE_ASSIGN_OR_RETURN(train_loader_, Loader::create(setup_.train_data, train_options));
  } else {
    NANOFORGE_ASSIGN_OR_RETURN(
        ResumedRun resumed,
        resume_from_checkpoint(checkpoint, setup_, options_, communicator_->rank(), model_, optimizer_));
    train_loader_ = std::move(resumed.train_loader);
    first_step_ = resumed.step;
    resumed_training_seconds = resumed.training_seconds;
    redone = resumed.redone;
    writer_.protect_step(first_step_);  // never pruned: the run may need to resume from it again
  }
  if (chief_) {
    NANOFORGE_ASSIGN_OR_RETURN(MetricsLog metrics, MetricsLog::open(options_.run_dir + "/metrics.jsonl"));
    metrics_.emplace(std::move(metrics));
    sidecar_ = MetricsSidecar::start_if_asked(recipe_.log, options_.run_dir);
    NANOFORGE_ASSIGN_OR_RETURN(const std::optional<LaunchReformation> reformation,
                               launch_reformation_from_env(process_env));
    if (reformation && !checkpoint.empty()) {
      NANOFORGE_RETURN_IF_ERROR(
          record_reformation(*reformation, first_step_, setup_.world_size, redone, *metrics_));
    }
  }
  MetricsLog* metrics = metrics_ ? &*metrics_ : nullptr;
  evaluation_.emplace(model_, setup_, std::move(core_bundle_), std::move(val_loader), first_step_,
                      *communicator_, rank_sums_, metrics);
  step_log_.emplace(setup_, options_, first_step_, last_step_, resumed_training_seconds, run_start_, metrics,
                    sidecar_.get());
  return absl::OkStatus();
}

// One optimizer step over grad_accum micro-batches from the training stream, carrying this rank's stop votes.
StepRequest Trainer::request_for(int64_t step) {
  model_.plan(setup_.device_batch_size, setup_.model.sequence_len);  // evaluation and sampling plan others
  data_wait_seconds_ = 0;
  StepRequest request;
  stop_vote_.cast(request);
  request.grad_accum_steps = setup_.grad_accum_steps;
  request.schedule = schedule_at(setup_.schedule, step);
  request.next_micro_batch = [this](int64_t) -> absl::StatusOr<MicroBatch> {
    const Clock::time_point data_start = Clock::now();
    NANOFORGE_ASSIGN_OR_RETURN(const TokenBatch token_batch, train_loader_->next());
    data_wait_seconds_ += seconds_since(data_start);
    tensors_.fill(token_batch);
    return MicroBatch{tensors_.ids(), tensors_.targets()};
  };
  return request;
}

// Every checkpoint.every steps, at the last step and when stopping; never at the step this process started
// from (its checkpoint exists), nor in a benchmark's run.
bool Trainer::checkpoint_due(int64_t step, bool last, const StopRequest& stop) const {
  const bool every = recipe_.checkpoint.every > 0 && step % recipe_.checkpoint.every == 0;
  return options_.checkpoints && step != first_step_ && (last || every || stop.requested());
}

absl::Status Trainer::save(int64_t step, bool wait) {
  TrainerState state;
  state.step = step;
  state.loader_state = train_loader_->state().to_bytes();
  state.recipe_toml = recipe_to_toml(recipe_);
  state.tokenizer_hash = setup_.tokenizer.hash();
  state.data_manifest_hash = setup_.train_manifest_hash;
  state.training_seconds = step_log_->training_seconds();
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

void Trainer::report_stop(const StopRequest& stop, int64_t step) const {
  if (!chief_) return;
  const std::string by = stop.cause();
  if (step != first_step_ && options_.checkpoints) {
    fmt::print("stopped by {} after step {} (checkpoint {} saved); continue with --resume\n", by, step,
               checkpoint_name(step));
  } else if (first_step_ > 0) {
    fmt::print(
        "stopped by {} before training a step; the checkpoint of step {} it resumed from is still "
        "the latest; continue with --resume\n",
        by, first_step_);
  } else {
    fmt::print("stopped by {} before the first step: nothing was trained and no checkpoint written\n", by);
  }
}

absl::Status Trainer::finish() {
  NANOFORGE_RETURN_IF_ERROR(writer_.wait());  // the summary names the last checkpoint
  if (!chief_) return absl::OkStatus();
  const RunSummary summary =
      summarize_run({options_.run_dir, last_step_, setup_.horizon.num_iterations, first_step_, setup_.device,
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
      setup_.device_batch_size, setup_.model.sequence_len, setup_.world_size,
      setup_.world_size > 1 ? "s" : "", with_thousands(setup_.horizon.target_tokens));
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

}  // namespace nanoforge
