// The test hooks' variables: POINT@N and its term_/stop_ forms name one point and count; anything else is an
// error naming the variable (a typo must not leave a test running without its fault).
#include "support/fault_point.h"

#include <gtest/gtest.h>

#include <csignal>

namespace nanoforge {
namespace {

constexpr const char* kVariable = "NANOFORGE_TEST_FAULT";

absl::StatusOr<FaultPoint> parsed(const char* value) {
  return FaultPoint::parse(kVariable, value, {"after_document", "after_shard"});
}

TEST(FaultPoint, UnsetOrEmptyNamesNothing) {
  for (const char* value : {static_cast<const char*>(nullptr), ""}) {
    const absl::StatusOr<FaultPoint> fault = parsed(value);
    ASSERT_TRUE(fault.ok()) << fault.status();
    EXPECT_EQ(fault->signal_number(), 0);
    EXPECT_FALSE(fault->names("after_document", 1));
  }
}

TEST(FaultPoint, NamesOnePointAtOneCountWithItsSignal) {
  for (const auto& [value, signal_number] :
       {std::pair{"after_shard@3", SIGKILL}, std::pair{"term_after_shard@3", SIGTERM},
        std::pair{"stop_after_shard@3", SIGSTOP}}) {
    SCOPED_TRACE(value);
    const absl::StatusOr<FaultPoint> fault = parsed(value);
    ASSERT_TRUE(fault.ok()) << fault.status();
    EXPECT_EQ(fault->signal_number(), signal_number);
    EXPECT_TRUE(fault->names("after_shard", 3));
    EXPECT_FALSE(fault->names("after_shard", 2));
    EXPECT_FALSE(fault->names("after_document", 3));
    fault->pass("after_shard", 4);  // not named: passes without a signal
  }
}

TEST(FaultPoint, ABadValueIsAnErrorNamingTheVariableAndThePoints) {
  for (const char* value : {"after_documnet@3", "after_document", "after_document@", "after_document@x",
                            "after_document@0", "after_document@-2", "kill_after_document@3", "@3"}) {
    SCOPED_TRACE(value);
    const absl::StatusOr<FaultPoint> fault = parsed(value);
    ASSERT_FALSE(fault.ok());
    EXPECT_EQ(fault.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string expected = std::string(kVariable) + "=" + value +
                                 ": expected [term_|stop_]POINT@N with " +
                                 "POINT one of after_document, after_shard and N >= 1";
    EXPECT_NE(fault.status().message().find(expected), std::string::npos) << fault.status();
  }
}

TEST(FaultPoint, PassingTheNamedPointStopsTheProcessSayingWhy) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(parsed("term_after_document@2")->pass("after_document", 2), testing::KilledBySignal(SIGTERM),
              "NANOFORGE_TEST_FAULT=term_after_document@2: SIGTERM at this fault point");
}

}  // namespace
}  // namespace nanoforge
