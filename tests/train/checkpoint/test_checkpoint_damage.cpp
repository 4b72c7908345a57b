// Damaged checkpoints, as docs/checkpoints.md promises: `--resume` passes over every kind of damage to the
// newest checkpoint — bytes changed anywhere (the manifest's CRC-32s), files missing, a format-1 file, and
// values that verify but cannot be right (a negative step, NaN weights, an edited config, a step count that
// disagrees, a config larger than its file) — names it, and continues from the previous one, bit for bit as
// if nothing had happened. `latest` is never followed outside its run, and a diverged model is never saved.
#include <hdf5.h>

#include <cmath>
#include <functional>

#include "tests/train/training_fixture.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/resume.h"

namespace nanoforge {
namespace {

using namespace test;

Recipe damage_recipe() {
  Recipe recipe = small_recipe();
  recipe.train.horizon.num_iterations = 20;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = 5;
  return recipe;
}

// A run stopped at step 15 (checkpoints 5, 10, 15), made once; each test damages a copy.
const std::string& stopped_run() {
  static const std::string dir = [] {
    const std::string run = temp_dir("damage_source");
    EXPECT_TRUE(run_training(damage_recipe(), stop_at(run, 15)).ok());
    return run;
  }();
  return dir;
}

// The same run continued to step 20 in one go, for the bitwise comparison.
const std::string& finished_run() {
  static const std::string dir = [] {
    const std::string run = temp_dir("damage_reference");
    EXPECT_TRUE(run_training(damage_recipe(), stop_at(run, -1)).ok());
    return run;
  }();
  return dir;
}

std::string copy_of_stopped_run(const std::string& name) {
  const std::string run = temp_dir("damage_" + name);
  fs::remove_all(run);
  fs::copy(stopped_run(), run, fs::copy_options::recursive);
  return run;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Overwrites the values of an existing dataset in place (HDF5 recomputes its checksum).
template <class T>
void overwrite_dataset(const std::string& path, const std::string& dataset, const std::vector<T>& values,
                       hid_t memory_type) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0) << path;
  hid_t handle = H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(handle, 0) << dataset;
  ASSERT_GE(H5Dwrite(handle, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  H5Dclose(handle);
  H5Fclose(file);
}

// (Deleted and created again: libhdf5 1.10 cannot H5Awrite these attributes in place.)
void overwrite_int_attribute(const std::string& path, const std::string& object, const std::string& name,
                             int64_t value) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0) << path;
  hid_t group = H5Oopen(file, object.c_str(), H5P_DEFAULT);
  ASSERT_GE(H5Adelete(group, name.c_str()), 0) << name;
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attribute = H5Acreate2(group, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(H5Awrite(attribute, H5T_NATIVE_INT64, &value), 0);
  H5Aclose(attribute);
  H5Sclose(space);
  H5Oclose(group);
  H5Fclose(file);
}

// Replaces a dataset of doubles by one of another shape (libhdf5 cannot change a shape in place).
void replace_double_dataset(const std::string& path, const std::string& dataset, hsize_t count) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0) << path;
  ASSERT_GE(H5Ldelete(file, dataset.c_str(), H5P_DEFAULT), 0) << dataset;
  hid_t space = H5Screate_simple(1, &count, nullptr);
  hid_t handle =
      H5Dcreate2(file, dataset.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(handle, 0) << dataset;
  const std::vector<double> values(count, 1.0);
  if (count > 0) {
    ASSERT_GE(H5Dwrite(handle, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  }
  H5Dclose(handle);
  H5Sclose(space);
  H5Fclose(file);
}

// After an edit that nanoforge's writer would never make: a manifest that matches the edited files, so that
// only the checks of the values themselves can catch it.
void rewrite_manifest(const std::string& checkpoint) {
  ASSERT_TRUE(write_manifest(checkpoint, {"model.h5", "optimizer.h5", "trainer.h5"}).ok());
}

struct Damage {
  std::string name;
  std::string expected;  // in the reason the checkpoint is skipped
  std::function<void(const std::string& checkpoint)> apply;
};

std::vector<Damage> damages() {
  return {
      {"flipped_byte_in_metadata", "CRC-32",
       [](const std::string& c) {
         std::string bytes = read_bytes(c + "/trainer.h5");
         bytes[200] = static_cast<char>(~bytes[200]);
         write_bytes(c + "/trainer.h5", bytes);
       }},
      {"truncated_model", "bytes were written",
       [](const std::string& c) {
         std::string bytes = read_bytes(c + "/model.h5");
         bytes.resize(bytes.size() / 2);
         write_bytes(c + "/model.h5", bytes);
       }},
      {"missing_optimizer", "optimizer.h5: missing",
       [](const std::string& c) { fs::remove(c + "/optimizer.h5"); }},
      {"missing_manifest", "no manifest.txt", [](const std::string& c) { fs::remove(c + "/manifest.txt"); }},
      {"garbage_manifest", "corrupt manifest",
       [](const std::string& c) { write_bytes(c + "/manifest.txt", "\x01\x02garbage"); }},
      {"negative_step", "/step is -5",
       [](const std::string& c) {
         overwrite_dataset<int64_t>(c + "/trainer.h5", "/step", {-5}, H5T_NATIVE_INT64);
         rewrite_manifest(c);
       }},
      {"step_of_another_directory", "the checkpoint directory is step_000015",
       [](const std::string& c) {
         overwrite_dataset<int64_t>(c + "/trainer.h5", "/step", {10}, H5T_NATIVE_INT64);
         overwrite_dataset<int64_t>(c + "/optimizer.h5", "/steps_taken", {10}, H5T_NATIVE_INT64);
         rewrite_manifest(c);
       }},
      {"negative_steps_taken", "/steps_taken is -1",
       [](const std::string& c) {
         overwrite_dataset<int64_t>(c + "/optimizer.h5", "/steps_taken", {-1}, H5T_NATIVE_INT64);
         rewrite_manifest(c);
       }},
      {"nan_weight", "nan",
       [](const std::string& c) {
         auto file = H5File::open_read(c + "/model.h5");
         ASSERT_TRUE(file.ok());
         auto weights = file->read<float>("/weights/lm_head.weight");
         ASSERT_TRUE(weights.ok());
         file->close().IgnoreError();
         weights->values[3] = NAN;
         overwrite_dataset<float>(c + "/model.h5", "/weights/lm_head.weight", weights->values,
                                  H5T_NATIVE_FLOAT);
         rewrite_manifest(c);
       }},
      {"edited_config", "the checkpoint's recipe builds",
       [](const std::string& c) {
         overwrite_int_attribute(c + "/model.h5", "/config", "sequence_len", 32);
         rewrite_manifest(c);
       }},
      {"huge_vocab_config", "more than the file's",
       [](const std::string& c) {
         overwrite_int_attribute(c + "/model.h5", "/config", "vocab_size", int64_t{1} << 24);
         rewrite_manifest(c);
       }},
  };
}

TEST(CheckpointDamage, EachKindIsNamedAndResumeFallsBackToThePreviousCheckpoint) {
  for (const Damage& damage : damages()) {
    SCOPED_TRACE(damage.name);
    const std::string run = copy_of_stopped_run(damage.name);
    const std::string newest = run + "/checkpoints/step_000015";
    damage.apply(newest);
    std::vector<std::string> skipped;
    const absl::StatusOr<std::string> chosen = newest_valid_checkpoint(run, &skipped);
    ASSERT_TRUE(chosen.ok()) << chosen.status();
    EXPECT_EQ(fs::path(*chosen).filename(), "step_000010");
    ASSERT_EQ(skipped.size(), 1u);
    EXPECT_NE(skipped[0].find("step_000015"), std::string::npos) << skipped[0];
    EXPECT_NE(skipped[0].find(damage.expected), std::string::npos) << skipped[0];
  }
}

// The data-loss case of the probe: a trainer.h5 at step -5 was resumed from, wrote step_-00004 and replaced
// valid checkpoints. Now the run continues from step 10 and ends exactly where an undamaged one does.
TEST(CheckpointDamage, ResumeAfterANegativeStepEqualsTheUndamagedRun) {
  const std::string run = copy_of_stopped_run("negative_step_resume");
  damages()[5].apply(run + "/checkpoints/step_000015");
  TrainRunOptions options;
  options.run_dir = run;
  options.resume = true;
  ASSERT_TRUE(run_training(damage_recipe(), options).ok());
  for (const auto& entry : fs::directory_iterator(run + "/checkpoints"))
    EXPECT_EQ(entry.path().filename().string().find('-'), std::string::npos) << entry.path();
  EXPECT_EQ(final_weights(run), final_weights(finished_run()));
  EXPECT_EQ(losses_by_step(run), losses_by_step(finished_run()));
}

// `latest` holds one plain name of a directory next to it; anything else is named as damage and never
// followed (the probe's `latest` pointing outside the run read /etc/trainer.h5).
TEST(CheckpointDamage, LatestOutsideTheRunOrGarbledIsNamedAndNotFollowed) {
  const std::vector<std::pair<std::string, std::string>> contents = {
      {"outside", "../../../../etc\n"},
      {"absolute", "/etc\n"},
      {"garbage", std::string("\x7f\x45\x4c\x46\0\x01", 6)},
      {"two_names", "step_000010\nstep_000015\n"},
      {"empty", ""}};
  for (const auto& [name, text] : contents) {
    SCOPED_TRACE(name);
    const std::string run = copy_of_stopped_run("latest_" + name);
    write_bytes(run + "/checkpoints/latest", text);
    const absl::StatusOr<std::string> latest = latest_checkpoint(run);
    EXPECT_EQ(latest.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(latest.status().message().find(run + "/checkpoints/latest: damaged"), std::string::npos)
        << latest.status();
    std::vector<std::string> skipped;
    const absl::StatusOr<std::string> chosen = newest_valid_checkpoint(run, &skipped);
    ASSERT_TRUE(chosen.ok()) << chosen.status();
    EXPECT_EQ(fs::path(*chosen).filename(), "step_000015");
    ASSERT_EQ(skipped.size(), 1u);
    EXPECT_NE(skipped[0].find("latest: damaged"), std::string::npos) << skipped[0];
  }
}

// A model whose weights are not finite (training diverged) is not saved: it would become `latest`.
TEST(CheckpointDamage, NonFiniteWeightsAreNeverSaved) {
  const std::string run = copy_of_stopped_run("nan_snapshot");
  auto source = H5File::open_read(run + "/checkpoints/step_000015/model.h5");
  ASSERT_TRUE(source.ok());
  CheckpointSnapshot snapshot;
  snapshot.config = *read_checkpoint_config(run + "/checkpoints/step_000015");
  auto weights = source->read<float>("/weights/lm_head.weight");
  ASSERT_TRUE(weights.ok());
  weights->values[0] = INFINITY;
  snapshot.weights.push_back({"/weights/lm_head.weight", weights->shape, weights->values});
  snapshot.trainer.step = 16;
  const absl::Status status = write_checkpoint(run, snapshot);
  EXPECT_NE(status.message().find("not finite"), std::string::npos) << status;
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step_000016"));
  EXPECT_EQ(fs::path(*latest_checkpoint(run)).filename(), "step_000015");
}

// Found by review and reproduced with the checkpoint_trainer fuzz target (then format 1): /training_seconds
// with no value made read_trainer_state throw std::out_of_range (an abort); with several values it took the
// first. Reproducer: tests/fuzz/corpus/checkpoint_trainer/regress_empty_training_seconds.h5.
TEST(CheckpointDamage, TrainingSecondsMustHoldOneValue) {
  for (const hsize_t count : {hsize_t{0}, hsize_t{2}}) {
    SCOPED_TRACE(count);
    const std::string run = copy_of_stopped_run("training_seconds_" + std::to_string(count));
    const std::string checkpoint = run + "/checkpoints/step_000015";
    replace_double_dataset(checkpoint + "/trainer.h5", "/training_seconds", count);
    const absl::StatusOr<TrainerState> state = read_trainer_state(checkpoint);
    EXPECT_FALSE(state.ok());
    EXPECT_NE(state.status().message().find(checkpoint + "/trainer.h5: dataset /training_seconds has shape"),
              std::string::npos)
        << state.status();
  }
}

}  // namespace
}  // namespace nanoforge
