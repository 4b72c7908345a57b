// The world-size-1 path: create_communicator without a launcher gives the single engine, whose collectives
// are identities and copies that complete at once; and the contract checks every engine shares.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "dist/create_communicator.h"
#include "dist/single_communicator.h"

namespace nanoforge {
namespace {

TensorView view(std::vector<float>& values) {
  return TensorView(values.data(), {static_cast<int64_t>(values.size())}, DType::kF32, Device::kCpu);
}

TEST(SingleCommunicator, CreatedWithoutALauncher) {
  // ctest starts this binary directly: no OMPI_*, SLURM_*, RANK variables.
  absl::StatusOr<std::unique_ptr<Communicator>> comm = create_communicator(Device::kCpu, {});
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->engine_name(), "single");
  EXPECT_EQ((*comm)->rank(), 0);
  EXPECT_EQ((*comm)->world_size(), 1);
  EXPECT_EQ((*comm)->local_rank(), 0);
  EXPECT_TRUE((*comm)->barrier().ok());
}

TEST(SingleCommunicator, RejectsANonPositiveTimeout) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      create_communicator(Device::kCpu, {.timeout_seconds = 0});
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("timeout_seconds"), std::string::npos);
}

TEST(SingleCommunicator, CollectivesOfOneRank) {
  SingleCommunicator comm(Device::kCpu);
  for (const int64_t n : {1, 7, 1000003}) {
    std::vector<float> buffer(static_cast<size_t>(n));
    std::iota(buffer.begin(), buffer.end(), 0.5f);
    const std::vector<float> original = buffer;
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      CommWork work = comm.all_reduce(view(buffer), op);
      EXPECT_TRUE(work.done());
      EXPECT_TRUE(work.wait().ok());
      EXPECT_EQ(buffer, original);
    }
    std::vector<float> output(static_cast<size_t>(n), -1);
    EXPECT_TRUE(comm.reduce_scatter(view(buffer), view(output), ReduceOp::kAverage).wait().ok());
    EXPECT_EQ(output, original);
    std::fill(output.begin(), output.end(), -1);
    EXPECT_TRUE(comm.all_gather(view(buffer), view(output)).wait().ok());
    EXPECT_EQ(output, original);
    EXPECT_TRUE(comm.broadcast(view(buffer), 0).wait().ok());
    EXPECT_EQ(buffer, original);
  }
}

TEST(SingleCommunicator, InPlaceFormsAreNoOps) {
  SingleCommunicator comm(Device::kCpu);
  std::vector<float> buffer = {1, 2, 3};
  EXPECT_TRUE(comm.reduce_scatter(view(buffer), view(buffer), ReduceOp::kSum).wait().ok());
  EXPECT_TRUE(comm.all_gather(view(buffer), view(buffer)).wait().ok());
  EXPECT_EQ(buffer, (std::vector<float>{1, 2, 3}));
}

TEST(CommWork, DefaultIsComplete) {
  CommWork work;
  EXPECT_TRUE(work.done());
  EXPECT_TRUE(work.wait().ok());
  EXPECT_TRUE(work.wait().ok());  // waiting twice is allowed
}

using SingleCommunicatorDeathTest = ::testing::Test;

TEST_F(SingleCommunicatorDeathTest, ContractViolationsAbortWithTheTensors) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SingleCommunicator comm(Device::kCpu);
  std::vector<float> input(6);
  std::vector<float> output(4);
  EXPECT_DEATH(comm.reduce_scatter(view(input), view(output), ReduceOp::kSum),
               "input f32\\[6\\] on cpu must hold world_size x output f32\\[4\\] on cpu");
  EXPECT_DEATH(comm.all_gather(view(input), view(output)), "all_gather over 1 ranks");
  EXPECT_DEATH(comm.broadcast(view(input), 1), "root 1 is not a rank of a world of 1");
  std::vector<float> wrong_device(4);
  TensorView gpu_view(wrong_device.data(), {4}, DType::kF32, Device::kCuda);
  EXPECT_DEATH(comm.all_reduce(gpu_view, ReduceOp::kSum), "the single engine serves cpu tensors");
}

}  // namespace
}  // namespace nanoforge
