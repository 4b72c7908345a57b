// The NCCL engine on one GPU: NCCL needs a distinct device per rank, so with a single GPU this tests a world
// of one — every collective, bf16 and f32, sum and average, in-place forms, the barrier, queued collectives
// waited for in reverse order, and (the part a world of one does exercise fully) that a collective is ordered
// after the kernels queued before it on the default stream. Multi-GPU runs need a machine with several GPUs
// (docs/distributed.md). Skips without a GPU; also checks the single engine's device copies.
#include <gtest/gtest.h>

#include <vector>

#include "dist/launch_env.h"
#include "dist/nccl_communicator.h"
#include "dist/single_communicator.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge {
namespace {

using gpu_test::download;
using gpu_test::upload;
using gpu_test::view_of;

#define SKIP_WITHOUT_GPU()                                                      \
  do {                                                                          \
    std::string reason;                                                         \
    if (!cuda::available(&reason)) GTEST_SKIP() << "no usable GPU: " << reason; \
  } while (false)

std::unique_ptr<Communicator> nccl_world_of_one() {
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      create_nccl_communicator(LaunchEnv{}, {.timeout_seconds = 60});
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? std::move(comm).value() : nullptr;
}

std::vector<float> ramp(size_t n, float offset) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i)
    values[i] = offset + static_cast<float>(i % 251) * 0.5f;
  return values;
}

TEST(NcclCommunicator, WorldOfOne) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Communicator> comm = nccl_world_of_one();
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->engine_name(), "nccl");
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->world_size(), 1);
  EXPECT_TRUE(comm->barrier().ok());
}

TEST(NcclCommunicator, AllReduceF32AndBf16) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Communicator> comm = nccl_world_of_one();
  ASSERT_NE(comm, nullptr);
  for (const size_t n : {size_t{1}, size_t{7}, size_t{1000003}}) {
    const std::vector<float> values = ramp(n, 1.0f);
    DeviceBuffer f32 = upload(values);
    DeviceBuffer bf16 = upload(gpu_test::to_bf16_bits(values));
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      ASSERT_TRUE(comm->all_reduce(view_of(f32, DType::kF32, 0, static_cast<int64_t>(n)), op).wait().ok());
      ASSERT_TRUE(comm->all_reduce(view_of(bf16, DType::kBF16, 0, static_cast<int64_t>(n)), op).wait().ok());
    }
    EXPECT_EQ(download<float>(f32), values);
    EXPECT_EQ(gpu_test::from_bf16_bits(download<uint16_t>(bf16)), values);  // these values are exact in bf16
  }
}

TEST(NcclCommunicator, ReduceScatterAllGatherBroadcast) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Communicator> comm = nccl_world_of_one();
  ASSERT_NE(comm, nullptr);
  const int64_t n = 4099;
  const std::vector<float> values = ramp(static_cast<size_t>(n), 3.0f);
  DeviceBuffer input = upload(values);
  DeviceBuffer output(Device::kCuda, n * 4);
  ASSERT_TRUE(comm->reduce_scatter(view_of(input, DType::kF32, 0, n), view_of(output, DType::kF32, 0, n),
                                   ReduceOp::kAverage)
                  .wait()
                  .ok());
  EXPECT_EQ(download<float>(output), values);
  ops::fill(view_of(output, DType::kF32, 0, n), 0.0);
  ASSERT_TRUE(
      comm->all_gather(view_of(input, DType::kF32, 0, n), view_of(output, DType::kF32, 0, n)).wait().ok());
  EXPECT_EQ(download<float>(output), values);
  // In place (the output is chunk 0 of the input, and the other way round).
  ASSERT_TRUE(comm->reduce_scatter(view_of(input, DType::kF32, 0, n), view_of(input, DType::kF32, 0, n),
                                   ReduceOp::kSum)
                  .wait()
                  .ok());
  ASSERT_TRUE(
      comm->all_gather(view_of(input, DType::kF32, 0, n), view_of(input, DType::kF32, 0, n)).wait().ok());
  ASSERT_TRUE(comm->broadcast(view_of(input, DType::kF32, 0, n), 0).wait().ok());
  EXPECT_EQ(download<float>(input), values);
}

// A collective must see what kernels queued before it on the default stream wrote: fill a large buffer (a
// kernel that takes a while), then at once gather it out of place on the NCCL stream.
TEST(NcclCommunicator, OrderedAfterTheComputeStream) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Communicator> comm = nccl_world_of_one();
  ASSERT_NE(comm, nullptr);
  // 256 MB of f32 (16 MB on the CUDA emulator, whose lazy streams order the fill the same way at any size).
  const int64_t n = cuda::emulated() ? int64_t{4} << 20 : int64_t{64} << 20;
  DeviceBuffer input(Device::kCuda, n * 4);
  DeviceBuffer output(Device::kCuda, n * 4);
  for (const float value : {1.5f, -2.0f, 7.25f}) {
    ops::fill(view_of(input, DType::kF32, 0, n), value);
    ASSERT_TRUE(
        comm->all_gather(view_of(input, DType::kF32, 0, n), view_of(output, DType::kF32, 0, n)).wait().ok());
    const std::vector<float> result = download<float>(output);
    EXPECT_EQ(result.front(), value);
    EXPECT_EQ(result[static_cast<size_t>(n / 2)], value);
    EXPECT_EQ(result.back(), value);
  }
}

TEST(NcclCommunicator, QueuedCollectivesWaitedInReverse) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Communicator> comm = nccl_world_of_one();
  ASSERT_NE(comm, nullptr);
  std::vector<DeviceBuffer> buffers;
  std::vector<CommWork> works;
  for (int i = 0; i < 16; ++i) {
    buffers.push_back(upload(ramp(10000, static_cast<float>(i))));
    works.push_back(comm->all_reduce(view_of(buffers.back(), DType::kF32, 0, 10000), ReduceOp::kAverage));
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it)
    ASSERT_TRUE(it->wait().ok());
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(download<float>(buffers[static_cast<size_t>(i)]), ramp(10000, static_cast<float>(i)));
}

TEST(SingleCommunicatorOnCuda, CopiesOnTheDevice) {
  SKIP_WITHOUT_GPU();
  SingleCommunicator comm(Device::kCuda);
  const std::vector<float> values = ramp(1000, 2.0f);
  DeviceBuffer input = upload(values);
  DeviceBuffer output(Device::kCuda, 4000);
  ASSERT_TRUE(comm.all_gather(view_of(input, DType::kF32, 0, 1000), view_of(output, DType::kF32, 0, 1000))
                  .wait()
                  .ok());
  EXPECT_EQ(download<float>(output), values);
}

}  // namespace
}  // namespace nanoforge
