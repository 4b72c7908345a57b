// Head slices (kernels/head_slice.h): the ops that read and write q, k, v inside the fused projection's
// (B, T, 2 Hkv + H, D) output must give, on slices, bit for bit what they give on dense copies of the same
// heads, and must not touch the heads outside their slice. Each case packs v, k, q into one tensor with one
// guard head after them (so no slice reaches the end of a position) and runs every op both ways: attention
// forward and backward (gradients written into slices of a packed gradient), rotary with the QK-norm forward
// and backward, and the value-embedding gate forward and backward. Plus HeadSlice's own checks.
#include <cmath>
#include <string>
#include <vector>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

constexpr double kGuard = -777.25;  // the guard head's value: any write to it shows

// B, T, Hkv, H, D; the packed tensor has R = 2 Hkv + H + 1 heads per position (the last one a guard).
struct Layout {
  int64_t batch, seq, kv_heads, heads, head_dim;
  int64_t row_heads() const { return 2 * kv_heads + heads + 1; }
  std::vector<int64_t> packed() const { return {batch, seq, row_heads(), head_dim}; }
  std::vector<int64_t> q() const { return {batch, seq, heads, head_dim}; }
  std::vector<int64_t> kv() const { return {batch, seq, kv_heads, head_dim}; }
  std::string name() const {
    return "B " + std::to_string(batch) + " T " + std::to_string(seq) + " Hkv " + std::to_string(kv_heads) +
           " H " + std::to_string(heads) + " D " + std::to_string(head_dim);
  }
};

// A packed tensor whose v, k, q heads hold the given dense tensors and whose guard head holds kGuard.
HostTensor<double> pack(const Layout& l, const HostTensor<double>& v, const HostTensor<double>& k,
                        const HostTensor<double>& q) {
  HostTensor<double> packed(l.packed(), kGuard);
  const int64_t D = l.head_dim;
  for (int64_t token = 0; token < l.batch * l.seq; ++token) {
    double* row = packed.data.data() + token * l.row_heads() * D;
    std::copy_n(v.data.data() + token * l.kv_heads * D, l.kv_heads * D, row);
    std::copy_n(k.data.data() + token * l.kv_heads * D, l.kv_heads * D, row + l.kv_heads * D);
    std::copy_n(q.data.data() + token * l.heads * D, l.heads * D, row + 2 * l.kv_heads * D);
  }
  return packed;
}

struct Slices {
  HeadSlice v, k, q;
};
Slices slices(const Layout& l, HostTensor<double>& packed) {
  return {HeadSlice(packed.view(), 0, l.kv_heads), HeadSlice(packed.view(), l.kv_heads, l.kv_heads),
          HeadSlice(packed.view(), 2 * l.kv_heads, l.heads)};
}

// The packed tensor is exactly pack(v, k, q): every head bitwise, the guard untouched.
void expect_packed(const Layout& l, const HostTensor<double>& packed, const HostTensor<double>& v,
                   const HostTensor<double>& k, const HostTensor<double>& q, const char* what) {
  EXPECT_EQ(packed.data, pack(l, v, k, q).data) << what;
}

const Layout kLayouts[] = {{2, 70, 2, 4, 8}, {1, 9, 1, 3, 16}, {2, 5, 3, 3, 4}};

TEST(HeadSlices, AttentionOnSlicesIsAttentionOnDenseCopies) {
  for (const Layout& l : kLayouts) {
    SCOPED_TRACE(l.name());
    for (const int64_t window : {l.seq, int64_t{3}}) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(l.head_dim));
      HostTensor<double> q = random_tensor<double>(l.q(), 1), k = random_tensor<double>(l.kv(), 2);
      HostTensor<double> v = random_tensor<double>(l.kv(), 3), d_out = random_tensor<double>(l.q(), 4);
      HostTensor<double> packed = pack(l, v, k, q);
      HostTensor<double> workspace({ops::attention_workspace_bytes(Device::kCpu, DType::kF64, l.batch, l.seq,
                                                                   l.heads, l.kv_heads, l.head_dim, window) /
                                    8});
      HostTensor<double> out(l.q()), lse({l.batch * l.heads * l.seq}), out_s(l.q()), lse_s(lse.shape);
      ops::attention_forward(out.view(), lse.view(), q.view(), k.view(), v.view(), window, scale,
                             workspace.view(), {});
      const Slices x = slices(l, packed);
      ops::attention_forward(out_s.view(), lse_s.view(), x.q, x.k, x.v, window, scale, workspace.view(), {});
      EXPECT_EQ(out_s.data, out.data);
      EXPECT_EQ(lse_s.data, lse.data);

      HostTensor<double> d_q(l.q()), d_k(l.kv()), d_v(l.kv());
      ops::attention_backward(d_q.view(), d_k.view(), d_v.view(), d_out.view(), q.view(), k.view(), v.view(),
                              out.view(), lse.view(), window, scale, workspace.view(), {});
      HostTensor<double> d_packed(l.packed(), kGuard);
      const Slices d = slices(l, d_packed);
      ops::attention_backward(d.q, d.k, d.v, d_out.view(), x.q, x.k, x.v, out.view(), lse.view(), window,
                              scale, workspace.view(), {});
      expect_packed(l, d_packed, d_v, d_k, d_q, "attention gradients");
      expect_packed(l, packed, v, k, q, "attention inputs");
    }
  }
}

TEST(HeadSlices, RotaryRmsNormOnSlicesIsRotaryRmsNormOnDenseCopies) {
  for (const Layout& l : kLayouts) {
    SCOPED_TRACE(l.name());
    const int64_t half = l.head_dim / 2;
    HostTensor<double> cos = random_tensor<double>({l.seq, half}, 5),
                       sin = random_tensor<double>({l.seq, half}, 6);
    HostTensor<double> q = random_tensor<double>(l.q(), 7), k = random_tensor<double>(l.kv(), 8);
    HostTensor<double> v = random_tensor<double>(l.kv(), 9);
    HostTensor<double> packed = pack(l, v, k, q);
    HostTensor<double> q_rstd({l.batch * l.seq * l.heads}), k_rstd({l.batch * l.seq * l.kv_heads});
    HostTensor<double> q_rstd_s(q_rstd.shape), k_rstd_s(k_rstd.shape);
    ops::rotary_rmsnorm_forward(q.view(), q_rstd.view(), cos.view(), sin.view(), 1.2);
    ops::rotary_rmsnorm_forward(k.view(), k_rstd.view(), cos.view(), sin.view(), 1.2);
    const Slices x = slices(l, packed);
    ops::rotary_rmsnorm_forward(x.q, q_rstd_s.view(), cos.view(), sin.view(), 1.2);
    ops::rotary_rmsnorm_forward(x.k, k_rstd_s.view(), cos.view(), sin.view(), 1.2);
    expect_packed(l, packed, v, k, q, "rotary forward");
    EXPECT_EQ(q_rstd_s.data, q_rstd.data);
    EXPECT_EQ(k_rstd_s.data, k_rstd.data);

    HostTensor<double> d_q = random_tensor<double>(l.q(), 10), d_k = random_tensor<double>(l.kv(), 11);
    HostTensor<double> d_v = random_tensor<double>(l.kv(), 12);
    HostTensor<double> d_packed = pack(l, d_v, d_k, d_q);
    ops::rotary_rmsnorm_backward(d_q.view(), q.view(), q_rstd.view(), cos.view(), sin.view(), 1.2);
    ops::rotary_rmsnorm_backward(d_k.view(), k.view(), k_rstd.view(), cos.view(), sin.view(), 1.2);
    const Slices d = slices(l, d_packed);
    ops::rotary_rmsnorm_backward(d.q, x.q, q_rstd.view(), cos.view(), sin.view(), 1.2);
    ops::rotary_rmsnorm_backward(d.k, x.k, k_rstd.view(), cos.view(), sin.view(), 1.2);
    expect_packed(l, d_packed, d_v, d_k, d_q, "rotary backward");
  }
}

TEST(HeadSlices, ValueEmbedGateOnASliceIsTheGateOnADenseCopy) {
  for (const Layout& l : kLayouts) {
    SCOPED_TRACE(l.name());
    const int64_t N = l.batch * l.seq, C = 24, G = 12, V = 11, D = l.head_dim, Hkv = l.kv_heads;
    HostTensor<double> u = random_tensor<double>({N, C}, 13),
                       gate_weight = random_tensor<double>({Hkv, G}, 14);
    HostTensor<double> table = random_tensor<double>({V, Hkv * D}, 15);
    HostTensor<int32_t> ids({N});
    for (int64_t n = 0; n < N; ++n)
      ids[n] = static_cast<int32_t>((n * 7 + 3) % V);
    HostTensor<double> q = random_tensor<double>(l.q(), 16), k = random_tensor<double>(l.kv(), 17);
    HostTensor<double> v = random_tensor<double>(l.kv(), 18);
    HostTensor<double> packed = pack(l, v, k, q);
    HostTensor<double> sigmoid({N, Hkv}), sigmoid_s({N, Hkv});
    ops::value_embed_gate_forward(v.view(), sigmoid.view(), u.view(), gate_weight.view(), table.view(),
                                  ids.view());
    ops::value_embed_gate_forward(slices(l, packed).v, sigmoid_s.view(), u.view(), gate_weight.view(),
                                  table.view(), ids.view());
    expect_packed(l, packed, v, k, q, "gate forward");
    EXPECT_EQ(sigmoid_s.data, sigmoid.data);

    HostTensor<double> d_v = random_tensor<double>(l.kv(), 19), d_k = random_tensor<double>(l.kv(), 20);
    HostTensor<double> d_q = random_tensor<double>(l.q(), 21);
    HostTensor<double> d_packed = pack(l, d_v, d_k, d_q);
    HostTensor<double> d_u({N, C}), d_gate({Hkv, G}), d_table({V, Hkv * D});
    HostTensor<double> d_u_s({N, C}), d_gate_s({Hkv, G}), d_table_s({V, Hkv * D});
    ops::value_embed_gate_backward(d_u.view(), d_gate.view(), d_table.view(), d_v.view(), u.view(),
                                   sigmoid.view(), gate_weight.view(), table.view(), ids.view(), {});
    ops::value_embed_gate_backward(d_u_s.view(), d_gate_s.view(), d_table_s.view(), slices(l, d_packed).v,
                                   u.view(), sigmoid.view(), gate_weight.view(), table.view(), ids.view(),
                                   {});
    EXPECT_EQ(d_u_s.data, d_u.data);
    EXPECT_EQ(d_gate_s.data, d_gate.data);
    EXPECT_EQ(d_table_s.data, d_table.data);
    expect_packed(l, d_packed, d_v, d_k, d_q, "gate backward reads only");
  }
}

TEST(HeadSlices, DescribeAndRefuseHeadsOutsideTheTensor) {
  use_threadsafe_death_tests();
  HostTensor<double> packed({2, 3, 5, 4});
  const HeadSlice dense(packed.view());
  EXPECT_TRUE(dense.dense());
  EXPECT_EQ(dense.row_elements(), 20);
  const HeadSlice middle(packed.view(), 1, 2);
  EXPECT_FALSE(middle.dense());
  EXPECT_EQ(middle.data(), static_cast<void*>(packed.data.data() + 4));
  EXPECT_EQ(middle.describe(), "heads [1, 3) of f64[2, 3, 5, 4] on cpu");
  HostTensor<double> tokens({6, 5, 4});  // (tokens, heads, D): one batch
  const HeadSlice all(tokens.view());
  EXPECT_EQ(all.batch(), 1);
  EXPECT_EQ(all.seq(), 6);
  EXPECT_EQ(all.heads(), 5);
  EXPECT_DEATH(HeadSlice(packed.view(), 4, 2), "heads \\[4, 6\\) are not inside");
  EXPECT_DEATH(HeadSlice(packed.view(), -1, 1), "heads \\[-1, 0\\) are not inside");
  HostTensor<double> flat({6, 20});
  EXPECT_DEATH({ const HeadSlice bad(flat.view()); }, "must have rank 4");
}

}  // namespace
}  // namespace nanoforge::test
