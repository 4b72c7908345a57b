// attention_forward / attention_backward: causal sliding-window attention against an explicit reference
// (scores, mask, softmax, weighted sum of values; no blocking) for plain causal windows, windows that cut
// the past, window 0, GQA groups of 2 and 3, sequences that are not a multiple of the kernel's 64-query
// block, and head dims 8 and 64; the backward against central differences of sum(w * out).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct AttentionCase {
  int64_t batch, seq, heads, kv_heads, head_dim, window;
};

std::string describe(const AttentionCase& c) {
  return "B=" + std::to_string(c.batch) + " T=" + std::to_string(c.seq) + " H=" + std::to_string(c.heads) +
         " Hkv=" + std::to_string(c.kv_heads) + " D=" + std::to_string(c.head_dim) +
         " window=" + std::to_string(c.window);
}

double softmax_scale(const AttentionCase& c) {
  return 1.0 / std::sqrt(static_cast<double>(c.head_dim));
}

struct AttentionReference {
  std::vector<double> out, lse;
};

// For each (b, h, t): scores s_j = scale * q_t . k_j for j in [max(0, t - window), t] (kv head h / (H /
// Hkv)), p = softmax(s), out_t = sum_j p_j v_j, lse = log sum_j exp(s_j).
AttentionReference reference_attention(const AttentionCase& c, const std::vector<double>& q,
                                       const std::vector<double>& k, const std::vector<double>& v,
                                       double scale) {
  const int64_t T = c.seq, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  AttentionReference r{std::vector<double>(q.size()),
                       std::vector<double>(static_cast<size_t>(c.batch * H * T))};
  std::vector<double> scores(static_cast<size_t>(T));
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kv_head = h / (H / Hkv);
      for (int64_t t = 0; t < T; ++t) {
        const double* q_row = q.data() + ((b * T + t) * H + h) * D;
        const int64_t first = std::max<int64_t>(0, t - c.window);
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t j = first; j <= t; ++j) {
          const double* k_row = k.data() + ((b * T + j) * Hkv + kv_head) * D;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q_row[d] * k_row[d];
          scores[j] = scale * dot;
          max_score = std::max(max_score, scores[j]);
        }
        double sum = 0;
        for (int64_t j = first; j <= t; ++j)
          sum += std::exp(scores[j] - max_score);
        const double lse = max_score + std::log(sum);
        r.lse[(b * H + h) * T + t] = lse;
        double* out_row = r.out.data() + ((b * T + t) * H + h) * D;
        for (int64_t j = first; j <= t; ++j) {
          const double p = std::exp(scores[j] - lse);
          const double* v_row = v.data() + ((b * T + j) * Hkv + kv_head) * D;
          for (int64_t d = 0; d < D; ++d)
            out_row[d] += p * v_row[d];
        }
      }
    }
  }
  return r;
}

// Tensors of one attention call in element type T, with the workspace the op asks for.
template <class T>
struct AttentionTensors {
  HostTensor<T> q, k, v, out, lse, workspace;

  AttentionTensors(const AttentionCase& c, uint64_t seed)
      : q(random_tensor<T>({c.batch, c.seq, c.heads, c.head_dim}, seed, -2, 2)),
        k(random_tensor<T>({c.batch, c.seq, c.kv_heads, c.head_dim}, seed + 1, -2, 2)),
        v(random_tensor<T>({c.batch, c.seq, c.kv_heads, c.head_dim}, seed + 2)),
        out(q.shape, static_cast<T>(kNaN)),
        lse({c.batch, c.heads, c.seq}, static_cast<T>(kNaN)),
        workspace({ops::attention_workspace_bytes(Device::kCpu, dtype_of<T>(), c.batch, c.seq, c.heads,
                                                  c.kv_heads, c.head_dim, c.window) /
                   static_cast<int64_t>(sizeof(T))},
                  static_cast<T>(kNaN)) {}

  void forward(const AttentionCase& c) {
    ops::attention_forward(out.view(), lse.view(), q.view(), k.view(), v.view(), c.window, softmax_scale(c),
                           workspace.view(), {});
  }
};

const AttentionCase kForwardCases[] = {
    {2, 70, 4, 2, 8, 1000},  // window >= T: plain causal; GQA 4/2; T = 64 + 6
    {1, 150, 3, 1, 64, 40},  // a window that cuts the past, GQA 3/1, head dim 64, three query blocks
    {2, 100, 2, 2, 8, 0},    // window 0: each query sees only itself
    {1, 130, 4, 2, 64, 64},  // a window exactly one query block long
    {1, 64, 2, 1, 8, 63},    // window T - 1: every past key, one full block
};

template <class T>
void check_attention_forward(const AttentionCase& c, double rel) {
  SCOPED_TRACE(describe(c));
  AttentionTensors<T> tensors(c, 70);
  const AttentionReference expected = reference_attention(c, tensors.q.as_double(), tensors.k.as_double(),
                                                          tensors.v.as_double(), softmax_scale(c));
  tensors.forward(c);
  EXPECT_TRUE(all_close(tensors.out, expected.out, rel));
  EXPECT_TRUE(all_close(tensors.lse, expected.lse, rel));
}

TEST(Attention, ForwardMatchesReferenceF64) {
  for (const AttentionCase& c : kForwardCases)
    check_attention_forward<double>(c, kF64Rel);
}

// f32: scores are 64-term dots (~64 * 6e-8 = 4e-6 of their magnitude), exp turns that into a relative error
// of the probabilities, and the output averages <= 150 values: ~1e-5 of the rms.
TEST(Attention, ForwardMatchesReferenceF32) {
  for (const AttentionCase& c : kForwardCases)
    check_attention_forward<float>(c, 3e-5);
}

// L = sum(w * out) in q, k and v; d_q, d_k, d_v are written, so they start as NaN.
void check_attention_backward(const AttentionCase& c) {
  SCOPED_TRACE(describe(c));
  AttentionTensors<double> t(c, 71);
  HostTensor<double> w = random_tensor<double>(t.out.shape, 72);
  const Objective objective = [&] {
    t.forward(c);
    return weighted_sum(w, t.out);
  };
  objective();
  HostTensor<double> d_q(t.q.shape, kNaN), d_k(t.k.shape, kNaN), d_v(t.v.shape, kNaN);
  ops::attention_backward(d_q.view(), d_k.view(), d_v.view(), w.view(), t.q.view(), t.k.view(), t.v.view(),
                          t.out.view(), t.lse.view(), c.window, softmax_scale(c), t.workspace.view(), {});
  EXPECT_TRUE(gradient_matches(t.q, d_q.as_double(), objective, 73, 96)) << "d_q";
  EXPECT_TRUE(gradient_matches(t.k, d_k.as_double(), objective, 74, 96)) << "d_k";
  EXPECT_TRUE(gradient_matches(t.v, d_v.as_double(), objective, 75, 96)) << "d_v";
}

TEST(Attention, BackwardMatchesFiniteDifferencesCausalGqa) {
  check_attention_backward({2, 70, 4, 2, 8, 1000});
}
TEST(Attention, BackwardMatchesFiniteDifferencesCuttingWindow) {
  check_attention_backward({1, 150, 3, 1, 8, 40});
}
TEST(Attention, BackwardMatchesFiniteDifferencesWindowZero) {
  check_attention_backward({1, 70, 2, 2, 8, 0});
}
TEST(Attention, BackwardMatchesFiniteDifferencesHeadDim64) {
  check_attention_backward({1, 67, 2, 1, 64, 20});
}

// The f32 backward against the f64 one on the same f32-representable inputs. dS = P * (dP - rowsum(dO * O))
// cancels, so the f32 gradients carry ~1e-5 of their rms.
TEST(Attention, BackwardF32MatchesF64) {
  const AttentionCase c{1, 150, 3, 1, 64, 40};
  AttentionTensors<float> t32(c, 76);
  AttentionTensors<double> t64(c, 76);
  t64.q = t32.q.cast<double>();
  t64.k = t32.k.cast<double>();
  t64.v = t32.v.cast<double>();
  HostTensor<float> w = random_tensor<float>(t32.out.shape, 77);
  HostTensor<double> w64 = w.cast<double>();
  t32.forward(c);
  t64.forward(c);
  HostTensor<float> d_q(t32.q.shape), d_k(t32.k.shape), d_v(t32.v.shape);
  HostTensor<double> d_q64(t32.q.shape), d_k64(t32.k.shape), d_v64(t32.v.shape);
  ops::attention_backward(d_q.view(), d_k.view(), d_v.view(), w.view(), t32.q.view(), t32.k.view(),
                          t32.v.view(), t32.out.view(), t32.lse.view(), c.window, softmax_scale(c),
                          t32.workspace.view(), {});
  ops::attention_backward(d_q64.view(), d_k64.view(), d_v64.view(), w64.view(), t64.q.view(), t64.k.view(),
                          t64.v.view(), t64.out.view(), t64.lse.view(), c.window, softmax_scale(c),
                          t64.workspace.view(), {});
  EXPECT_TRUE(all_close(d_q, d_q64.as_double(), 1e-4)) << "d_q";
  EXPECT_TRUE(all_close(d_k, d_k64.as_double(), 1e-4)) << "d_k";
  EXPECT_TRUE(all_close(d_v, d_v64.as_double(), 1e-4)) << "d_v";
}

TEST(AttentionContracts, RejectsBadShapesAndWorkspace) {
  use_threadsafe_death_tests();
  const AttentionCase c{1, 8, 3, 2, 4, 8};  // 3 query heads over 2 kv heads: not a whole group
  AttentionTensors<double> t(c, 78);
  EXPECT_DEATH(t.forward(c), "heads must be a multiple of kv heads");

  const AttentionCase ok{1, 8, 2, 1, 4, 8};
  AttentionTensors<double> u(ok, 79);
  HostTensor<double> tiny({4});
  EXPECT_DEATH(ops::attention_forward(u.out.view(), u.lse.view(), u.q.view(), u.k.view(), u.v.view(),
                                      ok.window, 1.0, tiny.view(), {}),
               "workspace .* is smaller than one thread");
  HostTensor<double> short_lse({1, 2, 7});
  EXPECT_DEATH(ops::attention_forward(u.out.view(), short_lse.view(), u.q.view(), u.k.view(), u.v.view(),
                                      ok.window, 1.0, u.workspace.view(), {}),
               "lse .* must be");
  EXPECT_DEATH(ops::attention_forward(u.out.view(), u.lse.view(), u.q.view(), u.k.view(), u.v.view(), -1, 1.0,
                                      u.workspace.view(), {}),
               "negative window");
}

}  // namespace
}  // namespace nanoforge::test
