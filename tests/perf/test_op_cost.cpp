// The ops' costs (perf/op_cost.h) against hand counts of what their kernels move and compute, and op
// recording (kernels/op_recorder.h): recorded ops do not run, buffers allocated while recording are never
// backed.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/device_buffer.h"
#include "kernels/op_recorder.h"
#include "kernels/ops.h"
#include "perf/op_cost.h"
#include "tests/perf/attention_tile_pairs.h"

namespace nanoforge {
namespace {

TensorView shaped(std::initializer_list<int64_t> dims, DType dtype) {
  return TensorView(nullptr, dims, dtype, Device::kCuda);  // costs read shapes and dtypes only
}

TEST(OpCost, RmsnormForwardReadsXWritesOutAndRstd) {
  // x, out (4, 8) bf16: 64 bytes each; rstd (4) f32: 16 bytes.
  const OpCost cost = cost::rmsnorm_forward(shaped({4, 8}, DType::kBF16), shaped({4}, DType::kF32),
                                            shaped({4, 8}, DType::kBF16), 1.0, ops::AmaxOutput());
  EXPECT_EQ(cost.bytes, 64 + 64 + 16);
  EXPECT_EQ(cost.kernels, 1);
  EXPECT_EQ(cost.tensor_flops, 0);
}

TEST(OpCost, MatmulCountsTwoMnkAndReadsOutOnlyWithBeta) {
  // out (4, 16) = a (4, 8) @ b^T with b (16, 8); bf16 in, f32 out (a weight gradient's dtype).
  const TensorView out = shaped({4, 16}, DType::kF32), a = shaped({4, 8}, DType::kBF16),
                   b = shaped({16, 8}, DType::kBF16);
  const OpCost overwrite = cost::matmul(out, a, ops::Transpose::kNo, b, ops::Transpose::kYes, 1.0, 0.0);
  EXPECT_EQ(overwrite.kind, CostClass::kGemm);
  EXPECT_EQ(overwrite.tensor_flops, 2 * 4 * 16 * 8);
  EXPECT_EQ(overwrite.bytes, 4 * 8 * 2 + 16 * 8 * 2 + 4 * 16 * 4);
  const OpCost accumulate = cost::matmul(out, a, ops::Transpose::kNo, b, ops::Transpose::kYes, 1.0, 1.0);
  EXPECT_EQ(accumulate.bytes, overwrite.bytes + 4 * 16 * 4);
  EXPECT_EQ(accumulate.gemm_rows, 4);
  EXPECT_EQ(accumulate.gemm_cols, 16);
  // a^T: K is a's first dimension.
  const OpCost transposed =
      cost::matmul(shaped({8, 16}, DType::kF32), shaped({4, 8}, DType::kBF16), ops::Transpose::kYes,
                   shaped({4, 16}, DType::kBF16), ops::Transpose::kNo, 1.0, 0.0);
  EXPECT_EQ(transposed.tensor_flops, 2 * 8 * 16 * 4);
}

// Our fused MLP GEMMs: the GEMM's FLOPs and operands at our GEMM's efficiency class, no separate act pass;
// the backward also reads act.
TEST(OpCost, FusedMlpGemmsAreTheirGemmsPlusTheBackwardsReadOfAct) {
  const TensorView x = shaped({4, 8}, DType::kBF16), w_fc = shaped({16, 8}, DType::kBF16),
                   act = shaped({4, 16}, DType::kBF16), w_proj = shaped({8, 16}, DType::kBF16);
  const OpCost forward = cost::linear_relu_squared_forward(act, x, w_fc, {});
  EXPECT_EQ(forward.kind, CostClass::kOwnGemm);
  EXPECT_EQ(forward.tensor_flops, 2 * 4 * 16 * 8);
  EXPECT_EQ(forward.bytes, (4 * 8 + 16 * 8 + 4 * 16) * 2);
  EXPECT_EQ(forward.kernels, 1);
  const OpCost backward = cost::relu_squared_linear_backward(act, x, w_proj, act, {});
  EXPECT_EQ(backward.kind, CostClass::kOwnGemm);
  EXPECT_EQ(backward.tensor_flops, 2 * 4 * 16 * 8);
  EXPECT_EQ(backward.bytes, (4 * 8 + 8 * 16 + 2 * 4 * 16) * 2);
  EXPECT_EQ(backward.gemm_rows, 4);
  EXPECT_EQ(backward.gemm_cols, 16);
}

// The same GEMMs on FP8 codes: one byte an operand element, the FP8 rate at our GEMM's efficiency (its own
// class), the forward's amax word zeroed when one is wanted.
TEST(OpCost, FusedFp8MlpGemmsReadOneByteAnOperandElement) {
  const TensorView x = shaped({4, 8}, DType::kF8E4M3), w_fc = shaped({16, 8}, DType::kF8E4M3),
                   act = shaped({4, 16}, DType::kBF16), scale = shaped({1}, DType::kF32);
  // Costs read shapes only: an amax view with some address counts as wanted.
  const TensorView amax(reinterpret_cast<void*>(uintptr_t{256}), {1}, DType::kF32, Device::kCuda);
  const OpCost forward =
      cost::fp8_linear_relu_squared_forward(act, ops::AmaxOutput{amax}, x, scale, w_fc, scale, {});
  EXPECT_EQ(forward.kind, CostClass::kOwnFp8Gemm);
  EXPECT_EQ(forward.tensor_flops, 2 * 4 * 16 * 8);
  EXPECT_EQ(forward.bytes, 4 * 8 + 16 * 8 + 4 * 16 * 2);
  EXPECT_EQ(forward.kernels, 2);
  const TensorView d_y = shaped({4, 8}, DType::kF8E5M2), w_proj_t = shaped({16, 8}, DType::kF8E4M3);
  const OpCost backward = cost::fp8_relu_squared_linear_backward(act, d_y, scale, w_proj_t, scale, act, {});
  EXPECT_EQ(backward.kind, CostClass::kOwnFp8Gemm);
  EXPECT_EQ(backward.bytes, 4 * 8 + 16 * 8 + 2 * 4 * 16 * 2);
  EXPECT_EQ(backward.kernels, 1);
}

TEST(OpCost, AdamwMovesSevenFloatsAnElement) {
  // param, exp_avg, exp_avg_sq read and written, grad read: 7 x 4 bytes per element.
  const TensorView t = shaped({10}, DType::kF32);
  EXPECT_EQ(cost::adamw_update(t, t, t, t, {}).bytes, 10 * 7 * 4);
}

TEST(OpCost, LossReadsTheLogitsOnceEachWay) {
  const TensorView logits = shaped({6, 100}, DType::kBF16), rows = shaped({6}, DType::kF32),
                   targets = shaped({6}, DType::kI32);
  const OpCost forward = cost::softcap_cross_entropy_forward(rows, rows, logits, targets, 15.0);
  EXPECT_EQ(forward.bytes, 6 * 100 * 2 + 6 * 4 + 6 * 4 + 6 * 4);
  // The training pass: the logits read, then the gradient written over them; the targets read by the
  // counting kernel and by the rows' kernel; losses and lse written.
  const OpCost both = cost::softcap_cross_entropy_forward_backward(rows, rows, logits, targets, 15.0, 1.0);
  EXPECT_EQ(both.bytes, 2 * 6 * 100 * 2 + 2 * 6 * 4 + 6 * 4 + 6 * 4);
  EXPECT_GT(both.vector_flops, forward.vector_flops);
  EXPECT_TRUE(cost::sum_loss(rows, targets).host_sync);
}

// A step's scalars kept on the device: squared_norm's and sum_loss's kernels, the f64 total read and written
// in place of the read-back.
TEST(OpCost, StepSumsStreamLikeTheirReadBackTwinsWithoutTheHostWait) {
  const TensorView x = shaped({1000}, DType::kBF16), total = shaped({1}, DType::kF64),
                   rows = shaped({6}, DType::kF32), targets = shaped({6}, DType::kI32);
  const OpCost norm = cost::add_squared_norm(total, x);
  EXPECT_EQ(norm.bytes, 1000 * 2 + 2 * 8);
  EXPECT_EQ(norm.kernels, cost::squared_norm(x).kernels);
  EXPECT_FALSE(norm.host_sync);
  EXPECT_TRUE(cost::squared_norm(x).host_sync);
  const OpCost loss = cost::add_mean_loss(total, rows, targets);
  EXPECT_EQ(loss.bytes, cost::sum_loss(rows, targets).bytes + 2 * 8);
  EXPECT_FALSE(loss.host_sync);
}

TEST(OpCost, AttentionTilePairsMatchTheDiagonalCount) {
  EXPECT_EQ(cost::attention_tile_pairs(2048, 2048), 32 * 33 / 2);  // plain causal: a triangle
  EXPECT_EQ(cost::attention_tile_pairs(2048, 2048), pairs_by_diagonals(32, 32));
  EXPECT_EQ(cost::attention_tile_pairs(2048, 512), pairs_by_diagonals(32, 8));
  EXPECT_EQ(cost::attention_tile_pairs(256, 128), pairs_by_diagonals(4, 2));
  // A window that is not a multiple of the tile: the kernel's first key tile rounds down.
  EXPECT_EQ(cost::attention_tile_pairs(256, 100), 1 + 2 + 3 + 3);
}

TEST(OpCost, AttentionFlopsAreTwoTileGemmsForwardSevenBackward) {
  const int64_t batch = 2, seq = 256, heads = 4, head_dim = 64;
  const TensorView q = shaped({batch, seq, heads, head_dim}, DType::kBF16);
  const TensorView kv = shaped({batch, seq, 2, head_dim}, DType::kBF16);
  const TensorView lse = shaped({batch, heads, seq}, DType::kF32);
  const double pair_gemm = 2.0 * 64 * 64 * head_dim;
  const double pairs = static_cast<double>(pairs_by_diagonals(4, 2) * batch * heads);
  const OpCost forward = cost::attention_forward(q, lse, q, kv, kv, 128, 0.125, lse, {});
  EXPECT_EQ(forward.tensor_flops, 2 * pair_gemm * pairs);
  EXPECT_EQ(forward.bytes, 2 * q.bytes() + 2 * kv.bytes() + lse.bytes());
  const OpCost backward = cost::attention_backward(q, kv, kv, q, q, kv, kv, q, lse, 128, 0.125, lse, {});
  EXPECT_EQ(backward.tensor_flops, 7 * pair_gemm * pairs);
  EXPECT_EQ(backward.kernels, 3);
}

class Recorded final : public OpCostSink {
 public:
  void record(const char* op, const OpCost& cost) override {
    names.push_back(op);
    costs.push_back(cost);
  }
  std::vector<std::string> names;
  std::vector<OpCost> costs;
};

TEST(CostRecording, OpsAreRecordedUnderTheProfilersNameAndDoNotRun) {
  DeviceBuffer buffer(Device::kCpu, 8 * sizeof(float));
  const TensorView x(buffer.data(), {2, 4}, DType::kF32, Device::kCpu);
  ops::fill(x, 3.0);
  Recorded recorded;
  {
    OpCostRecorder priced(recorded);
    const ops::ScopedOpRecording recording(priced);
    ops::fill(x, 7.0);
    ops::relu_squared_forward(x, x, ops::AmaxOutput());
    EXPECT_EQ(ops::squared_norm(x), 0.0);  // recorded, not computed
  }
  EXPECT_EQ(recorded.names, (std::vector<std::string>{"fill", "relu_squared_forward", "squared_norm"}));
  EXPECT_EQ(recorded.costs[0].bytes, 8 * 4);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(x.as<float>()[i], 3.0f) << i;  // the fill inside the scope never ran
  EXPECT_EQ(ops::squared_norm(x), 8 * 9.0);  // and ops run again after it
}

// The CPU's step sums write their host total: recorded, they must leave it alone.
TEST(CostRecording, StepSumsOnTheCpuAreRecordedAndDoNotRun) {
  DeviceBuffer buffer(Device::kCpu, 8 * sizeof(float) + sizeof(double));
  const TensorView x(buffer.data(), {8}, DType::kF32, Device::kCpu);
  const TensorView total(static_cast<float*>(buffer.data()) + 8, {1}, DType::kF64, Device::kCpu);
  DeviceBuffer target_buffer(Device::kCpu, 8 * sizeof(int32_t));
  const TensorView targets(target_buffer.data(), {8}, DType::kI32, Device::kCpu);
  ops::fill(x, 3.0);
  ops::fill(targets, 1.0);
  ops::fill(total, 5.0);
  Recorded recorded;
  {
    OpCostRecorder priced(recorded);
    const ops::ScopedOpRecording recording(priced);
    ops::add_squared_norm(total, x);
    ops::add_mean_loss(total, x, targets);
  }
  EXPECT_EQ(recorded.names, (std::vector<std::string>{"add_squared_norm", "add_mean_loss"}));
  EXPECT_EQ(total.as<double>()[0], 5.0);
  ops::add_squared_norm(total, x);  // and they run after it: 5 + 8 x 9, then + the mean loss 3
  ops::add_mean_loss(total, x, targets);
  EXPECT_EQ(total.as<double>()[0], 5.0 + 72.0 + 3.0);
}

TEST(CostRecording, CudaOpsAreRecordedInAnyBuild) {
  Recorded recorded;
  OpCostRecorder priced(recorded);
  const ops::ScopedOpRecording recording(priced);
  const DeviceBuffer buffer(Device::kCuda, 1 << 20);  // reserved, not allocated: no GPU needed
  const TensorView t(buffer.data(), {1024}, DType::kF32, Device::kCuda);
  ops::copy(t.rows(0, 512), t.rows(512, 512));
  ASSERT_EQ(recorded.names.size(), 1u);
  EXPECT_EQ(recorded.names[0], "copy");
  EXPECT_EQ(recorded.costs[0].bytes, 2 * 512 * 4);
}

TEST(CostRecordingDeathTest, BuffersReservedWhileRecordingAreNeverBacked) {
  Recorded recorded;
  OpCostRecorder priced(recorded);
  const ops::ScopedOpRecording recording(priced);
  const DeviceBuffer buffer(Device::kCpu, 4096);
  EXPECT_NE(buffer.data(), nullptr);
  EXPECT_DEATH(static_cast<volatile char*>(buffer.data())[0] = 1, "");
}

}  // namespace
}  // namespace nanoforge
