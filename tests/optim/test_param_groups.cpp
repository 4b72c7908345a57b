// Parameter groups: structure and rates against nanochat's groups in the golden, and the d20 rates nanochat's
// base_train derives.
#include <gtest/gtest.h>

#include "optim/param_groups.h"
#include "optim/training_horizon.h"
#include "parity/optim_parity.h"
#include "tests/parity/golden_file.h"

namespace nanoforge {
namespace {

TEST(ParamGroups, MatchNanochatsGroupsForTheGoldenModel) {
  const std::string path = test::golden_path("optim_real_init.h5");
  auto golden = read_optim_golden(path);
  ASSERT_TRUE(golden.ok()) << golden.status();
  const TrainingHorizon horizon = training_horizon(test::golden_sizing(), golden->config.vocab_size,
                                                   HorizonOptions{}, OptimizerHyperparameters{}.weight_decay);
  const ParamLayout layout(golden->config);
  const std::vector<ParamGroup> groups = nanochat_param_groups(
      golden->config, layout, OptimizerHyperparameters{}, horizon.batch_lr_scale, horizon.weight_decay);
  ASSERT_EQ(groups.size(), golden->groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    const OptimGoldenGroup& expected = golden->groups[i];
    std::vector<std::string> names;
    for (const ParamInfo* info : groups[i].params)
      names.push_back(info->name);
    EXPECT_EQ(names, expected.params) << "group " << i;
    EXPECT_EQ(groups[i].kind == GroupKind::kMuon, expected.kind == "muon") << "group " << i;
    EXPECT_NEAR(groups[i].initial_lr, expected.initial_lr, 1e-15 * expected.initial_lr) << "group " << i;
    EXPECT_NEAR(groups[i].weight_decay, expected.weight_decay, 1e-12 * (1 + expected.weight_decay)) << i;
    if (expected.kind == "adamw") {
      EXPECT_EQ(groups[i].beta1, expected.beta1) << "group " << i;
      EXPECT_EQ(groups[i].beta2, expected.beta2) << "group " << i;
      EXPECT_EQ(groups[i].eps, expected.eps) << "group " << i;
    }
  }
}

TEST(ParamGroups, Depth20RatesAndMuonShapes) {
  const GPTConfig d20 = GPTConfig::from_depth(20, 32768, 2048);
  const ParamLayout layout(d20);
  const std::vector<ParamGroup> groups =
      nanochat_param_groups(d20, layout, OptimizerHyperparameters{}, std::sqrt(2.0), 0.100188);
  ASSERT_EQ(groups.size(), 6u + 4u);
  // nanochat's d20 rates, as base_train prints them (6 significant digits).
  const double expected[] = {0.0087636, 0.328634, 0.164317, 0.0070711, 0.707107, 0.2, 0.0282843};
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(groups[i].initial_lr, expected[i], 5e-7 * 1 + 1e-6 * expected[i]) << i;
  const std::pair<int64_t, int64_t> shapes[] = {{10, 12}, {1280, 1280}, {1280, 5120}, {5120, 1280}};
  const size_t counts[] = {10, 80, 20, 20};
  for (int i = 0; i < 4; ++i) {
    const ParamGroup& group = groups[6 + i];
    EXPECT_EQ(group.rows, shapes[i].first);
    EXPECT_EQ(group.cols, shapes[i].second);
    EXPECT_EQ(group.params.size(), counts[i]);
    EXPECT_NEAR(group.initial_lr, expected[6], 1e-6);
  }
  EXPECT_DOUBLE_EQ(groups[9].lr_shape_scale(), 2.0);  // c_fc (4C, C)
  EXPECT_DOUBLE_EQ(groups[7].lr_shape_scale(), 1.0);
  EXPECT_EQ(groups[7].params[0]->name, "transformer.h.0.attn.c_q.weight");
  EXPECT_EQ(groups[7].params[3]->name, "transformer.h.0.attn.c_proj.weight");
}

}  // namespace
}  // namespace nanoforge
