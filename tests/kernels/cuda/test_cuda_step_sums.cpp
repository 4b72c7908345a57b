// The step's scalars on the device (ops::add_squared_norm, ops::add_mean_loss, ops::fill of f64): each adds
// to a total already there exactly what the read-back ops (squared_norm, sum_loss's sum / count) return, so a
// data-parallel step that keeps them on the device reports the same bits as one that read them back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

class CudaStepSums : public testing::Test {
 protected:
  void SetUp() override { NANOFORGE_SKIP_WITHOUT_GPU(); }
};

TensorView scalar_on_gpu(const DeviceBuffer& buffer) {
  return TensorView(buffer.data(), {1}, DType::kF64, Device::kCuda);
}

TEST_F(CudaStepSums, AddSquaredNormAddsSquaredNorm) {
  std::mt19937 rng(3);
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (int64_t size : {int64_t{1}, int64_t{1517}, int64_t{300'007}}) {
      const std::vector<float> values = uniform_values(size, -2, 2, rng);
      const GpuTensor x(values, {size}, dtype, /*offset=*/1);
      const DeviceBuffer total = upload(std::vector<double>{0.375});
      ops::add_squared_norm(scalar_on_gpu(total), x.view);
      ops::add_squared_norm(scalar_on_gpu(total), x.view);
      const double once = ops::squared_norm(x.view);
      EXPECT_EQ(download<double>(total)[0], 0.375 + once + once) << dtype_name(dtype) << " " << size;
    }
  }
}

TEST_F(CudaStepSums, AddMeanLossAddsTheMeanOfTheKeptRows) {
  std::mt19937 rng(4);
  for (int64_t rows : {int64_t{5}, int64_t{4099}}) {
    const std::vector<float> losses = uniform_values(rows, 0, 11, rng);
    std::vector<int32_t> targets(static_cast<size_t>(rows), 7);
    for (int64_t i = 0; i < rows; i += 3)
      targets[static_cast<size_t>(i)] = -1;
    const DeviceBuffer losses_gpu = upload(losses), targets_gpu = upload(targets);
    const TensorView losses_view(losses_gpu.data(), {rows}, DType::kF32, Device::kCuda);
    const TensorView targets_view(targets_gpu.data(), {rows}, DType::kI32, Device::kCuda);
    const DeviceBuffer total = upload(std::vector<double>{-1.25});
    ops::add_mean_loss(scalar_on_gpu(total), losses_view, targets_view);
    const ops::LossSum read_back = ops::sum_loss(losses_view, targets_view);
    EXPECT_EQ(download<double>(total)[0], -1.25 + read_back.sum / static_cast<double>(read_back.count))
        << rows << " rows";
  }
  // Every target ignored: NaN, as GPT::forward returns.
  const DeviceBuffer losses_gpu = upload(std::vector<float>{1, 2}),
                     targets_gpu = upload(std::vector<int32_t>{-1, -1});
  const DeviceBuffer total = upload(std::vector<double>{0});
  ops::add_mean_loss(scalar_on_gpu(total), TensorView(losses_gpu.data(), {2}, DType::kF32, Device::kCuda),
                     TensorView(targets_gpu.data(), {2}, DType::kI32, Device::kCuda));
  EXPECT_TRUE(std::isnan(download<double>(total)[0]));
}

TEST_F(CudaStepSums, FillsF64) {
  const DeviceBuffer buffer = upload(std::vector<double>(5, 3.0));
  ops::fill(TensorView(buffer.data(), {5}, DType::kF64, Device::kCuda), -0.1);
  EXPECT_EQ(download<double>(buffer), std::vector<double>(5, -0.1));
}

// On the CPU the same contract (the data-parallel tests rely on it there too).
TEST(StepSums, CpuAddsWhatTheReadBackOpsReturn) {
  std::mt19937 rng(5);
  std::vector<float> x = uniform_values(1001, -1, 1, rng);
  std::vector<double> total = {0.5};
  const TensorView total_view(total.data(), {1}, DType::kF64, Device::kCpu);
  ops::add_squared_norm(total_view, cpu_view(x, {1001}));
  EXPECT_EQ(total[0], 0.5 + ops::squared_norm(cpu_view(x, {1001})));
  std::vector<float> losses = {1.5f, 2.25f, 4.0f};
  std::vector<int32_t> targets = {3, -1, 0};
  ops::add_mean_loss(total_view, cpu_view(losses, {3}), cpu_view(targets, {3}));
  EXPECT_EQ(total[0], 0.5 + ops::squared_norm(cpu_view(x, {1001})) + (1.5 + 4.0) / 2);
}

}  // namespace
}  // namespace nanoforge::gpu_test
