// A checkpoint knows the data it was trained on: it records the training data's manifest hash, and a resume
// on another data set is refused naming what changed, unless --allow-data-change, which continues on the new
// data with the loader starting it from its beginning.
#include "data/shards/shard_manifest.h"
#include "tests/train/training_fixture.h"

namespace nanoforge {
namespace {

using namespace test;

Recipe two_step_recipe() {
  Recipe recipe = small_recipe();
  recipe.train.horizon.num_iterations = 4;
  recipe.train.eval_every = -1;
  recipe.train.sample_every = -1;
  recipe.checkpoint.every = 2;
  return recipe;
}

// The sentences prepared again with another split: another data set, same tokenizer.
std::string other_data_set() {
  const std::string out = temp_dir("other_data");
  auto tokenizer = Tokenizer::load(kGolden);
  PrepOptions options;
  options.inputs = {fs::path(sentence_shards()).parent_path().string() + "/sentences.txt"};
  options.out_dir = out + "/shards";
  options.val_docs = 60;
  EXPECT_TRUE(prep_shards(*tokenizer, options).ok());
  return options.out_dir;
}

TEST(ResumeData, ACheckpointRecordsItsDataAndResumeOnOtherDataIsRefusedUnlessAllowed) {
  const std::string run = temp_dir("resume_data");
  ASSERT_TRUE(run_training(two_step_recipe(), stop_at(run, 2)).ok());
  const absl::StatusOr<TrainerState> state = read_trainer_state(run + "/checkpoints/step_000002");
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->data_manifest_hash, manifest_hash(read_bytes(sentence_shards() + "/manifest.txt")));

  Recipe moved = two_step_recipe();
  moved.data.train = moved.data.val = other_data_set();
  TrainRunOptions resume;
  resume.run_dir = run;
  resume.resume = true;
  const absl::Status refused = run_training(moved, resume);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  for (const std::string& fragment :
       {"training data: the checkpoint was trained on the data set whose manifest hash is " +
            state->data_manifest_hash,
        "data.train (" + moved.data.train + ") has manifest hash ", std::string("add --allow-data-change")}) {
    EXPECT_NE(refused.message().find(fragment), std::string::npos) << fragment << " not in " << refused;
  }
  resume.allow_data_change = true;
  EXPECT_TRUE(run_training(moved, resume).ok());
  const absl::StatusOr<TrainerState> continued = read_trainer_state(run + "/checkpoints/step_000004");
  ASSERT_TRUE(continued.ok()) << continued.status();
  EXPECT_EQ(continued->data_manifest_hash, manifest_hash(read_bytes(moved.data.train + "/manifest.txt")))
      << "from here on the checkpoints name the new data";
}

}  // namespace
}  // namespace nanoforge
