// `nanoforge bench checkpoint --depth D [--vocab V] [--dir DIR]`: what a checkpoint costs. The stall is the
// host snapshot (the training loop waits only for it); the write (HDF5 with checksums, fsync, rename) runs in
// the background; the verify is what --resume reads back. Last line: JSON.
#include <absl/flags/flag.h>
#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "cli/bench/bench_flags.h"
#include "cli/command.h"
#include "cli/common_flags.h"
#include "data/loader/loader.h"
#include "dist/create_communicator.h"
#include "kernels/backend_info.h"
#include "model/gpt.h"
#include "model/param_layout.h"
#include "optim/data_parallel_optimizer.h"
#include "optim/param_groups.h"
#include "step/memory_plan.h"
#include "support/status.h"
#include "support/temporary_directory.h"
#include "train/checkpoint/checkpoint.h"

ABSL_FLAG(
    std::string, dir, "",
    "the file system to time: the checkpoint goes to a new folder inside this directory, removed after; "
    "nothing already there is touched (default: the temporary directory)");

namespace nanoforge {
namespace {

double seconds_of(const std::function<void()>& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

absl::Status run_bench_checkpoint(const std::vector<std::string>& /*arguments*/) {
  set_cpu_threads(absl::GetFlag(FLAGS_threads));
  Recipe recipe;  // what the checkpoint records: nanochat's sizing of --depth, as from_depth builds it
  recipe.model.depth = absl::GetFlag(FLAGS_depth);
  recipe.model.max_seq_len = 2048;
  const GPTConfig config = GPTConfig::from_sizing(recipe.model, absl::GetFlag(FLAGS_vocab));
  if (absl::Status valid = config.validate(); !valid.ok()) return valid;
  const ParamLayout layout(config);
  const std::vector<ParamGroup> groups = nanochat_param_groups(config, layout, {}, 1.0, 0.28);
  NANOFORGE_ASSIGN_OR_RETURN(const AvailableMemory available, available_memory(Device::kCpu));
  NANOFORGE_RETURN_IF_ERROR(check_memory_plan(
      plan_training_memory(config, groups, Device::kCpu, 1, 2, 0, 1, int64_t{25} << 20, /*fp8=*/false),
      available));
  // A folder of its own, even inside a --dir that holds a run: a checkpoint written into a run directory
  // would become that run's `latest`.
  const std::filesystem::path parent = absl::GetFlag(FLAGS_dir).empty()
                                           ? std::filesystem::temp_directory_path()
                                           : std::filesystem::path(absl::GetFlag(FLAGS_dir));
  NANOFORGE_ASSIGN_OR_RETURN(const TemporaryDirectory scratch,
                             TemporaryDirectory::create(parent, "nanoforge_bench_checkpoint_"));
  const std::string& dir = scratch.path();
  GPT model(config, Device::kCpu, DType::kF32);
  model.init_weights(42);
  NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> communicator,
                             create_communicator(Device::kCpu, DistOptions{}));
  DataParallelOptimizer optimizer(nanochat_param_groups(config, model.layout(), {}, 1.0, 0.28),
                                  model.layout(), model.params(), model.grads(), *communicator,
                                  int64_t{25} << 20);
  fmt::print("checkpoint of {} ({} parameters) in {}\n", config.describe(), model.layout().total_numel(),
             dir);
  // A checkpoint that verifies: step 0 (the optimizer has taken no step), the recipe and a loader state.
  TrainerState trainer;
  trainer.recipe_toml = recipe_to_toml(recipe);
  LoaderState loader_state;  // a loader's at step 0 (what a checkpoint's verify accepts): rows of T + 1
  loader_state.row_capacity = recipe.model.max_seq_len + 1;
  loader_state.doc_buffer_size = LoaderOptions{}.doc_buffer_size;
  trainer.loader_state = loader_state.to_bytes();
  // The first snapshot allocates its buffers; every later one (what training sees) copies into them.
  CheckpointSnapshot snapshot;
  const auto take_snapshot = [&] {
    const absl::Status gathered = optimizer.gather_state(snapshot.optimizer_state);
    NANOFORGE_CHECK(gathered.ok(), "{}", gathered.ToString());
    take_model_snapshot(model, trainer, snapshot);
  };
  const double first_snapshot_seconds = seconds_of(take_snapshot);
  const double snapshot_seconds = seconds_of(take_snapshot);
  absl::Status status;
  const double write_seconds = seconds_of([&] { status = write_checkpoint(dir, snapshot); });
  NANOFORGE_RETURN_IF_ERROR(status);
  NANOFORGE_ASSIGN_OR_RETURN(const std::string checkpoint, latest_checkpoint(dir));
  const double verify_seconds = seconds_of([&] { status = verify_checkpoint(checkpoint); });
  NANOFORGE_RETURN_IF_ERROR(status);
  const double gigabytes = static_cast<double>(snapshot.bytes()) / 1e9;
  fmt::print("first host snapshot (allocating the buffers) {:.3f} s\n", first_snapshot_seconds);
  fmt::print(
      "host snapshot (the training stall) {:.3f} s ({:.1f} GB/s); write {:.2f} s ({:.2f} GB/s); verify "
      "{:.2f} s "
      "({:.2f} GB/s); {:.2f} GB\n",
      snapshot_seconds, gigabytes / snapshot_seconds, write_seconds, gigabytes / write_seconds,
      verify_seconds, gigabytes / verify_seconds, gigabytes);
  fmt::print(
      "{{\"bench\": \"checkpoint\", \"depth\": {}, \"parameters\": {}, \"bytes\": {}, \"stall_s\": {:.4f}, "
      "\"write_s\": {:.4f}, \"write_gb_per_s\": {:.3f}, \"verify_s\": {:.4f}}}\n",
      config.n_layer, model.layout().total_numel(), snapshot.bytes(), snapshot_seconds, write_seconds,
      gigabytes / write_seconds, verify_seconds);
  return absl::OkStatus();
}

}  // namespace

Command bench_checkpoint_command() {
  return {"bench checkpoint",
          "time a checkpoint: the host snapshot (stall), the write, the verify",
          "--depth D [--vocab V] [--dir DIR] [--threads N]",
          {"depth", "vocab", "dir", "threads"},
          run_bench_checkpoint};
}

}  // namespace nanoforge
