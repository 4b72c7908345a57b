// The run's set-up: Trainer::open (every check, then the communicator, the run directory, the trainer),
// set_up_run, and the device a recipe asks for.
#include "train/run_setup.h"

#include <fmt/format.h>

#include "data/shards/shard_manifest.h"
#include "dist/create_communicator.h"
#include "dist/launch_env.h"
#include "doctor/nccl_env_apply.h"
#include "kernels/backend_info.h"
#include "kernels/device.h"
#include "step/kernel_choice.h"
#include "step/memory_plan.h"
#include "support/status.h"
#include "support/stop_signal.h"
#include "train/batch_split.h"
#include "train/checkpoint/resume.h"
#include "train/run_directory.h"
#include "train/trainer.h"

namespace nanoforge {
namespace {

absl::Status invalid(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

// Slurm preemption, Ctrl-C (docs/checkpoints.md, "Stopping and resuming").
constexpr StopSignalMessages kTrainingStopMessages = {
    "\nnanoforge: signal during start-up: exiting now (no step was trained by this process)\n",
    "\nnanoforge: stopping after this step (a second signal stops at once)\n",
    "\nnanoforge: second signal: exiting now (checkpoints/latest still names the last complete "
    "checkpoint)\n"};

// The recipe's kernel keys and the run's micro-batch rows, as step/kernel_choice.h asks for them.
KernelRequest kernel_request(const RunSetup& setup) {
  const Recipe& recipe = setup.recipe;
  return {.attention = recipe.model.attention,
          .mlp_gemm = recipe.model.mlp_gemm,
          .fp8 = recipe.model.fp8,
          .fp8_recipe = recipe.model.fp8_recipe,
          .deterministic = recipe.train.deterministic,
          .batch = setup.device_batch_size};
}

// The command's flags among themselves, before anything is read.
absl::Status check_options(const TrainRunOptions& options) {
  if (options.resume && !options.resume_from.empty()) {
    return absl::InvalidArgumentError("give --resume or --resume-from, not both");
  }
  if (options.stop_at_step == 0 || options.stop_at_step < -1) {
    return absl::InvalidArgumentError(fmt::format(
        "--stop-at-step {}: give a step >= 1 to stop after (or leave it unset)", options.stop_at_step));
  }
  if (!options.resume_from.empty())
    NANOFORGE_RETURN_IF_ERROR(check_resume_from_exists(options.resume_from, options.run_dir));
  return absl::OkStatus();
}

// The run's memory, planned before anything is allocated, printed by rank 0 and checked by every rank against
// what its machine has free (a GPU sharing host memory can freeze the machine when it runs out).
absl::Status check_run_fits(const RunSetup& setup, const Communicator& communicator) {
  const MemoryPlan plan = plan_training_memory(
      setup.model, setup.param_groups, setup.device, setup.device_batch_size, setup.model.sequence_len,
      communicator.rank(), communicator.world_size(),
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

absl::StatusOr<Device> resolve_train_device(const Recipe& recipe) {
  if (recipe.train.device == "cpu") return Device::kCpu;
  // gpu_available counts GPUs without creating a context: the NCCL engine binds each rank's GPU later.
  std::string reason;
  const bool usable = gpu_available(&reason);
  if (recipe.train.device == "cuda") {
    if (usable) return Device::kCuda;
    return absl::FailedPreconditionError(
        fmt::format("train.device = cuda, but no GPU is usable: {}; use train.device=cpu", reason));
  }
  // auto: a real GPU, never the CPU emulator of CUDA (nanoforge-emulated, the tests' program), which runs
  // only where train.device = cuda asks for it by name.
  return usable && !gpu_emulated() ? Device::kCuda : Device::kCpu;
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::open(const Recipe& recipe, const TrainRunOptions& options) {
  install_stop_handlers(OnStopSignal::kExit, kTrainingStopMessages);
  NANOFORGE_RETURN_IF_ERROR(check_options(options));
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
  NANOFORGE_ASSIGN_OR_RETURN(const ChosenKernels kernels,
                             choose_kernels(kernel_request(setup), device, setup.model));
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
  std::unique_ptr<Trainer> trainer(new Trainer(std::move(setup), std::move(core_bundle), options,
                                               std::move(communicator), std::move(run_dir_lock)));
  NANOFORGE_RETURN_IF_ERROR(trainer->start());
  return trainer;
}

absl::StatusOr<RunSetup> set_up_run(const Recipe& recipe, int64_t world_size, Device device) {
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load(recipe.data.tokenizer);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        fmt::format("data.tokenizer: {}", std::string(tokenizer.status().message())));
  }
  RunSetup setup(recipe, std::move(*tokenizer));
  setup.world_size = world_size;
  setup.device_batch_size = recipe.train.device_batch_size;
  setup.device = device;
  absl::StatusOr<std::string> device_name = device_display_name(device);
  if (!device_name.ok()) {
    return absl::Status(device_name.status().code(),
                        fmt::format("train.device: {}", std::string(device_name.status().message())));
  }
  setup.device_name = *device_name;
  setup.on_cuda_emulator = device == Device::kCuda && gpu_emulated();

  ShardOpenOptions open;
  open.expect.vocab_size = setup.tokenizer.vocab_size();
  open.expect.bos_id = setup.tokenizer.bos_id();
  open.expect.tokenizer_hash = setup.tokenizer.hash();
  for (auto [key, location, split, target] :
       {std::tuple{"data.train", &recipe.data.train, "train", &setup.train_data},
        std::tuple{"data.val", &recipe.data.val, "val", &setup.val_data}}) {
    absl::StatusOr<std::vector<std::string>> files = list_split_shard_files(*location, split);
    if (!files.ok()) {
      return absl::Status(files.status().code(),
                          fmt::format("{}: {}", key, std::string(files.status().message())));
    }
    // Sizes and CRC-32s against the manifest before any shard is opened. Shards that match are prep's own,
    // whose writer checked every token: their tokens are checked as batches use them, not all again here
    // (docs/data.md: what a start costs).
    absl::StatusOr<int64_t> unchanged = check_shard_files(*location, split, *files);
    if (!unchanged.ok()) {
      return absl::Status(unchanged.status().code(),
                          fmt::format("{}: {}", key, std::string(unchanged.status().message())));
    }
    open.verify_tokens = *unchanged < static_cast<int64_t>(files->size());
    absl::StatusOr<std::shared_ptr<const ShardSet>> shards = ShardSet::open(*files, open);
    if (!shards.ok()) {
      return absl::Status(shards.status().code(),
                          fmt::format("{}: {}", key, std::string(shards.status().message())));
    }
    absl::StatusOr<std::string> manifest_hash = check_shard_manifests(*location, split, **shards);
    if (!manifest_hash.ok()) {
      return absl::Status(manifest_hash.status().code(),
                          fmt::format("{}: {}", key, std::string(manifest_hash.status().message())));
    }
    if (target == &setup.train_data) setup.train_manifest_hash = *manifest_hash;
    *target = std::move(*shards);
  }

  setup.model = GPTConfig::from_sizing(recipe.model, setup.tokenizer.vocab_size());
  if (absl::Status valid = setup.model.validate(); !valid.ok()) {
    return invalid(fmt::format("[model]: {}", std::string(valid.message())));
  }
  setup.horizon = training_horizon(recipe.model, setup.tokenizer.vocab_size(), recipe.train.horizon,
                                   recipe.optim.weight_decay);
  if (setup.horizon.num_iterations < 1) {
    return invalid(
        fmt::format("the horizon is {} tokens, less than one step of {}: raise "
                    "train.target_param_data_ratio or set train.num_iterations",
                    setup.horizon.target_tokens, setup.horizon.total_batch_size));
  }
  const int64_t tokens_per_micro_step = setup.device_batch_size * recipe.model.max_seq_len * world_size;
  const BatchSplit split{setup.horizon.total_batch_size, setup.device_batch_size * recipe.model.max_seq_len};
  if (!split.divides_on(world_size)) {
    // The world sizes that keep this global batch (nanoforge launch re-forms jobs on fewer machines).
    return invalid(
        fmt::format("train.total_batch_size {} is not a multiple of device_batch_size {} x max_seq_len {} x "
                    "world size {} = {}; change one of them (this batch divides on world sizes {} up to {})",
                    setup.horizon.total_batch_size, setup.device_batch_size, recipe.model.max_seq_len,
                    world_size, tokens_per_micro_step, split.dividing_world_sizes(), kMaxListedWorldSize));
  }
  constexpr int64_t kMaxSteps = 1'000'000'000'000;
  if (setup.horizon.num_iterations > kMaxSteps) {
    return invalid(
        fmt::format("the horizon is {} steps, beyond nanoforge's limit of {}: lower train.target_flops "
                    "or train.target_param_data_ratio, or set train.num_iterations",
                    setup.horizon.num_iterations, kMaxSteps));
  }
  if (recipe.train.eval_every > 0 && recipe.train.eval_tokens > setup.val_data->token_count()) {
    return invalid(
        fmt::format("train.eval_tokens {} exceeds the {} tokens of the validation shards (data.val): "
                    "an evaluation would read the same rows again; give at most {}",
                    recipe.train.eval_tokens, setup.val_data->token_count(), setup.val_data->token_count()));
  }
  setup.grad_accum_steps = setup.horizon.total_batch_size / tokens_per_micro_step;
  setup.eval_steps = std::max<int64_t>(1, recipe.train.eval_tokens / tokens_per_micro_step);

  setup.schedule.num_iterations = setup.horizon.num_iterations;
  static_cast<ScheduleShape&>(setup.schedule) = recipe.train.schedule;
  setup.schedule.muon_weight_decay = setup.horizon.weight_decay;
  setup.layout = std::make_unique<const ParamLayout>(setup.model);
  setup.param_groups = nanochat_param_groups(setup.model, *setup.layout, recipe.optim,
                                             setup.horizon.batch_lr_scale, setup.horizon.weight_decay);
  return setup;
}

}  // namespace nanoforge
