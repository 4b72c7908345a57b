// Checkpoint readers on damaged files, as fuzzing the checkpoint targets (tests/fuzz/) made them: each test
// is a damage that crashed the reader before and now comes back as an error naming the file.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/h5_file.h"
#include "train/checkpoint/checkpoint.h"

namespace nanoforge {
namespace {

std::string temp_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("nanoforge_checkpoint_damage_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// trainer.h5 as write_checkpoint lays it out, with `seconds` as /training_seconds (a scalar when written).
void write_trainer_file(const std::string& path, const std::vector<int64_t>& seconds_shape,
                        const std::vector<double>& seconds) {
  auto file = H5File::create(path);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(file->write_int_attribute("/", "step", 5).ok());
  for (const char* name : {"recipe", "tokenizer_hash", "nanoforge_version", "git_commit"})
    ASSERT_TRUE(file->write_string_attribute("/", name, "x").ok());
  ASSERT_TRUE(file->write("/training_seconds", seconds_shape, seconds.data()).ok());
  const uint8_t loader_state[] = {1, 2, 3};
  ASSERT_TRUE(file->write("/loader_state", {3}, loader_state).ok());
}

TEST(CheckpointDamage, TrainerStateReadsAsWritten) {
  const std::string dir = temp_dir("intact");
  write_trainer_file(dir + "/trainer.h5", {}, {12.5});
  const absl::StatusOr<TrainerState> state = read_trainer_state(dir);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->step, 5);
  EXPECT_EQ(state->training_seconds, 12.5);
  EXPECT_EQ(state->loader_state, (std::vector<uint8_t>{1, 2, 3}));
  std::filesystem::remove_all(dir);
}

// Found by review and reproduced with the checkpoint_trainer fuzz target: /training_seconds with no value
// made read_trainer_state throw std::out_of_range (an abort); with several values it took the first.
TEST(CheckpointDamage, TrainingSecondsMustHoldOneValue) {
  const std::string dir = temp_dir("seconds");
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0}, std::vector<int64_t>{2}}) {
    write_trainer_file(dir + "/trainer.h5", shape, {1.0, 2.0});
    const absl::StatusOr<TrainerState> state = read_trainer_state(dir);
    EXPECT_EQ(state.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(state.status().message().find(dir + "/trainer.h5: /training_seconds holds"), std::string::npos)
        << state.status();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nanoforge
