// The schedules against nanochat's own values at every iteration of a 100-step run (/schedule in the
// golden), and against base_train's d20 numbers.
#include <gtest/gtest.h>

#include "h5/file.h"
#include "optim/schedules.h"
#include "tests/parity/golden_file.h"

namespace nanoforge {
namespace {

TEST(Schedules, MatchNanochatAtEveryIteration) {
  const std::string path = test::golden_path("optim_real_init.h5");
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  const auto iterations = file->read<int64_t>("/schedule/iteration");
  const auto lrm = file->read<double>("/schedule/lr_multiplier");
  const auto momentum = file->read<double>("/schedule/muon_momentum");
  const auto decay = file->read<double>("/schedule/muon_weight_decay");
  ASSERT_TRUE(iterations.ok() && lrm.ok() && momentum.ok() && decay.ok());
  ScheduleConfig config;
  config.num_iterations = 100;
  config.muon_weight_decay = *file->read_float_attribute("/optim_config", "weight_decay_scaled");
  ASSERT_EQ(iterations->numel(), 101);
  for (int64_t i = 0; i < iterations->numel(); ++i) {
    const int64_t it = iterations->values[i];
    // The formulas are the same double arithmetic as Python's; 1e-12 allows a different association.
    EXPECT_NEAR(lr_multiplier(config, it), lrm->values[i], 1e-12) << "iteration " << it;
    EXPECT_NEAR(muon_momentum(config, it), momentum->values[i], 1e-12) << "iteration " << it;
    EXPECT_NEAR(muon_weight_decay(config, it), decay->values[i], 1e-12 * decay->values[0])
        << "iteration " << it;
  }
}

TEST(Schedules, Depth20Facts) {
  ScheduleConfig config;
  config.num_iterations = 4980;
  EXPECT_EQ(warmdown_iterations(config), 3237);  // round(0.65 * 4980) = round(3237.0)
  EXPECT_EQ(lr_multiplier(config, 0), 1.0 / 40);
  EXPECT_EQ(lr_multiplier(config, 39), 1.0);
  EXPECT_EQ(lr_multiplier(config, 1743), 1.0);  // the plateau ends at N - warmdown, inclusive
  EXPECT_LT(lr_multiplier(config, 1744), 1.0);
  EXPECT_DOUBLE_EQ(lr_multiplier(config, 4979), 1.0 / 3237 + (1 - 1.0 / 3237) * 0.05);
  EXPECT_DOUBLE_EQ(muon_momentum(config, 0), 0.85);
  EXPECT_DOUBLE_EQ(muon_momentum(config, 200), 0.91);
  EXPECT_DOUBLE_EQ(muon_momentum(config, 1000), 0.97);
  // Half-to-even: round(0.65 * 10) = round(6.5) = 6, as Python rounds.
  config.num_iterations = 10;
  EXPECT_EQ(warmdown_iterations(config), 6);
}

TEST(Schedules, WarmupWinsOverAnEarlyWarmdownForMomentum) {
  ScheduleConfig config;
  config.num_iterations = 100;  // the warmdown starts at step 35, inside the 400-step momentum warmup
  EXPECT_DOUBLE_EQ(muon_momentum(config, 50), 0.85 + 0.12 * 50 / 400.0);
}

}  // namespace
}  // namespace nanoforge
