// Checkpoint writing (atomic: temporary directory, fsync, manifest, rename, then `latest`), reading and
// verifying.
#include "train/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <regex>
#include <string_view>

#include "h5/file.h"
#include "kernels/host_transfer.h"
#include "model/gpt_config_file.h"
#include "model/param_layout.h"
#include "support/check.h"
#include "support/fault_point.h"
#include "support/status.h"
#include "support/version.h"
#include "train/checkpoint/manifest.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

constexpr H5File::WriteOptions kChecksummed{.checksum = true};

// fsync a file or directory so a rename after it cannot expose unwritten data after a crash.
absl::Status sync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(
        fmt::format("{}: cannot open to sync: {}", path.string(), std::strerror(errno)));
  }
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0) {
    return absl::DataLossError(
        fmt::format("{}: fsync failed (disk full or failing?): {}", path.string(), std::strerror(error)));
  }
  return absl::OkStatus();
}

constexpr char kFormatAttribute[] = "checkpoint_format";
constexpr const char* kCheckpointFiles[] = {"model.h5", "optimizer.h5", "trainer.h5"};
// Bounds on what trainer.h5 may claim (the real values are a few KB at most).
constexpr int64_t kMaxRecipeBytes = int64_t{1} << 20;
constexpr int64_t kMaxLabelBytes = 4096;  // tokenizer hash, version, commit
constexpr int64_t kMaxLoaderStateBytes = int64_t{64} << 20;

absl::Status write_tensors(H5File& file, const std::vector<NamedTensor>& tensors) {
  for (const NamedTensor& tensor : tensors) {
    NANOFORGE_RETURN_IF_ERROR(file.write(tensor.dataset, tensor.shape, tensor.values.data(), kChecksummed));
  }
  return absl::OkStatus();
}

// A text as a checksummed 1-D uint8 dataset: its bytes are covered by Fletcher-32 like any tensor, and
// reading it never goes through libhdf5's global heap.
absl::Status write_text(H5File& file, const std::string& dataset, std::string_view text) {
  return file.write(dataset, {static_cast<int64_t>(text.size())},
                    reinterpret_cast<const uint8_t*>(text.data()), kChecksummed);
}

// One number as a checksummed one-element dataset (a scalar dataset cannot carry a checksum).
template <class T>
absl::Status write_number(H5File& file, const std::string& dataset, T value) {
  return file.write(dataset, {1}, &value, kChecksummed);
}

// Creates a checkpoint file, fills it and closes it, reporting an error HDF5 gives only at close.
absl::Status write_file(const std::string& path, const std::function<absl::Status(H5File&)>& fill) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::create(path));
  NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute("/", kFormatAttribute, kCheckpointFormat));
  absl::Status status = fill(file);
  const absl::Status closed = file.close();
  return status.ok() ? closed : status;
}

absl::Status write_model(const std::string& path, const CheckpointSnapshot& snapshot) {
  return write_file(path, [&](H5File& file) {
    NANOFORGE_RETURN_IF_ERROR(write_gpt_config(file, snapshot.config));
    return write_tensors(file, snapshot.weights);
  });
}

absl::Status write_optimizer(const std::string& path, const CheckpointSnapshot& snapshot) {
  return write_file(path, [&](H5File& file) {
    NANOFORGE_RETURN_IF_ERROR(write_number<int64_t>(file, "/steps_taken", snapshot.optimizer_steps));
    NANOFORGE_RETURN_IF_ERROR(write_tensors(file, snapshot.optimizer_state));
    for (const NamedTensor& tensor : snapshot.optimizer_state) {
      // One rank holds whole tensors; sharded state (data parallelism) stores its rows of this global shape.
      NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute(tensor.dataset, "slice_begin", 0));
      NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute(tensor.dataset, "slice_rows", tensor.shape.at(0)));
    }
    return absl::OkStatus();
  });
}

absl::Status write_trainer(const std::string& path, const TrainerState& trainer) {
  return write_file(path, [&](H5File& file) {
    NANOFORGE_RETURN_IF_ERROR(write_number<int64_t>(file, "/step", trainer.step));
    NANOFORGE_RETURN_IF_ERROR(write_number<double>(file, "/training_seconds", trainer.training_seconds));
    NANOFORGE_RETURN_IF_ERROR(write_text(file, "/recipe", trainer.recipe_toml));
    NANOFORGE_RETURN_IF_ERROR(write_text(file, "/tokenizer_hash", trainer.tokenizer_hash));
    NANOFORGE_RETURN_IF_ERROR(write_text(file, "/data_manifest_hash", trainer.data_manifest_hash));
    NANOFORGE_RETURN_IF_ERROR(write_text(file, "/nanoforge_version", version()));
    NANOFORGE_RETURN_IF_ERROR(write_text(file, "/git_commit", git_commit()));
    return file.write("/loader_state", {static_cast<int64_t>(trainer.loader_state.size())},
                      trainer.loader_state.data(), kChecksummed);
  });
}

// The first tensor holding a value that is not finite, as "NAME (VALUE at index I)"; empty when all are.
std::string first_non_finite(const std::vector<NamedTensor>& tensors) {
  for (const NamedTensor& tensor : tensors) {
    for (size_t i = 0; i < tensor.values.size(); ++i) {
      if (!std::isfinite(tensor.values[i]))
        return fmt::format("{} ({} at index {})", tensor.dataset, tensor.values[i], i);
    }
  }
  return "";
}

// CHECKPOINT/NAME opened for reading, written in this checkpoint format.
absl::StatusOr<H5File> open_checkpoint_file(const std::string& checkpoint_dir, const std::string& name) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(checkpoint_dir + "/" + name));
  const absl::StatusOr<int64_t> format = file.read_int_attribute("/", kFormatAttribute);
  if (!format.ok()) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: no {} attribute: a checkpoint of format 1, written by an older nanoforge; upgrade it with "
        "python3 tools/upgrade_h5.py checkpoint {}",
        file.path(), kFormatAttribute, checkpoint_dir));
  }
  if (*format != kCheckpointFormat) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: checkpoint format {}; this nanoforge reads format {}", file.path(), *format, kCheckpointFormat));
  }
  return file;
}

absl::StatusOr<std::string> read_text(const H5File& file, const std::string& dataset, int64_t max_bytes) {
  NANOFORGE_ASSIGN_OR_RETURN(const HostArray<uint8_t> bytes, file.read<uint8_t>(dataset));
  if (bytes.shape.size() != 1 || bytes.numel() > max_bytes) {
    return absl::DataLossError(
        fmt::format("{}: dataset {} must be at most {} bytes of text, found shape ({})", file.path(), dataset,
                    max_bytes, fmt::join(bytes.shape, ", ")));
  }
  return std::string(bytes.values.begin(), bytes.values.end());
}

template <class T>
absl::StatusOr<T> read_number(const H5File& file, const std::string& dataset) {
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<T> values, file.read_vector<T>(dataset, 1));
  return values[0];
}

// The fault point of a save (support/fault_point.h), N the checkpoint's step: after_model (model.h5 written,
// the rest not), before_latest (the checkpoint in place, `latest` not yet updated). Tests check that the
// previous checkpoint and `latest` survive.
const absl::StatusOr<FaultPoint>& checkpoint_fault() {
  static const absl::StatusOr<FaultPoint> fault =
      FaultPoint::from_environment("NANOFORGE_CHECKPOINT_FAULT", {"after_model", "before_latest"});
  return fault;
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
  NANOFORGE_CHECK(step >= 0, "checkpoint_name: step {} is negative", step);
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
  NANOFORGE_RETURN_IF_ERROR(checkpoint_fault().status());
  const fs::path root = fs::path(run_dir) / "checkpoints";
  const std::string name = checkpoint_name(snapshot.trainer.step);
  for (const auto* tensors : {&snapshot.weights, &snapshot.optimizer_state}) {
    if (const std::string bad = first_non_finite(*tensors); !bad.empty()) {
      return absl::FailedPreconditionError(fmt::format(
          "step {}: not saving {}: {} is not finite — training diverged (lower the learning rates); the "
          "checkpoints already written are untouched",
          snapshot.trainer.step, name, bad));
    }
  }
  const fs::path temporary = root / fmt::format(".{}.partial-{}", name, ::getpid());
  std::error_code error;
  fs::remove_all(temporary, error);
  fs::create_directories(temporary, error);
  if (error)
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot create: {}", temporary.string(), error.message()));
  absl::Status status = write_model((temporary / "model.h5").string(), snapshot);
  if (status.ok()) checkpoint_fault()->pass("after_model", snapshot.trainer.step);
  if (status.ok()) status = write_optimizer((temporary / "optimizer.h5").string(), snapshot);
  if (status.ok()) status = write_trainer((temporary / "trainer.h5").string(), snapshot.trainer);
  for (const char* file : kCheckpointFiles) {
    if (status.ok()) status = sync_path(temporary / file);
  }
  // The manifest comes last: it records the files as they now are on disk.
  if (status.ok())
    status = write_manifest(temporary.string(), {std::begin(kCheckpointFiles), std::end(kCheckpointFiles)});
  if (status.ok()) status = sync_path(temporary);
  if (status.ok()) status = move_into_place(temporary, root / name);
  if (status.ok()) status = sync_path(root);
  if (!status.ok()) {
    fs::remove_all(temporary, error);
    return status;
  }
  checkpoint_fault()->pass("before_latest", snapshot.trainer.step);
  // `latest` changes only once the checkpoint it names is complete on disk.
  const fs::path latest_temporary = root / fmt::format(".latest.partial-{}", ::getpid());
  {
    std::ofstream latest(latest_temporary);
    latest << name << "\n";
    latest.close();
    if (!latest) {
      fs::remove(latest_temporary, error);
      return absl::DataLossError(fmt::format("{}: cannot write (disk full?)", latest_temporary.string()));
    }
  }
  if (absl::Status synced = sync_path(latest_temporary); !synced.ok()) {
    fs::remove(latest_temporary, error);
    return synced;
  }
  fs::rename(latest_temporary, root / "latest", error);
  if (error)
    return absl::InternalError(
        fmt::format("cannot update {}: {}", (root / "latest").string(), error.message()));
  return sync_path(root);
}

absl::StatusOr<std::string> latest_checkpoint(const std::string& run_dir) {
  const fs::path latest = fs::path(run_dir) / "checkpoints" / "latest";
  std::error_code error;
  const fs::file_status status = fs::symlink_status(latest, error);
  if (!fs::exists(status)) return absl::NotFoundError(fmt::format("{}: no checkpoint yet", latest.string()));
  // `latest` is written by nanoforge as one line naming a step directory next to it; anything else (a link,
  // a path, other bytes) is damage, and is never followed.
  constexpr int64_t kMaxLatestBytes = 64;
  const auto bytes = fs::is_regular_file(status) ? static_cast<int64_t>(fs::file_size(latest, error)) : -1;
  std::string text;
  if (bytes >= 0 && bytes <= kMaxLatestBytes) {
    std::ifstream file(latest, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  static const std::regex kName("step_[0-9]{6,18}\n?");
  if (bytes < 0 || bytes > kMaxLatestBytes || !std::regex_match(text, kName)) {
    std::string shown;
    for (const char c : text.substr(0, 40))
      shown += std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : fmt::format("\\x{:02x}", c);
    return absl::DataLossError(fmt::format(
        "{}: damaged: it must be a file holding one checkpoint name like step_000500, found {}; `--resume` "
        "falls back to the newest step_* directory that verifies",
        latest.string(),
        bytes < 0 ? "something that is not a regular file"
                  : (bytes > kMaxLatestBytes ? fmt::format("{} bytes", bytes) : "\"" + shown + "\"")));
  }
  if (text.back() == '\n') text.pop_back();
  return (fs::path(run_dir) / "checkpoints" / text).string();
}

absl::Status verify_checkpoint_files(const std::string& checkpoint_dir) {
  return verify_manifest(checkpoint_dir, {std::begin(kCheckpointFiles), std::end(kCheckpointFiles)});
}

absl::Status verify_model_files(const std::string& checkpoint_dir) {
  return verify_manifest(checkpoint_dir, {"model.h5", "trainer.h5"});
}

absl::StatusOr<GPTConfig> read_checkpoint_config(const std::string& checkpoint_dir) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, open_checkpoint_file(checkpoint_dir, "model.h5"));
  NANOFORGE_ASSIGN_OR_RETURN(GPTConfig config, read_gpt_config(file));
  // Every weight is in the file, in fp32: a config describing more than the file holds is damage, refused
  // before a model of that size is allocated.
  const int64_t weight_bytes = ParamLayout(config).total_numel() * static_cast<int64_t>(sizeof(float));
  if (weight_bytes > file.file_bytes()) {
    return absl::DataLossError(fmt::format(
        "{}: /config describes a model of {} bytes of fp32 weights ({}), more than the file's {} bytes "
        "(corrupt config)",
        file.path(), weight_bytes, config.describe(), file.file_bytes()));
  }
  return config;
}

absl::Status load_model_weights(const std::string& checkpoint_dir, GPT& model) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, open_checkpoint_file(checkpoint_dir, "model.h5"));
  model.weights_changed();  // from here on, whether every tensor loads or not: the GPU's copies are stale
  for (const ParamInfo& info : model.layout().params()) {
    const std::string dataset = "/weights/" + info.name;
    NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> weight, file.read<float>(dataset));
    if (weight.shape != info.shape) {
      return absl::InvalidArgumentError(fmt::format("{}: {} has shape ({}), the model needs ({})",
                                                    file.path(), dataset, fmt::join(weight.shape, ", "),
                                                    fmt::join(info.shape, ", ")));
    }
    const auto bad = std::find_if(weight.values.begin(), weight.values.end(),
                                  [](float value) { return !std::isfinite(value); });
    if (bad != weight.values.end()) {
      return absl::DataLossError(fmt::format(
          "{}: {} holds {} at index {}: the model in this checkpoint diverged or is corrupt; resume or load "
          "an earlier checkpoint",
          file.path(), dataset, *bad, bad - weight.values.begin()));
    }
    upload(model.param(info.name), weight.values.data());
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> read_optimizer_steps(const std::string& checkpoint_dir) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, open_checkpoint_file(checkpoint_dir, "optimizer.h5"));
  NANOFORGE_ASSIGN_OR_RETURN(const int64_t steps, read_number<int64_t>(file, "/steps_taken"));
  if (steps < 0) {
    return absl::DataLossError(
        fmt::format("{}: /steps_taken is {}; a step count is >= 0 (corrupt checkpoint)", file.path(), steps));
  }
  return steps;
}

absl::StatusOr<std::vector<float>> read_optimizer_tensor(const std::string& checkpoint_dir,
                                                         const std::string& dataset, int64_t numel) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, open_checkpoint_file(checkpoint_dir, "optimizer.h5"));
  NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> stored, file.read<float>(dataset));
  if (stored.numel() != numel) {
    return absl::InvalidArgumentError(fmt::format("{}: {} holds {} values, the optimizer needs {}",
                                                  file.path(), dataset, stored.numel(), numel));
  }
  const auto bad = std::find_if(stored.values.begin(), stored.values.end(),
                                [](float value) { return !std::isfinite(value); });
  if (bad != stored.values.end()) {
    return absl::DataLossError(fmt::format("{}: {} holds {} at index {} (diverged or corrupt checkpoint)",
                                           file.path(), dataset, *bad, bad - stored.values.begin()));
  }
  return std::move(stored.values);
}

absl::StatusOr<TrainerState> read_trainer_state(const std::string& checkpoint_dir) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, open_checkpoint_file(checkpoint_dir, "trainer.h5"));
  TrainerState state;
  NANOFORGE_ASSIGN_OR_RETURN(state.step, read_number<int64_t>(file, "/step"));
  if (state.step < 0) {
    return absl::DataLossError(
        fmt::format("{}: /step is {}; a step is >= 0 (corrupt checkpoint)", file.path(), state.step));
  }
  NANOFORGE_ASSIGN_OR_RETURN(state.training_seconds, read_number<double>(file, "/training_seconds"));
  if (!std::isfinite(state.training_seconds) || state.training_seconds < 0) {
    return absl::DataLossError(
        fmt::format("{}: /training_seconds is {}; expected a finite time >= 0 (corrupt "
                    "checkpoint)",
                    file.path(), state.training_seconds));
  }
  NANOFORGE_ASSIGN_OR_RETURN(state.recipe_toml, read_text(file, "/recipe", kMaxRecipeBytes));
  NANOFORGE_ASSIGN_OR_RETURN(state.tokenizer_hash, read_text(file, "/tokenizer_hash", kMaxLabelBytes));
  if (file.has("/data_manifest_hash")) {  // checkpoints written before data sets had manifests have none
    NANOFORGE_ASSIGN_OR_RETURN(state.data_manifest_hash,
                               read_text(file, "/data_manifest_hash", kMaxLabelBytes));
  }
  NANOFORGE_ASSIGN_OR_RETURN(state.nanoforge_version, read_text(file, "/nanoforge_version", kMaxLabelBytes));
  NANOFORGE_ASSIGN_OR_RETURN(state.git_commit, read_text(file, "/git_commit", kMaxLabelBytes));
  NANOFORGE_ASSIGN_OR_RETURN(const std::string loader,
                             read_text(file, "/loader_state", kMaxLoaderStateBytes));
  state.loader_state.assign(loader.begin(), loader.end());
  return state;
}

namespace {

// Reads every dataset of one checkpoint file (HDF5 verifies each checksum) and checks that every number in
// it is finite.
absl::Status read_every_dataset(const std::string& checkpoint_dir, const std::string& name) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, open_checkpoint_file(checkpoint_dir, name));
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
      NANOFORGE_ASSIGN_OR_RETURN(const H5File::DatasetLayout layout, file.dataset_layout(path));
      if (layout.value_class == H5File::DatasetLayout::ValueClass::kInteger) {
        NANOFORGE_RETURN_IF_ERROR(file.read<int64_t>(path).status());
        continue;
      }
      NANOFORGE_ASSIGN_OR_RETURN(const HostArray<double> values, file.read<double>(path));
      const auto bad = std::find_if(values.values.begin(), values.values.end(),
                                    [](double value) { return !std::isfinite(value); });
      if (bad != values.values.end()) {
        return absl::DataLossError(fmt::format("{}: {} holds {} at index {} (diverged or corrupt checkpoint)",
                                               file.path(), path, *bad, bad - values.values.begin()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status verify_checkpoint(const std::string& checkpoint_dir) {
  NANOFORGE_RETURN_IF_ERROR(verify_checkpoint_files(checkpoint_dir));
  for (const char* name : kCheckpointFiles)
    NANOFORGE_RETURN_IF_ERROR(read_every_dataset(checkpoint_dir, name));
  NANOFORGE_ASSIGN_OR_RETURN(const TrainerState state, read_trainer_state(checkpoint_dir));
  const std::string trainer_file = checkpoint_dir + "/trainer.h5";
  const std::string directory = fs::path(checkpoint_dir).filename().string();
  if (directory.rfind("step_", 0) == 0 && directory != checkpoint_name(state.step)) {
    return absl::DataLossError(
        fmt::format("{}: /step is {}, but the checkpoint directory is {} (corrupt or "
                    "misplaced checkpoint)",
                    trainer_file, state.step, directory));
  }
  NANOFORGE_ASSIGN_OR_RETURN(const int64_t optimizer_steps, read_optimizer_steps(checkpoint_dir));
  if (optimizer_steps != state.step) {
    return absl::DataLossError(
        fmt::format("{}/optimizer.h5: /steps_taken is {}, but trainer.h5 is at step {} "
                    "(corrupt checkpoint)",
                    checkpoint_dir, optimizer_steps, state.step));
  }
  NANOFORGE_ASSIGN_OR_RETURN(const Recipe recipe, parse_recipe(state.recipe_toml, trainer_file + " /recipe"));
  const absl::StatusOr<LoaderState> loader = LoaderState::from_bytes(state.loader_state);
  if (!loader.ok()) {
    return absl::DataLossError(
        fmt::format("{}: /loader_state: {}", trainer_file, std::string(loader.status().message())));
  }
  NANOFORGE_ASSIGN_OR_RETURN(const GPTConfig config, read_checkpoint_config(checkpoint_dir));
  const GPTConfig built = GPTConfig::from_sizing(recipe.model, config.vocab_size);
  if (built.describe() != config.describe()) {
    return absl::DataLossError(
        fmt::format("{}/model.h5: /config describes {}, but the checkpoint's recipe builds {} (corrupt or "
                    "edited checkpoint)",
                    checkpoint_dir, config.describe(), built.describe()));
  }
  return absl::OkStatus();
}

}  // namespace nanoforge
