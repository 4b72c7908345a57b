// Data parallelism on the CPU (the MPI engine, ranks started by mpirun): N ranks each accumulating over 1/N
// of the micro-batches are one rank's run — the same rows per step (data/loader/loader.h's world-size rule),
// gradients averaged over ranks, sharded (ZeRO-1) updates gathered back — up to the order of float additions;
// a run resumed at the same world size is the uninterrupted run bit for bit; one stopped at one world size
// resumes at another; ranks whose run directories hold different checkpoints refuse to resume.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"
#include "train/checkpoint/resume.h"

namespace nanoforge {
namespace {

using namespace test;

// The small recipe with a 16-row global batch: 4 micro-batches on 1 rank, 2 on 2 ranks, 1 on 4. Buckets of
// ~50 KB split this model's gradients into several, so reductions start during the backward pass.
Recipe parallel_recipe() {
  Recipe recipe = small_recipe();
  recipe.train.horizon.total_batch_size = 16 * 64;
  recipe.train.horizon.num_iterations = 20;
  recipe.train.eval_every = 10;
  recipe.train.sample_every = 20;
  recipe.checkpoint.every = 10;
  recipe.dist.bucket_mb = 0.05;
  return recipe;
}

// Runs `nanoforge train` on `ranks` processes under mpirun; the output goes to RUN_DIR.log.
int run_ranks(int ranks, const std::string& recipe_path, const std::string& run_dir,
              const std::string& flags = "") {
  // Open MPI refuses to start as root (CI containers) without these; --oversubscribe: CI has 2 cores.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string command =
      fmt::format("{} -n {} --oversubscribe {} train --recipe {} --run-dir {} {} > {}.log 2>&1",
                  test::mpiexec(), ranks, test::nanoforge_binary(), recipe_path, run_dir, flags, run_dir);
  return std::system(command.c_str());
}

std::string log_of(const std::string& run_dir) {
  return read_bytes(run_dir + ".log");
}

// How far two runs may drift apart. Reducing over ranks adds the micro-batch gradients in another order than
// one rank's accumulation, and training grows that rounding: measured relative loss differences after these
// 20 steps of ~3e-7 (4 ranks, OpenBLAS's AVX-512 kernels) and up to 1.7e-5 (4 ranks, an AMD EPYC with
// AVX2 kernels, where the first steps already differ by 5e-7). 1e-4 covers both with room while a lost or
// double-counted micro-batch moves the loss by >1e-3.
constexpr double kLossTolerance = 1e-4;
// The weights drift more than the loss: Muon orthogonalises each update, so directions whose gradient is only
// rounding noise still get full-size steps, and how far depends on the CPU's kernels (||dW|| / ||W|| <= 7e-4
// with AVX-512, up to 1.3e-2 for matrices and 5e-2 for x0_lambdas with AVX2). So each weight's difference is
// measured against how far the reference run moved it over its last 10 steps (5e-2 to 1.7 of ||W||): drift
// measured at most 0.13 of that; a weight whose updates one rank lost would differ by its whole 20-step
// move, more than the last 10 steps' (a ratio above 1).
constexpr double kWeightDriftTolerance = 0.25;
constexpr int64_t kDriftBaseStep = 10;  // the reference's checkpoint that the last 10 steps start from
// One weight is left out: backout_lambda's gradient is rounding noise (~1e-8) in a one-layer model, and AdamW
// turns noise of either sign into full-size steps. Its effect on the loss is within kLossTolerance above.
constexpr const char* kNoiseDrivenWeight = "backout_lambda";

double norm(const std::vector<float>& values) {
  double sum = 0;
  for (const float v : values)
    sum += static_cast<double>(v) * v;
  return std::sqrt(sum);
}

// The global gradient norm of a run's first step, from its metrics.
double first_grad_norm(const std::string& run_dir) {
  for (const std::string& line : read_lines(run_dir + "/metrics.jsonl")) {
    if (line.find("\"grad_norm\"") != std::string::npos) return number_after(line, "grad_norm");
  }
  ADD_FAILURE() << "no grad_norm in " << run_dir << "/metrics.jsonl";
  return 0;
}

void expect_close_runs(const std::string& run, const std::string& reference) {
  // Step 1 runs identical weights on identical rows: the global gradient norm (each rank's owned shards,
  // summed over ranks) differs only by the order of the sums (~1e-7 measured); one rank's shards alone give
  // a clearly smaller norm (measured 0.882 against 0.917 on 2 ranks).
  const double norm_1 = first_grad_norm(run), expected_norm_1 = first_grad_norm(reference);
  EXPECT_GT(expected_norm_1, 0);
  EXPECT_NEAR(norm_1, expected_norm_1, 1e-5 * expected_norm_1) << run << " vs " << reference;
  const auto losses = losses_by_step(run), expected = losses_by_step(reference);
  ASSERT_EQ(losses.size(), expected.size()) << run << " vs " << reference;
  double worst_loss = 0, worst_weight = 0;
  for (const auto& [step, loss] : expected) {
    ASSERT_TRUE(losses.count(step)) << "step " << step << " missing in " << run;
    const double a = std::stod(losses.at(step)), b = std::stod(loss);
    worst_loss = std::max(worst_loss, std::abs(a - b) / std::abs(b));
    EXPECT_NEAR(a, b, kLossTolerance * std::abs(b)) << "step " << step;
  }
  const auto weights = final_weights(run), expected_weights = final_weights(reference);
  const auto base_weights =
      checkpoint_weights(fmt::format("{}/checkpoints/step_{:06d}", reference, kDriftBaseStep));
  ASSERT_EQ(weights.size(), expected_weights.size());
  for (const auto& [name, values] : expected_weights) {
    const std::vector<float>& actual = weights.at(name);
    const std::vector<float>& base = base_weights.at(name);
    ASSERT_EQ(actual.size(), values.size()) << name;
    if (name == kNoiseDrivenWeight) continue;
    std::vector<float> difference(values.size()), moved(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      difference[i] = actual[i] - values[i];
      moved[i] = values[i] - base[i];
    }
    const double drift = norm(difference) / norm(moved);
    worst_weight = std::max(worst_weight, drift);
    EXPECT_LE(drift, kWeightDriftTolerance)
        << name << ": the runs differ by " << norm(difference) << ", the reference moved it by "
        << norm(moved) << " in its last " << kDriftBaseStep << " steps";
  }
  std::printf("%s vs %s: largest relative difference %.3g (loss), %.3g (weights, of their last moves)\n",
              run.c_str(), reference.c_str(), worst_loss, worst_weight);
}

// One rank, no mpirun (the single-process engine), accumulating over 4 micro-batches: what the others match.
const std::string& one_rank_run() {
  static const std::string dir = [] {
    const std::string run = temp_dir("one_rank");
    EXPECT_TRUE(run_training(parallel_recipe(), stop_at(run, -1)).ok());
    return run;
  }();
  return dir;
}

class RanksMatchOneRank : public ::testing::TestWithParam<int> {};

TEST_P(RanksMatchOneRank, LossesAndWeights) {
  const int ranks = GetParam();
  const std::string dir = temp_dir(fmt::format("ranks{}", ranks)), run = dir + "/run";
  ASSERT_EQ(run_ranks(ranks, recipe_file(parallel_recipe(), dir), run), 0) << log_of(run);
  const std::string log = log_of(run);
  EXPECT_NE(log.find(fmt::format("dist: {} ranks (mpi)", ranks)), std::string::npos) << log;
  EXPECT_NE(log.find(fmt::format("{} micro-batches of 4 x 64 per rank, {} ranks", 4 / ranks, ranks)),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("sample: "), std::string::npos) << "rank 0 samples at the end";
  expect_close_runs(run, one_rank_run());
}

INSTANTIATE_TEST_SUITE_P(DataParallel, RanksMatchOneRank, ::testing::Values(2, 4));

// FP8 (model.fp8) on 2 ranks against one rank with accumulation. Tensorwise scales couple the rows of a
// micro-batch, and the two runs group rows differently (global row g goes to rank g mod 2, so rank 0's first
// micro-batch is rows 0, 2, 4, 6 where one rank's is rows 0-3): each micro-batch's FP8 codes differ, as they
// would between nanochat runs on 1 and 2 GPUs. So the runs agree to FP8's noise, not to rounding: measured
// 5.7e-5 relative in step 1's gradient norm and at most 1.3e-3 in the loss over 20 steps. The gradient norm
// still catches a lost or doubled micro-batch (one rank's shards alone give a 4 % smaller norm, above), and
// the loss a rank quantising with another's scales (FP8 against full precision moves it by ~3e-3 in 10 steps,
// a wrong scale by O(1)).
constexpr double kFp8GradNormTolerance = 5e-4;
constexpr double kFp8LossTolerance = 5e-3;

TEST(DataParallel, Fp8TwoRanksMatchOneRank) {
  Recipe recipe = parallel_recipe();
  recipe.model.depth = 2;  // 128 wide: every projection, the MLP and lm_head pass base_train's FP8 filter
  recipe.model.fp8 = true;
  const std::string dir = temp_dir("fp8_ranks"), one = dir + "/one", two = dir + "/two";
  ASSERT_TRUE(run_training(recipe, stop_at(one, -1)).ok());
  ASSERT_EQ(run_ranks(2, recipe_file(recipe, dir), two), 0) << log_of(two);
  EXPECT_NE(log_of(two).find("fp8: tensorwise scaling, converted 13/15 linear layers"), std::string::npos)
      << log_of(two);
  EXPECT_NEAR(first_grad_norm(two), first_grad_norm(one), kFp8GradNormTolerance * first_grad_norm(one));
  const auto losses = losses_by_step(two), expected = losses_by_step(one);
  ASSERT_EQ(losses.size(), expected.size());
  double worst = 0;
  for (const auto& [step, loss] : expected) {
    const double a = std::stod(losses.at(step)), b = std::stod(loss);
    worst = std::max(worst, std::abs(a - b) / std::abs(b));
    EXPECT_NEAR(a, b, kFp8LossTolerance * std::abs(b)) << "step " << step;
  }
  std::printf("FP8, 2 ranks vs 1: largest relative loss difference %.3g\n", worst);
}

TEST(DataParallel, ResumeAtTheSameWorldSizeIsBitForBit) {
  const std::string dir = temp_dir("resume_same"), whole = dir + "/whole", split = dir + "/split";
  const std::string recipe = recipe_file(parallel_recipe(), dir);
  ASSERT_EQ(run_ranks(2, recipe, whole), 0) << log_of(whole);
  ASSERT_EQ(run_ranks(2, recipe, split, "--stop-at-step 10"), 0) << log_of(split);
  ASSERT_EQ(run_ranks(2, recipe, split, "--resume"), 0) << log_of(split);
  EXPECT_EQ(losses_by_step(split), losses_by_step(whole));
  EXPECT_EQ(final_weights(split), final_weights(whole));
}

// A checkpoint holds whole tensors, whatever the world size that wrote it: a 2-rank run stopped at step 10
// continues on 1 rank and on 4, and both end where the uninterrupted run does.
TEST(DataParallel, ResumeAtAnotherWorldSize) {
  const std::string dir = temp_dir("resume_other"), first = dir + "/two_ranks";
  const std::string recipe = recipe_file(parallel_recipe(), dir);
  ASSERT_EQ(run_ranks(2, recipe, first, "--stop-at-step 10"), 0) << log_of(first);
  const std::string on_one = dir + "/on_one", on_four = dir + "/on_four";
  std::filesystem::copy(first, on_one, std::filesystem::copy_options::recursive);
  std::filesystem::copy(first, on_four, std::filesystem::copy_options::recursive);

  TrainRunOptions resume_here;
  resume_here.run_dir = on_one;
  resume_here.resume = true;
  ASSERT_TRUE(run_training(parallel_recipe(), resume_here).ok());
  expect_close_runs(on_one, one_rank_run());

  ASSERT_EQ(run_ranks(4, recipe, on_four, "--resume"), 0) << log_of(on_four);
  EXPECT_NE(log_of(on_four).find("resume: "), std::string::npos);
  expect_close_runs(on_four, one_rank_run());
}

// Rank 0 alone writes the run directory, and each rank resumes from its own --run-dir: on machines that share
// no filesystem, rank 1's may lack rank 0's newest checkpoint. mpirun's MPMD form gives each rank its own
// directory. Both ranks must refuse before loading or writing anything (rank 0's checkpoints and metrics stay
// as they were), naming what each found, instead of rank 1 training from another step beside rank 0.
TEST(DataParallel, ResumeRefusedWhenRanksFindDifferentCheckpoints) {
  Recipe recipe = small_recipe();
  recipe.train.horizon.num_iterations = 6;
  recipe.train.eval_every = 3;
  recipe.train.sample_every = 6;
  recipe.checkpoint.every = 2;
  const std::string dir = temp_dir("resume_disagree"), chief = dir + "/rank0";
  const std::string recipe_path = recipe_file(recipe, dir);
  ASSERT_TRUE(run_training(recipe, stop_at(chief, 4)).ok());  // checkpoints at steps 2 and 4
  // Rank 1's directory: none at all, a copy that stopped one checkpoint earlier (step 2), or a copy whose
  // checkpoints are all damaged (rank 1's own error: it still takes part in the agreement).
  const std::string empty = dir + "/rank1_empty", earlier = dir + "/rank1_earlier",
                    damaged = dir + "/rank1_damaged";
  std::filesystem::copy(chief, earlier, std::filesystem::copy_options::recursive);
  std::filesystem::remove_all(earlier + "/checkpoints/step_000004");
  std::filesystem::remove(earlier + "/checkpoints/latest");
  std::filesystem::copy(chief, damaged, std::filesystem::copy_options::recursive);
  for (const char* step : {"step_000002", "step_000004"})
    std::ofstream(fmt::format("{}/checkpoints/{}/model.h5", damaged, step)) << "damaged";
  const std::vector<std::pair<int64_t, std::string>> checkpoints_before = checkpoint_directories(chief);
  const std::string metrics_before = read_bytes(chief + "/metrics.jsonl");

  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  for (const auto& [rank1_dir, rank1_found] :
       {std::pair{empty, std::string("rank 1 found no checkpoint in its run directory")},
        std::pair{earlier, std::string("rank 1 resumes step 2")},
        std::pair{damaged, fmt::format("rank 1: {}: no valid checkpoint to resume from", damaged)}}) {
    const std::string log_path = rank1_dir + ".log";
    const std::string rank_args =
        fmt::format("{} train --recipe {} --resume --run-dir", test::nanoforge_binary(), recipe_path);
    const std::string command =
        fmt::format("{} --oversubscribe -n 1 {} {} : -n 1 {} {} > {} 2>&1", test::mpiexec(), rank_args, chief,
                    rank_args, rank1_dir, log_path);
    EXPECT_NE(std::system(command.c_str()), 0) << read_bytes(log_path);
    const std::string log = read_bytes(log_path);
    EXPECT_NE(log.find(fmt::format("rank 0 resumes step 4 ({}/checkpoints/step_000004)", chief)),
              std::string::npos)
        << log;
    EXPECT_NE(log.find(rank1_found), std::string::npos) << log;
    EXPECT_NE(log.find("copy rank 0's checkpoints/ to the same path on each machine"), std::string::npos)
        << log;
    EXPECT_EQ(log.find("starting from step 0"), std::string::npos) << log;
    EXPECT_EQ(checkpoint_directories(chief), checkpoints_before) << log;
    EXPECT_EQ(read_bytes(chief + "/metrics.jsonl"), metrics_before) << log;
  }
}

}  // namespace
}  // namespace nanoforge
