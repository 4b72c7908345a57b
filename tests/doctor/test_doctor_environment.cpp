// review_nccl_environment and format_nccl_settings: the user's own NCCL_* values are kept, never overwritten;
// doctor exports only what is unset, warns about values that cost bandwidth and calls out the ones that will
// make NCCL fail.
#include <gtest/gtest.h>

#include "doctor/nccl_env_advice.h"
#include "doctor/rdma_report.h"
#include "doctor_fixtures.h"

namespace nanoforge {
namespace {

using testing::recorded;

struct Reviewed {
  NcclAdvice advice;
  EnvReview review;
  std::string text;
};

Reviewed review(const std::string& fixture, const std::map<std::string, std::string>& environment) {
  const RdmaInventory inventory = recorded(fixture);
  Reviewed result;
  result.advice = advise_nccl(inventory);
  result.review = review_nccl_environment(inventory, result.advice, environment);
  result.text = format_nccl_settings(result.advice, result.review);
  return result;
}

TEST(DoctorEnvironment, EverythingUnsetIsExported) {
  const Reviewed spark = review("spark_one_cable.txt", {});
  EXPECT_TRUE(spark.review.problems.empty());
  EXPECT_TRUE(spark.review.warnings.empty());
  EXPECT_NE(spark.text.find("export NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0\n"), std::string::npos) << spark.text;
  EXPECT_NE(spark.text.find("export NCCL_IB_GID_INDEX=3\n"), std::string::npos);
  EXPECT_NE(spark.text.find("export NCCL_SOCKET_IFNAME=enp1s0f0np0\n"), std::string::npos);
  EXPECT_EQ(spark.text.find("kept"), std::string::npos);
}

TEST(DoctorEnvironment, UserValuesAreKeptAndCompared) {
  const Reviewed spark =
      review("spark_one_cable.txt", {{"NCCL_IB_GID_INDEX", "3"}, {"NCCL_SOCKET_IFNAME", "enP7s7"}});
  EXPECT_TRUE(spark.review.problems.empty());
  EXPECT_EQ(spark.text.find("export NCCL_IB_GID_INDEX"), std::string::npos) << spark.text;
  EXPECT_EQ(spark.text.find("export NCCL_SOCKET_IFNAME"), std::string::npos);
  EXPECT_NE(spark.text.find("export NCCL_IB_HCA="), std::string::npos);
  EXPECT_NE(spark.text.find("NCCL_IB_GID_INDEX=3  (same as doctor's choice)"), std::string::npos)
      << spark.text;
  EXPECT_NE(spark.text.find("NCCL_SOCKET_IFNAME=enP7s7  (doctor would choose enp1s0f0np0)"),
            std::string::npos);
}

TEST(DoctorEnvironment, OneHalfOfASparkPortInNcclIbHcaIsAWarning) {
  const Reviewed spark = review("spark_one_cable.txt", {{"NCCL_IB_HCA", "rocep1s0f0"}});
  ASSERT_EQ(spark.review.warnings.size(), 1u);
  EXPECT_EQ(spark.review.warnings[0].kind, WarningKind::kUserSetting);
  EXPECT_NE(spark.review.warnings[0].message.find("opens 1 of the 2"), std::string::npos);
  EXPECT_TRUE(spark.review.problems.empty());
}

TEST(DoctorEnvironment, HcaMatchingNothingMeansSockets) {
  const Reviewed h100 = review("dgx_h100_ib.txt", {{"NCCL_IB_HCA", "mlx4_"}});
  ASSERT_EQ(h100.review.warnings.size(), 1u);
  EXPECT_NE(h100.review.warnings[0].message.find("fall back to sockets"), std::string::npos);
}

TEST(DoctorEnvironment, SocketInterfaceThatDoesNotExistIsAProblem) {
  const Reviewed spark = review("spark_one_cable.txt", {{"NCCL_SOCKET_IFNAME", "eth9"}});
  ASSERT_EQ(spark.review.problems.size(), 1u);
  EXPECT_NE(spark.review.problems[0].find("NCCL_SOCKET_IFNAME=eth9 matches no interface"), std::string::npos);
  EXPECT_NE(spark.text.find("PROBLEM:"), std::string::npos);
  // NCCL's prefix and exclusion syntax is understood: these all match a usable interface.
  for (const char* list : {"enp", "^docker,lo", "=enP7s7", "enP2p1s0f0np0"})
    EXPECT_TRUE(review("spark_one_cable.txt", {{"NCCL_SOCKET_IFNAME", list}}).review.problems.empty())
        << list;
  // A down interface does not count.
  EXPECT_FALSE(
      review("spark_one_cable.txt", {{"NCCL_SOCKET_IFNAME", "=enp1s0f1np1"}}).review.problems.empty());
}

TEST(DoctorEnvironment, GidIndexMissingOnAChosenPortIsAProblem) {
  const Reviewed spark = review("spark_one_cable.txt", {{"NCCL_IB_GID_INDEX", "7"}});
  ASSERT_EQ(spark.review.problems.size(), 2u);  // one per device of the cage
  EXPECT_NE(spark.review.problems[0].find("rocep1s0f0 port 1 has no GID 7"), std::string::npos);
  EXPECT_FALSE(review("spark_one_cable.txt", {{"NCCL_IB_GID_INDEX", "three"}}).review.problems.empty());
  EXPECT_TRUE(review("spark_one_cable.txt", {{"NCCL_IB_GID_INDEX", "-1"}}).review.problems.empty());
  // Irrelevant where NCCL will not open RDMA devices.
  EXPECT_TRUE(review("spark_one_cable.txt", {{"NCCL_IB_GID_INDEX", "7"}, {"NCCL_IB_DISABLE", "1"}})
                  .review.problems.empty());
}

TEST(DoctorEnvironment, DisablingRdmaWhereItWorksIsAWarning) {
  const Reviewed spark = review("spark_one_cable.txt", {{"NCCL_IB_DISABLE", "1"}});
  ASSERT_EQ(spark.review.warnings.size(), 1u);
  EXPECT_EQ(spark.review.warnings[0].subject, "NCCL_IB_DISABLE");
  EXPECT_NE(spark.text.find("NCCL_IB_DISABLE=1  (doctor sets nothing for it here)"), std::string::npos);
  const Reviewed no_rdma = review("no_rdma.txt", {{"NCCL_IB_DISABLE", "1"}});
  EXPECT_TRUE(no_rdma.review.warnings.empty());
  EXPECT_NE(no_rdma.text.find("NCCL_IB_DISABLE=1  (same as doctor's choice)"), std::string::npos);
}

TEST(DoctorEnvironment, ValuesAreQuotedForTheShellWhenNeeded) {
  EXPECT_EQ(shell_quoted("rocep1s0f0,roceP2p1s0f0"), "rocep1s0f0,roceP2p1s0f0");
  EXPECT_EQ(shell_quoted("=mlx5_0,mlx5_1"), "'=mlx5_0,mlx5_1'");
  EXPECT_EQ(shell_quoted("^docker"), "'^docker'");
  EXPECT_EQ(shell_quoted("it's"), "'it'\\''s'");
}

}  // namespace
}  // namespace nanoforge
