// The NCCL engine across ranks, under mpirun with 2 ranks and one GPU each (where a machine has no GPU, two
// emulated ones: NANOFORGE_EMULATOR=devices=2): all-reduce (sum, average; f32, bf16), reduce-scatter and
// all-gather (out of place and in place), broadcast, the barrier, a collective that must wait for the kernel
// queued before it on the compute stream, and collectives waited for in reverse. Values are small multiples
// of 1/2, exact in bf16, so results compare exactly. Skips where there are fewer GPUs than ranks.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "dist/communicator.h"
#include "dist/create_communicator.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge {
namespace {

using gpu_test::download;
using gpu_test::from_bf16_bits;
using gpu_test::to_bf16_bits;
using gpu_test::upload;
using gpu_test::view_of;

class NcclRanks : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* ranks = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (ranks == nullptr || cuda::device_count() < std::atoi(ranks)) return;
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        create_communicator(Device::kCuda, {.timeout_seconds = 120});
    ASSERT_TRUE(comm.ok()) << comm.status();
    comm_ = std::move(comm).value().release();
  }
  static void TearDownTestSuite() {
    delete comm_;
    comm_ = nullptr;
  }
  void SetUp() override {
    if (comm_ == nullptr) GTEST_SKIP() << "fewer GPUs than ranks (or not started by mpirun)";
  }

  static Communicator& comm() { return *comm_; }
  static int rank() { return comm_->rank(); }
  static int world() { return comm_->world_size(); }
  static Communicator* comm_;
};

Communicator* NcclRanks::comm_ = nullptr;

// Element i of rank r: (r + 1) / 2 + i % 5; summed over ranks: world (world + 1) / 4 + world (i % 5).
std::vector<float> rank_values(int rank, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[static_cast<size_t>(i)] = 0.5f * static_cast<float>(rank + 1) + static_cast<float>(i % 5);
  return values;
}

float summed(int world, int64_t i, ReduceOp op) {
  const float sum = 0.25f * static_cast<float>(world * (world + 1)) + static_cast<float>(world * (i % 5));
  return op == ReduceOp::kAverage ? sum / static_cast<float>(world) : sum;
}

TEST_F(NcclRanks, Engine) {
  EXPECT_EQ(comm().engine_name(), "nccl");
  EXPECT_EQ(rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  EXPECT_EQ(world(), 2);
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, comm().local_rank());
}

TEST_F(NcclRanks, AllReduceF32AndBf16) {
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{100003}}) {
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      const std::vector<float> values = rank_values(rank(), n);
      DeviceBuffer f32 = upload(values), bf16 = upload(to_bf16_bits(values));
      ASSERT_TRUE(comm().all_reduce(view_of(f32, DType::kF32, 0, n), op).wait().ok());
      ASSERT_TRUE(comm().all_reduce(view_of(bf16, DType::kBF16, 0, n), op).wait().ok());
      const std::vector<float> got = download<float>(f32),
                               got_bf16 = from_bf16_bits(download<uint16_t>(bf16));
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[static_cast<size_t>(i)], summed(world(), i, op)) << "n=" << n << " i=" << i;
        ASSERT_EQ(got_bf16[static_cast<size_t>(i)], summed(world(), i, op)) << "bf16 n=" << n << " i=" << i;
      }
    }
  }
}

TEST_F(NcclRanks, ReduceScatterAndAllGatherOutOfAndInPlace) {
  const int64_t chunk = 4099, n = chunk * 2;
  for (const bool in_place : {false, true}) {
    SCOPED_TRACE(in_place);
    DeviceBuffer input = upload(rank_values(rank(), n));
    DeviceBuffer separate(Device::kCuda, chunk * 4);
    const TensorView output = in_place ? view_of(input, DType::kF32, rank() * chunk, chunk)
                                       : view_of(separate, DType::kF32, 0, chunk);
    ASSERT_TRUE(comm().reduce_scatter(view_of(input, DType::kF32, 0, n), output, ReduceOp::kSum).wait().ok());
    std::vector<float> result(static_cast<size_t>(chunk));
    cuda::copy_to_host(result.data(), output.data, chunk * 4);
    for (int64_t k = 0; k < chunk; ++k)
      ASSERT_EQ(result[static_cast<size_t>(k)], summed(world(), rank() * chunk + k, ReduceOp::kSum)) << k;
    // Gather every rank's reduced chunk back: the whole summed vector on every rank.
    DeviceBuffer gathered(Device::kCuda, n * 4);
    const TensorView whole =
        in_place ? view_of(input, DType::kF32, 0, n) : view_of(gathered, DType::kF32, 0, n);
    ASSERT_TRUE(comm().all_gather(output, whole).wait().ok());
    std::vector<float> all(static_cast<size_t>(n));
    cuda::copy_to_host(all.data(), whole.data, n * 4);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(all[static_cast<size_t>(i)], summed(world(), i, ReduceOp::kSum)) << i;
  }
}

TEST_F(NcclRanks, BroadcastAndBarrier) {
  DeviceBuffer buffer = upload(rank_values(rank(), 1001));
  ASSERT_TRUE(comm().broadcast(view_of(buffer, DType::kF32, 0, 1001), /*root=*/1).wait().ok());
  EXPECT_EQ(download<float>(buffer), rank_values(1, 1001));
  EXPECT_TRUE(comm().barrier().ok());
}

// The collective's stream must wait for the fill queued before it on the compute stream: with lazy streams,
// a missing wait would gather the buffer before the fill has run.
TEST_F(NcclRanks, OrderedAfterTheComputeStream) {
  const int64_t n = 1 << 20;
  DeviceBuffer input(Device::kCuda, n * 4), output(Device::kCuda, 2 * n * 4);
  for (const float value : {1.5f, -2.0f}) {
    ops::fill(view_of(input, DType::kF32, 0, n), value + static_cast<float>(rank()));
    ASSERT_TRUE(comm()
                    .all_gather(view_of(input, DType::kF32, 0, n), view_of(output, DType::kF32, 0, 2 * n))
                    .wait()
                    .ok());
    const std::vector<float> result = download<float>(output);
    EXPECT_EQ(result.front(), value);
    EXPECT_EQ(result[static_cast<size_t>(n - 1)], value);
    EXPECT_EQ(result[static_cast<size_t>(n)], value + 1);
    EXPECT_EQ(result.back(), value + 1);
  }
}

TEST_F(NcclRanks, QueuedCollectivesWaitedInReverse) {
  std::vector<DeviceBuffer> buffers;
  std::vector<CommWork> works;
  for (int i = 0; i < 8; ++i) {
    buffers.push_back(upload(rank_values(rank() + i, 1000)));
    works.push_back(comm().all_reduce(view_of(buffers.back(), DType::kF32, 0, 1000), ReduceOp::kSum));
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it)
    ASSERT_TRUE(it->wait().ok());
  for (int i = 0; i < 8; ++i) {
    const std::vector<float> got = download<float>(buffers[static_cast<size_t>(i)]);
    const std::vector<float> a = rank_values(i, 1000), b = rank_values(1 + i, 1000);
    for (size_t k = 0; k < got.size(); ++k)
      ASSERT_EQ(got[k], a[k] + b[k]) << i << " " << k;
  }
}

}  // namespace
}  // namespace nanoforge
