// set_up_run and validate_recipe.
#include "train/run_setup.h"

#include <fmt/format.h>

#include "kernels/cuda/cuda_memory.h"
#include "support/status.h"

namespace nanoforge {
namespace {

absl::Status invalid(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

}  // namespace

absl::Status validate_recipe(const Recipe& r) {
  if (r.model.depth < 1) return invalid(fmt::format("model.depth must be >= 1, got {}", r.model.depth));
  if (r.model.max_seq_len < 2)
    return invalid(fmt::format("model.max_seq_len must be >= 2, got {}", r.model.max_seq_len));
  if (r.model.head_dim < 2 || r.model.aspect_ratio < 1) {
    return invalid("model.head_dim must be >= 2 and model.aspect_ratio >= 1");
  }
  if (r.data.train.empty() || r.data.val.empty() || r.data.tokenizer.empty()) {
    return invalid(
        "data.train, data.val and data.tokenizer must all be set (nanoforge prep writes all three; "
        "see docs/data.md)");
  }
  if (r.train.device_batch_size < 1) {
    return invalid(fmt::format("train.device_batch_size must be >= 1, got {}", r.train.device_batch_size));
  }
  if (r.train.horizon.total_batch_size == 0 || r.train.horizon.total_batch_size < -1) {
    return invalid(fmt::format("train.total_batch_size must be > 0 or -1 (automatic), got {}",
                               r.train.horizon.total_batch_size));
  }
  if (r.train.horizon.num_iterations == 0 || r.train.horizon.num_iterations < -1) {
    return invalid(fmt::format("train.num_iterations must be > 0 or -1 (from the horizon), got {}",
                               r.train.horizon.num_iterations));
  }
  if (r.train.horizon.target_param_data_ratio <= 0)
    return invalid("train.target_param_data_ratio must be positive");
  if (r.train.schedule.warmup_steps < 0) return invalid("train.warmup_steps must be >= 0");
  if (r.train.schedule.warmdown_ratio < 0 || r.train.schedule.warmdown_ratio > 1)
    return invalid("train.warmdown_ratio must be in [0, 1]");
  if (r.train.schedule.final_lr_frac < 0 || r.train.schedule.final_lr_frac > 1)
    return invalid("train.final_lr_frac must be in [0, 1]");
  if (r.train.eval_every == 0 || r.train.eval_every < -1)
    return invalid("train.eval_every must be > 0 or -1 (never)");
  if (r.train.sample_every == 0 || r.train.sample_every < -1)
    return invalid("train.sample_every must be > 0 or -1 (never)");
  if (r.train.eval_tokens < 1) return invalid("train.eval_tokens must be >= 1");
  if (r.train.device != "auto" && r.train.device != "cpu" && r.train.device != "cuda") {
    return invalid(fmt::format("train.device must be auto, cpu or cuda, got '{}'", r.train.device));
  }
  if (r.train.threads < 0) return invalid("train.threads must be >= 0 (0: all cores)");
  for (const auto& [name, lr] : {std::pair{"optim.unembedding_lr", r.optim.unembedding_lr},
                                 {"optim.embedding_lr", r.optim.embedding_lr},
                                 {"optim.scalar_lr", r.optim.scalar_lr},
                                 {"optim.matrix_lr", r.optim.matrix_lr}}) {
    if (lr < 0) return invalid(fmt::format("{} must be >= 0, got {}", name, lr));
  }
  if (r.optim.weight_decay < 0) return invalid("optim.weight_decay must be >= 0");
  if (r.checkpoint.every == 0 || r.checkpoint.every < -1)
    return invalid("checkpoint.every must be > 0 or -1 (at the end)");
  if (r.checkpoint.keep_last == 0 || r.checkpoint.keep_last < -1) {
    return invalid("checkpoint.keep_last must be >= 1 or -1 (keep all)");
  }
  if (r.checkpoint.keep_every == 0 || r.checkpoint.keep_every < -1) {
    return invalid("checkpoint.keep_every must be >= 1 or -1 (none)");
  }
  if (r.dist.timeout_seconds <= 0) return invalid("dist.timeout_seconds must be positive");
  if (!(r.dist.bucket_mb > 0 && r.dist.bucket_mb <= 4096)) {
    return invalid("dist.bucket_mb must be in (0, 4096] MB (PyTorch DDP uses 25)");
  }
  return absl::OkStatus();
}

absl::StatusOr<Device> resolve_train_device(const Recipe& recipe) {
  if (recipe.train.device == "cpu") return Device::kCpu;
  // cuda::available counts GPUs without creating a context: the NCCL engine binds each rank's GPU later.
  std::string reason;
  if (cuda::available(&reason)) return Device::kCuda;
  if (recipe.train.device == "cuda") {
    return absl::FailedPreconditionError(
        fmt::format("train.device = cuda, but no GPU is usable: {}; use train.device=cpu", reason));
  }
  return Device::kCpu;
}

absl::StatusOr<std::string> device_display_name(Device device) {
  if (device == Device::kCpu) return std::string("cpu");
  cuda::DeviceMemoryInfo gpu;
  std::string reason;
  if (!cuda::device_memory_info(&gpu, &reason)) {
    return absl::FailedPreconditionError(fmt::format("the GPU is not usable: {}", reason));
  }
  return gpu.name;
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

  ShardOpenOptions open;
  open.expect.vocab_size = setup.tokenizer.vocab_size();
  open.expect.bos_id = setup.tokenizer.bos_id();
  open.expect.tokenizer_hash = setup.tokenizer.hash();
  for (auto [key, location, split, target] :
       {std::tuple{"data.train", &recipe.data.train, "train", &setup.train_data},
        std::tuple{"data.val", &recipe.data.val, "val", &setup.val_data}}) {
    absl::StatusOr<std::vector<std::string>> files = list_shard_files(*location, split);
    if (!files.ok()) files = list_shard_files(*location, "");  // a location holding only this split
    if (!files.ok()) {
      return absl::NotFoundError(fmt::format("{}: {}", key, std::string(files.status().message())));
    }
    absl::StatusOr<std::shared_ptr<const ShardSet>> shards = ShardSet::open(*files, open);
    if (!shards.ok()) {
      return absl::Status(shards.status().code(),
                          fmt::format("{}: {}", key, std::string(shards.status().message())));
    }
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
