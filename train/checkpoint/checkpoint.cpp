// Checkpoint writing (atomic: temporary directory, fsync, rename, then `latest`) and reading.
#include "train/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "kernels/host_transfer.h"
#include "model/gpt_config_file.h"
#include "support/h5_file.h"
#include "support/status.h"
#include "support/version.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

constexpr H5File::WriteOptions kChecksummed{.checksum = true};

// fsync a file or directory so a rename after it cannot expose unwritten data after a crash.
absl::Status sync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::InternalError(fmt::format("{}: cannot open to sync", path.string()));
  const int result = ::fsync(fd);
  ::close(fd);
  if (result != 0)
    return absl::DataLossError(fmt::format("{}: fsync failed (disk full or failing?)", path.string()));
  return absl::OkStatus();
}

absl::Status write_tensors(H5File& file, const std::vector<NamedTensor>& tensors) {
  for (const NamedTensor& tensor : tensors) {
    NANOFORGE_RETURN_IF_ERROR(file.write(tensor.dataset, tensor.shape, tensor.values.data(), kChecksummed));
  }
  return absl::OkStatus();
}

absl::Status write_model(const std::string& path, const CheckpointSnapshot& snapshot) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::create(path));
  NANOFORGE_RETURN_IF_ERROR(write_gpt_config(file, snapshot.config));
  return write_tensors(file, snapshot.weights);
}

absl::Status write_optimizer(const std::string& path, const CheckpointSnapshot& snapshot) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::create(path));
  NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute("/", "steps_taken", snapshot.optimizer_steps));
  NANOFORGE_RETURN_IF_ERROR(write_tensors(file, snapshot.optimizer_state));
  for (const NamedTensor& tensor : snapshot.optimizer_state) {
    // One rank holds whole tensors; sharded state (data parallelism) stores its rows of this global shape.
    NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute(tensor.dataset, "slice_begin", 0));
    NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute(tensor.dataset, "slice_rows", tensor.shape.at(0)));
  }
  return absl::OkStatus();
}

absl::Status write_trainer(const std::string& path, const TrainerState& trainer) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::create(path));
  NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute("/", "step", trainer.step));
  NANOFORGE_RETURN_IF_ERROR(file.write_string_attribute("/", "recipe", trainer.recipe_toml));
  NANOFORGE_RETURN_IF_ERROR(file.write_string_attribute("/", "tokenizer_hash", trainer.tokenizer_hash));
  NANOFORGE_RETURN_IF_ERROR(file.write_string_attribute("/", "nanoforge_version", std::string(version())));
  NANOFORGE_RETURN_IF_ERROR(file.write_string_attribute("/", "git_commit", std::string(git_commit())));
  const double seconds = trainer.training_seconds;
  NANOFORGE_RETURN_IF_ERROR(file.write("/training_seconds", {}, &seconds));
  return file.write("/loader_state", {static_cast<int64_t>(trainer.loader_state.size())},
                    trainer.loader_state.data(), kChecksummed);
}

// Test hook: NANOFORGE_CHECKPOINT_FAULT=STAGE@STEP aborts the process while saving the checkpoint of STEP, at
// STAGE ("after_model": model.h5 written, the rest not; "before_latest": the checkpoint in place, `latest`
// not yet updated), as a crash or kill would, so tests can check that the previous checkpoint and `latest`
// survive.
void maybe_inject_fault(const char* stage, int64_t step) {
  const char* fault = std::getenv("NANOFORGE_CHECKPOINT_FAULT");
  if (fault != nullptr && std::string_view(fault) == fmt::format("{}@{}", stage, step)) {
    fmt::print(stderr, "nanoforge: NANOFORGE_CHECKPOINT_FAULT={}: aborting mid-checkpoint\n", fault);
    std::abort();
  }
}

// Replaces `target` by `source` (a directory), keeping `target` intact until the new one is in place.
absl::Status move_into_place(const fs::path& source, const fs::path& target) {
  std::error_code error;
  fs::path displaced;
  if (fs::exists(target)) {
    displaced = target.string() + fmt::format(".replaced-{}", ::getpid());
    fs::rename(target, displaced, error);
    if (error)
      return absl::InternalError(fmt::format("cannot move aside {}: {}", target.string(), error.message()));
  }
  fs::rename(source, target, error);
  if (error)
    return absl::InternalError(
        fmt::format("cannot rename {} to {}: {}", source.string(), target.string(), error.message()));
  if (!displaced.empty()) fs::remove_all(displaced, error);
  return absl::OkStatus();
}

}  // namespace

std::string checkpoint_name(int64_t step) {
  return fmt::format("step_{:06d}", step);
}

int64_t CheckpointSnapshot::bytes() const {
  int64_t total = static_cast<int64_t>(trainer.loader_state.size());
  for (const auto* tensors : {&weights, &optimizer_state}) {
    for (const NamedTensor& tensor : *tensors)
      total += static_cast<int64_t>(tensor.values.size() * sizeof(float));
  }
  return total;
}

void take_model_snapshot(const GPT& model, TrainerState trainer, CheckpointSnapshot& snapshot) {
  const std::vector<std::string> names = model.layout().state_dict_order();
  if (snapshot.weights.size() != names.size()) snapshot.weights.assign(names.size(), {});
  for (size_t i = 0; i < names.size(); ++i) {
    snapshot.weights[i].dataset = "/weights/" + names[i];
    snapshot.weights[i].shape = model.layout().at(names[i]).shape;
    download_into(model.param(names[i]), snapshot.weights[i].values);
  }
  snapshot.config = model.config();
  snapshot.trainer = std::move(trainer);
}

absl::Status write_checkpoint(const std::string& run_dir, const CheckpointSnapshot& snapshot) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  const std::string name = checkpoint_name(snapshot.trainer.step);
  const fs::path temporary = root / fmt::format(".{}.partial-{}", name, ::getpid());
  std::error_code error;
  fs::remove_all(temporary, error);
  fs::create_directories(temporary, error);
  if (error)
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot create: {}", temporary.string(), error.message()));
  absl::Status status = write_model((temporary / "model.h5").string(), snapshot);
  if (status.ok()) maybe_inject_fault("after_model", snapshot.trainer.step);
  if (status.ok()) status = write_optimizer((temporary / "optimizer.h5").string(), snapshot);
  if (status.ok()) status = write_trainer((temporary / "trainer.h5").string(), snapshot.trainer);
  for (const char* file : {"model.h5", "optimizer.h5", "trainer.h5"}) {
    if (status.ok()) status = sync_path(temporary / file);
  }
  if (status.ok()) status = sync_path(temporary);
  if (status.ok()) status = move_into_place(temporary, root / name);
  if (status.ok()) status = sync_path(root);
  if (!status.ok()) {
    fs::remove_all(temporary, error);
    return status;
  }
  maybe_inject_fault("before_latest", snapshot.trainer.step);
  // `latest` changes only once the checkpoint it names is complete on disk.
  const fs::path latest_temporary = root / fmt::format(".latest.partial-{}", ::getpid());
  {
    std::ofstream latest(latest_temporary);
    latest << name << "\n";
    if (!latest) return absl::DataLossError(fmt::format("{}: cannot write", latest_temporary.string()));
  }
  NANOFORGE_RETURN_IF_ERROR(sync_path(latest_temporary));
  fs::rename(latest_temporary, root / "latest", error);
  if (error)
    return absl::InternalError(
        fmt::format("cannot update {}: {}", (root / "latest").string(), error.message()));
  return sync_path(root);
}

absl::StatusOr<std::string> latest_checkpoint(const std::string& run_dir) {
  const fs::path latest = fs::path(run_dir) / "checkpoints" / "latest";
  std::ifstream file(latest);
  std::string name;
  if (!file || !(file >> name))
    return absl::NotFoundError(fmt::format("{}: no checkpoint yet", latest.string()));
  return (fs::path(run_dir) / "checkpoints" / name).string();
}

absl::StatusOr<GPTConfig> read_checkpoint_config(const std::string& checkpoint_dir) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(checkpoint_dir + "/model.h5"));
  return read_gpt_config(file);
}

absl::Status load_model_weights(const std::string& checkpoint_dir, GPT& model) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(checkpoint_dir + "/model.h5"));
  model.weights_changed();  // from here on, whether every tensor loads or not: the GPU's copies are stale
  for (const ParamInfo& info : model.layout().params()) {
    NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> weight, file.read<float>("/weights/" + info.name));
    if (weight.shape != info.shape) {
      return absl::InvalidArgumentError(fmt::format("{}: /weights/{} has shape ({}), the model needs ({})",
                                                    file.path(), info.name, fmt::join(weight.shape, ", "),
                                                    fmt::join(info.shape, ", ")));
    }
    upload(model.param(info.name), weight.values.data());
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> read_optimizer_steps(const std::string& checkpoint_dir) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(checkpoint_dir + "/optimizer.h5"));
  return file.read_int_attribute("/", "steps_taken");
}

absl::StatusOr<std::vector<float>> read_optimizer_tensor(const std::string& checkpoint_dir,
                                                         const std::string& dataset, int64_t numel) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(checkpoint_dir + "/optimizer.h5"));
  NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> stored, file.read<float>(dataset));
  if (stored.numel() != numel) {
    return absl::InvalidArgumentError(fmt::format("{}: {} holds {} values, the optimizer needs {}",
                                                  file.path(), dataset, stored.numel(), numel));
  }
  return std::move(stored.values);
}

absl::StatusOr<TrainerState> read_trainer_state(const std::string& checkpoint_dir) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(checkpoint_dir + "/trainer.h5"));
  TrainerState state;
  NANOFORGE_ASSIGN_OR_RETURN(state.step, file.read_int_attribute("/", "step"));
  NANOFORGE_ASSIGN_OR_RETURN(state.recipe_toml, file.read_string_attribute("/", "recipe"));
  NANOFORGE_ASSIGN_OR_RETURN(state.tokenizer_hash, file.read_string_attribute("/", "tokenizer_hash"));
  NANOFORGE_ASSIGN_OR_RETURN(state.nanoforge_version, file.read_string_attribute("/", "nanoforge_version"));
  NANOFORGE_ASSIGN_OR_RETURN(state.git_commit, file.read_string_attribute("/", "git_commit"));
  NANOFORGE_ASSIGN_OR_RETURN(HostArray<double> seconds, file.read<double>("/training_seconds"));
  if (seconds.values.size() != 1) {
    return absl::DataLossError(
        fmt::format("{}: /training_seconds holds {} values, expected one (corrupt file)", file.path(),
                    seconds.values.size()));
  }
  state.training_seconds = seconds.values[0];
  NANOFORGE_ASSIGN_OR_RETURN(HostArray<uint8_t> loader, file.read<uint8_t>("/loader_state"));
  state.loader_state = std::move(loader.values);
  return state;
}

absl::Status verify_checkpoint(const std::string& checkpoint_dir) {
  for (const char* name : {"model.h5", "optimizer.h5", "trainer.h5"}) {
    NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(checkpoint_dir + "/" + name));
    std::vector<std::string> pending = {"/"};
    while (!pending.empty()) {
      const std::string group = pending.back();
      pending.pop_back();
      NANOFORGE_ASSIGN_OR_RETURN(const std::vector<std::string> members, file.members(group));
      for (const std::string& member : members) {
        const std::string path = (group == "/" ? "/" : group + "/") + member;
        if (file.members(path).ok()) {
          pending.push_back(path);
          continue;
        }
        // Reading checks the checksum; any numeric dataset reads as double, the loader state as bytes.
        absl::Status read =
            member == "loader_state" ? file.read<uint8_t>(path).status() : file.read<double>(path).status();
        if (!read.ok()) return read;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace nanoforge
