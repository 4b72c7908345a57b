// SIGTERM / SIGINT as the commands see them: at once (status 128 + signal) or asked to stop and then at once,
// and an exit held back while files are published. Each case runs in a child process (a death test).
#include "support/stop_signal.h"

#include <gtest/gtest.h>

#include <csignal>

namespace nanoforge {
namespace {

constexpr StopSignalMessages kMessages = {"exiting at once", "asked to stop", "second signal"};

class StopSignal : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(StopSignal, InExitModeASignalEndsTheProcessAtOnce) {
  EXPECT_EXIT(
      {
        install_stop_handlers(OnStopSignal::kExit, kMessages);
        std::raise(SIGINT);
        std::_Exit(0);  // not reached
      },
      testing::ExitedWithCode(128 + SIGINT), "exiting at once");
}

TEST_F(StopSignal, AskedToStopTheFirstSignalIsRecordedAndASecondEndsTheProcess) {
  EXPECT_EXIT(
      {
        install_stop_handlers(OnStopSignal::kAskToStop, kMessages);
        if (stop_signal() != 0) std::_Exit(1);
        std::raise(SIGTERM);
        if (stop_signal() != SIGTERM) std::_Exit(2);  // the process goes on, asked to stop
        std::raise(SIGTERM);
        std::_Exit(3);  // not reached
      },
      testing::ExitedWithCode(128 + SIGTERM), "asked to stop\n*second signal");
}

TEST_F(StopSignal, AfterStartUpTheModeChangesAndAReinstallForgetsEarlierSignals) {
  EXPECT_EXIT(
      {
        install_stop_handlers(OnStopSignal::kAskToStop, kMessages);
        std::raise(SIGTERM);
        install_stop_handlers(OnStopSignal::kExit, kMessages);
        if (stop_signal() != 0) std::_Exit(1);
        set_on_stop_signal(OnStopSignal::kAskToStop);
        std::raise(SIGINT);
        std::_Exit(stop_signal() == SIGINT ? 0 : 2);
      },
      testing::ExitedWithCode(0), "asked to stop");
}

TEST_F(StopSignal, AnExitWaitsForTheEndOfThePublication) {
  EXPECT_EXIT(
      {
        install_stop_handlers(OnStopSignal::kExit, kMessages);
        begin_publishing();
        std::raise(SIGTERM);
        if (stop_signal() != SIGTERM) std::_Exit(1);  // still running: the files are being published
        end_publishing();
        std::_Exit(2);  // not reached
      },
      testing::ExitedWithCode(128 + SIGTERM), "exiting once the files being published are complete");
}

}  // namespace
}  // namespace nanoforge
