// The CUDA ops that read and write q, k, v inside the fused projection's (B, T, 2 Hkv + H, D) output (head
// slices, kernels/head_slice.h) against themselves on dense copies of the same heads: only addressing
// differs, so the results must agree bit for bit, and the heads outside the slices (v, k, q, then one guard
// head per position) must keep their bits. Flash attention forward and backward (head dims 64 and 128, causal
// and a window, GQA), rotary with the QK-norm forward and backward, and the value-embedding gate forward and
// backward (deterministic mode: the table scatter in token order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/ops.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge::gpu_test {
namespace {

const uint16_t kGuardBits = bf16_bits(-777.25f);

struct Layout {
  int64_t batch, seq, kv_heads, heads, head_dim;
  int64_t tokens() const { return batch * seq; }
  int64_t row_heads() const { return 2 * kv_heads + heads + 1; }  // v, k, q, one guard head
  std::string name() const {
    return "B " + std::to_string(batch) + " T " + std::to_string(seq) + " Hkv " + std::to_string(kv_heads) +
           " H " + std::to_string(heads) + " D " + std::to_string(head_dim);
  }
};

// Dense bf16 v, k, q of one layout, and their packing.
struct Heads {
  std::vector<uint16_t> v, k, q;
};

Heads random_heads(const Layout& l, std::mt19937& rng) {
  const int64_t kv = l.tokens() * l.kv_heads * l.head_dim, q = l.tokens() * l.heads * l.head_dim;
  return {to_bf16_bits(random_bf16(kv, 1.0f, rng)), to_bf16_bits(random_bf16(kv, 1.0f, rng)),
          to_bf16_bits(random_bf16(q, 1.0f, rng))};
}

std::vector<uint16_t> pack(const Layout& l, const Heads& h) {
  const int64_t D = l.head_dim, kv = l.kv_heads * D, q = l.heads * D;
  std::vector<uint16_t> packed(static_cast<size_t>(l.tokens() * l.row_heads() * D), kGuardBits);
  for (int64_t token = 0; token < l.tokens(); ++token) {
    auto row = packed.begin() + token * l.row_heads() * D;
    std::copy_n(h.v.begin() + token * kv, kv, row);
    std::copy_n(h.k.begin() + token * kv, kv, row + kv);
    std::copy_n(h.q.begin() + token * q, q, row + 2 * kv);
  }
  return packed;
}

// A packed tensor on the GPU and its v, k, q slices; dense tensors on the GPU.
struct PackedOnGpu {
  DeviceBuffer buffer;
  TensorView whole;
  PackedOnGpu(const Layout& l, const std::vector<uint16_t>& bits)
      : buffer(upload(bits)),
        whole(cuda_view(buffer, {l.batch, l.seq, l.row_heads(), l.head_dim}, DType::kBF16)) {}
  HeadSlice v(const Layout& l) const { return {whole, 0, l.kv_heads}; }
  HeadSlice k(const Layout& l) const { return {whole, l.kv_heads, l.kv_heads}; }
  HeadSlice q(const Layout& l) const { return {whole, 2 * l.kv_heads, l.heads}; }
  std::vector<uint16_t> bits() const { return download<uint16_t>(buffer); }
};

TensorView dense(const DeviceBuffer& buffer, const Layout& l, int64_t heads) {
  return cuda_view(buffer, {l.batch, l.seq, heads, l.head_dim}, DType::kBF16);
}

std::vector<float> rotary_table(const Layout& l, bool cosine) {
  std::vector<float> table(static_cast<size_t>(l.seq * l.head_dim / 2));
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = cosine ? std::cos(0.37f * static_cast<float>(i)) : std::sin(0.37f * static_cast<float>(i));
  return table;
}

class CudaHeadSlices : public testing::TestWithParam<Layout> {};

TEST_P(CudaHeadSlices, AttentionOnSlicesIsAttentionOnDenseCopies) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const Layout& l = GetParam();
  std::mt19937 rng(41);
  const Heads in = random_heads(l, rng);
  const std::vector<uint16_t> d_out_bits =
      to_bf16_bits(random_bf16(l.tokens() * l.heads * l.head_dim, 1.0f, rng));
  const PackedOnGpu packed(l, pack(l, in));
  const DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v), d_out = upload(d_out_bits);
  for (const int64_t window : {l.seq, int64_t{70}}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const double scale = 1.0 / std::sqrt(static_cast<double>(l.head_dim));
    const int64_t workspace_bytes = ops::attention_workspace_bytes(
        Device::kCuda, DType::kBF16, l.batch, l.seq, l.heads, l.kv_heads, l.head_dim, window);
    const DeviceBuffer workspace_buffer(Device::kCuda, workspace_bytes);
    const TensorView workspace = cuda_view(workspace_buffer, {workspace_bytes / 2}, DType::kBF16);
    const int64_t out_bytes = l.tokens() * l.heads * l.head_dim * 2,
                  lse_bytes = l.batch * l.heads * l.seq * 4;
    const DeviceBuffer out(Device::kCuda, out_bytes), lse(Device::kCuda, lse_bytes);
    const DeviceBuffer out_s(Device::kCuda, out_bytes), lse_s(Device::kCuda, lse_bytes);
    const std::initializer_list<int64_t> lse_shape{l.batch, l.heads, l.seq};
    ops::attention_forward(dense(out, l, l.heads), cuda_view(lse, lse_shape, DType::kF32),
                           dense(q, l, l.heads), dense(k, l, l.kv_heads), dense(v, l, l.kv_heads), window,
                           scale, workspace, {});
    ops::attention_forward(dense(out_s, l, l.heads), cuda_view(lse_s, lse_shape, DType::kF32), packed.q(l),
                           packed.k(l), packed.v(l), window, scale, workspace, {});
    ASSERT_EQ(download<uint16_t>(out_s), download<uint16_t>(out));
    ASSERT_EQ(download<float>(lse_s), download<float>(lse));

    const int64_t kv_bytes = static_cast<int64_t>(in.k.size()) * 2;
    const DeviceBuffer d_q(Device::kCuda, out_bytes), d_k(Device::kCuda, kv_bytes),
        d_v(Device::kCuda, kv_bytes);
    ops::attention_backward(dense(d_q, l, l.heads), dense(d_k, l, l.kv_heads), dense(d_v, l, l.kv_heads),
                            dense(d_out, l, l.heads), dense(q, l, l.heads), dense(k, l, l.kv_heads),
                            dense(v, l, l.kv_heads), dense(out, l, l.heads),
                            cuda_view(lse, lse_shape, DType::kF32), window, scale, workspace, {});
    const Heads zeros{std::vector<uint16_t>(in.v.size()), std::vector<uint16_t>(in.k.size()),
                      std::vector<uint16_t>(in.q.size())};
    const PackedOnGpu d_packed(l, pack(l, zeros));
    ops::attention_backward(d_packed.q(l), d_packed.k(l), d_packed.v(l), dense(d_out, l, l.heads),
                            packed.q(l), packed.k(l), packed.v(l), dense(out, l, l.heads),
                            cuda_view(lse, lse_shape, DType::kF32), window, scale, workspace, {});
    const Heads expected{download<uint16_t>(d_v), download<uint16_t>(d_k), download<uint16_t>(d_q)};
    ASSERT_EQ(d_packed.bits(), pack(l, expected)) << "gradients (or a guard head)";
    ASSERT_EQ(packed.bits(), pack(l, in)) << "the inputs changed";
  }
}

TEST_P(CudaHeadSlices, RotaryRmsNormOnSlicesIsRotaryRmsNormOnDenseCopies) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const Layout& l = GetParam();
  std::mt19937 rng(43);
  const Heads in = random_heads(l, rng), grads = random_heads(l, rng);
  const DeviceBuffer cos = upload(rotary_table(l, true)), sin = upload(rotary_table(l, false));
  const std::initializer_list<int64_t> table_shape{l.seq, l.head_dim / 2};
  const TensorView cos_view = cuda_view(cos, table_shape, DType::kF32);
  const TensorView sin_view = cuda_view(sin, table_shape, DType::kF32);
  const DeviceBuffer q = upload(in.q), k = upload(in.k);
  const DeviceBuffer q_rstd(Device::kCuda, l.tokens() * l.heads * 4),
      k_rstd(Device::kCuda, l.tokens() * l.kv_heads * 4);
  const DeviceBuffer q_rstd_s(Device::kCuda, l.tokens() * l.heads * 4);
  const DeviceBuffer k_rstd_s(Device::kCuda, l.tokens() * l.kv_heads * 4);
  const auto rstd = [&](const DeviceBuffer& b, int64_t heads) {
    return cuda_view(b, {l.tokens() * heads}, DType::kF32);
  };
  ops::rotary_rmsnorm_forward(dense(q, l, l.heads), rstd(q_rstd, l.heads), cos_view, sin_view, 1.2);
  ops::rotary_rmsnorm_forward(dense(k, l, l.kv_heads), rstd(k_rstd, l.kv_heads), cos_view, sin_view, 1.2);
  const PackedOnGpu packed(l, pack(l, in));
  ops::rotary_rmsnorm_forward(packed.q(l), rstd(q_rstd_s, l.heads), cos_view, sin_view, 1.2);
  ops::rotary_rmsnorm_forward(packed.k(l), rstd(k_rstd_s, l.kv_heads), cos_view, sin_view, 1.2);
  const Heads forward{in.v, download<uint16_t>(k), download<uint16_t>(q)};
  ASSERT_EQ(packed.bits(), pack(l, forward));
  ASSERT_EQ(download<float>(q_rstd_s), download<float>(q_rstd));
  ASSERT_EQ(download<float>(k_rstd_s), download<float>(k_rstd));

  const DeviceBuffer d_q = upload(grads.q), d_k = upload(grads.k);
  ops::rotary_rmsnorm_backward(dense(d_q, l, l.heads), dense(q, l, l.heads), rstd(q_rstd, l.heads), cos_view,
                               sin_view, 1.2);
  ops::rotary_rmsnorm_backward(dense(d_k, l, l.kv_heads), dense(k, l, l.kv_heads), rstd(k_rstd, l.kv_heads),
                               cos_view, sin_view, 1.2);
  const PackedOnGpu d_packed(l, pack(l, grads));
  ops::rotary_rmsnorm_backward(d_packed.q(l), packed.q(l), rstd(q_rstd, l.heads), cos_view, sin_view, 1.2);
  ops::rotary_rmsnorm_backward(d_packed.k(l), packed.k(l), rstd(k_rstd, l.kv_heads), cos_view, sin_view, 1.2);
  const Heads backward{grads.v, download<uint16_t>(d_k), download<uint16_t>(d_q)};
  ASSERT_EQ(d_packed.bits(), pack(l, backward));
}

TEST_P(CudaHeadSlices, ValueEmbedGateOnASliceIsTheGateOnADenseCopy) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const ops::KernelSettings deterministic{.deterministic =
                                              true};  // the table scatter in token order: bitwise
  const Layout& l = GetParam();
  const int64_t N = l.tokens(), C = 24, G = 12, V = 11, Hkv = l.kv_heads, D = l.head_dim;
  std::mt19937 rng(47);
  const Heads in = random_heads(l, rng), grads = random_heads(l, rng);
  const DeviceBuffer u = upload(to_bf16_bits(random_bf16(N * C, 1.0f, rng)));
  const DeviceBuffer gate_weight = upload(normal_values(Hkv * G, 0.5f, rng));
  const DeviceBuffer table = upload(normal_values(V * Hkv * D, 1.0f, rng));
  std::vector<int32_t> id_values(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)
    id_values[static_cast<size_t>(n)] = static_cast<int32_t>((n * 7 + 3) % V);
  const DeviceBuffer ids = upload(id_values);
  const TensorView u_view = cuda_view(u, {N, C}, DType::kBF16);
  const TensorView gate_view = cuda_view(gate_weight, {Hkv, G}, DType::kF32);
  const TensorView table_view = cuda_view(table, {V, Hkv * D}, DType::kF32);
  const TensorView ids_view = cuda_view(ids, {N}, DType::kI32);

  const DeviceBuffer v = upload(in.v), sigmoid(Device::kCuda, N * Hkv * 4),
                     sigmoid_s(Device::kCuda, N * Hkv * 4);
  ops::value_embed_gate_forward(dense(v, l, Hkv), cuda_view(sigmoid, {N, Hkv}, DType::kF32), u_view,
                                gate_view, table_view, ids_view);
  const PackedOnGpu packed(l, pack(l, in));
  ops::value_embed_gate_forward(packed.v(l), cuda_view(sigmoid_s, {N, Hkv}, DType::kF32), u_view, gate_view,
                                table_view, ids_view);
  ASSERT_EQ(packed.bits(), pack(l, Heads{download<uint16_t>(v), in.k, in.q}));
  ASSERT_EQ(download<float>(sigmoid_s), download<float>(sigmoid));

  const auto backward = [&](HeadSlice d_v, std::vector<uint16_t>& d_u, std::vector<float>& d_gate,
                            std::vector<float>& d_table) {
    const DeviceBuffer d_u_buffer = upload(std::vector<uint16_t>(static_cast<size_t>(N * C)));
    const DeviceBuffer d_gate_buffer = upload(std::vector<float>(static_cast<size_t>(Hkv * G)));
    const DeviceBuffer d_table_buffer = upload(std::vector<float>(static_cast<size_t>(V * Hkv * D)));
    ops::value_embed_gate_backward(
        cuda_view(d_u_buffer, {N, C}, DType::kBF16), cuda_view(d_gate_buffer, {Hkv, G}, DType::kF32),
        cuda_view(d_table_buffer, {V, Hkv * D}, DType::kF32), d_v, u_view,
        cuda_view(sigmoid, {N, Hkv}, DType::kF32), gate_view, table_view, ids_view, deterministic);
    d_u = download<uint16_t>(d_u_buffer);
    d_gate = download<float>(d_gate_buffer);
    d_table = download<float>(d_table_buffer);
  };
  const DeviceBuffer d_v = upload(grads.v);
  std::vector<uint16_t> d_u, d_u_s;
  std::vector<float> d_gate, d_gate_s, d_table, d_table_s;
  backward(dense(d_v, l, Hkv), d_u, d_gate, d_table);
  const PackedOnGpu d_packed(l, pack(l, grads));
  backward(d_packed.v(l), d_u_s, d_gate_s, d_table_s);
  EXPECT_EQ(d_u_s, d_u);
  EXPECT_EQ(d_gate_s, d_gate);
  EXPECT_EQ(d_table_s, d_table);
  EXPECT_EQ(d_packed.bits(), pack(l, grads)) << "the backward wrote into d_v's tensor";
}

std::string layout_name(const testing::TestParamInfo<Layout>& info) {
  const Layout& l = info.param;
  std::string name = "kv";  // appended piece by piece: GCC 12 misreports "x" + std::string (-Wrestrict)
  name += std::to_string(l.kv_heads) + "_q" + std::to_string(l.heads) + "_dim" + std::to_string(l.head_dim);
  return name;
}

// GQA (H = 2 Hkv) at D = 64 and plain (H = Hkv) at nanochat's D = 128; 150 positions: three 64-row tiles, the
// last partial.
INSTANTIATE_TEST_SUITE_P(Layouts, CudaHeadSlices,
                         testing::Values(Layout{1, 150, 1, 2, 64}, Layout{2, 150, 2, 2, 128}), layout_name);

}  // namespace
}  // namespace nanoforge::gpu_test
