// set_up_run, and the device a recipe asks for.
#include "train/run_setup.h"

#include <fmt/format.h>

#include "data/shards/shard_manifest.h"
#include "kernels/device.h"
#include "support/status.h"

namespace nanoforge {
namespace {

absl::Status invalid(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
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

absl::StatusOr<RunSetup> set_up_run(const Recipe& recipe, int64_t world_size, Device device) {
  NANOFORGE_RETURN_IF_ERROR(validate_recipe(recipe));
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load(recipe.data.tokenizer);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        fmt::format("data.tokenizer: {}", std::string(tokenizer.status().message())));
  }
  RunSetup setup(recipe, std::move(*tokenizer));
  setup.world_size = world_size;
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
  const int64_t tokens_per_micro_step =
      recipe.train.device_batch_size * recipe.model.max_seq_len * world_size;
  if (setup.horizon.total_batch_size % tokens_per_micro_step != 0) {
    return invalid(
        fmt::format("train.total_batch_size {} is not a multiple of device_batch_size {} x max_seq_len {} x "
                    "world size {} = {}; "
                    "change one of them",
                    setup.horizon.total_batch_size, recipe.train.device_batch_size, recipe.model.max_seq_len,
                    world_size, tokens_per_micro_step));
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
