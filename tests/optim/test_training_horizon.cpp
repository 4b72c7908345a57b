// The training horizon against what nanochat derived for the golden's model (/optim_config) and base_train's
// horizons for depths 12-26.
#include <gtest/gtest.h>

#include <cmath>

#include "h5/file.h"
#include "optim/param_groups.h"
#include "optim/training_horizon.h"
#include "tests/parity/golden_file.h"

namespace nanoforge {
namespace {

const double kBaseWeightDecay = OptimizerHyperparameters{}.weight_decay;  // base_train's --weight-decay

TEST(TrainingHorizon, MatchesNanochatForTheGoldenModel) {
  const std::string path = test::golden_path("optim_real_init.h5");
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  HorizonOptions options;
  options.num_iterations = 100;
  const TrainingHorizon horizon =
      training_horizon(test::golden_sizing(), test::kGoldenVocab, options, kBaseWeightDecay);
  EXPECT_EQ(horizon.scaling_params, *file->read_int_attribute("/optim_config", "num_scaling_params"));
  EXPECT_EQ(horizon.target_tokens, *file->read_int_attribute("/optim_config", "target_tokens"));
  EXPECT_EQ(horizon.reference_tokens, *file->read_int_attribute("/optim_config", "D_REF"));
  EXPECT_EQ(horizon.total_batch_size, *file->read_int_attribute("/optim_config", "total_batch_size"));
  EXPECT_DOUBLE_EQ(horizon.batch_lr_scale, *file->read_float_attribute("/optim_config", "batch_lr_scale"));
  EXPECT_NEAR(horizon.weight_decay, *file->read_float_attribute("/optim_config", "weight_decay_scaled"),
              1e-12);
  EXPECT_EQ(horizon.num_iterations, 100);
}

TEST(TrainingHorizon, MatchesBaseTrainsHorizons) {
  struct Row {
    int64_t depth;
    double ratio;
    int64_t batch;
    double wd_scaled;
    int64_t iterations;
  };
  for (const Row& row : {Row{12, 12, 1 << 19, 0.28, 2520}, Row{20, 12, 1 << 20, 0.100188, 4980},
                         Row{24, 12, 1 << 20, 0.059738, 8352}, Row{24, 8, 1 << 20, 0.059738, 5568},
                         Row{26, 12, 1 << 20, 0.047470, 10510}}) {
    HorizonOptions options;
    options.target_param_data_ratio = row.ratio;
    const TrainingHorizon h = training_horizon({.depth = row.depth}, 32768, options, kBaseWeightDecay);
    EXPECT_EQ(h.total_batch_size, row.batch) << "depth " << row.depth;
    EXPECT_EQ(h.num_iterations, row.iterations) << "depth " << row.depth;
    EXPECT_NEAR(h.weight_decay, row.wd_scaled, 5e-7) << "depth " << row.depth;  // the table has 6 digits
    EXPECT_DOUBLE_EQ(h.batch_lr_scale, row.batch == (1 << 19) ? 1.0 : std::sqrt(2.0));
  }
  HorizonOptions flops;
  flops.target_flops = 1.507e19;
  EXPECT_NEAR(training_horizon({.depth = 20}, 32768, flops, kBaseWeightDecay).num_iterations, 4980, 1);
}

}  // namespace
}  // namespace nanoforge
