// value_embed_gate_forward / value_embed_gate_backward (nanochat's value residual: v += 3 * sigmoid(u[:, :G]
// @ W^T) * table[ids] per kv head, G = 12) for 1, 2 and 4 kv heads: the forward against the formula in
// double, every gradient (d_u, d_gate_weight, d_table: all added to) against central differences, and
// thread-count-independent sums.
#include <cmath>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

constexpr int64_t kGateChannels = 12;  // nanochat's value-embedding gate reads the first 12 channels
constexpr double kGateRange = 3.0;     // nanochat: gate = 3 * sigmoid(...)

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

struct GateCase {
  int64_t rows, kv_heads, head_dim, channels;
  int32_t vocab;
};

std::string describe(const GateCase& c) {
  return "N=" + std::to_string(c.rows) + " Hkv=" + std::to_string(c.kv_heads) +
         " D=" + std::to_string(c.head_dim) + " C=" + std::to_string(c.channels) +
         " V=" + std::to_string(c.vocab);
}

template <class T>
struct GateTensors {
  HostTensor<T> v, u, gate_weight, table, gate_sigmoid;
  HostTensor<int32_t> ids;

  GateTensors(const GateCase& c, uint64_t seed)
      : v(random_tensor<T>({c.rows, c.kv_heads, c.head_dim}, seed)),
        u(random_tensor<T>({c.rows, c.channels}, seed + 1, -2, 2)),
        gate_weight(random_tensor<T>({c.kv_heads, kGateChannels}, seed + 2)),
        table(random_tensor<T>({c.vocab, c.kv_heads * c.head_dim}, seed + 3)),
        gate_sigmoid({c.rows, c.kv_heads}),
        ids(random_ids({c.rows}, c.vocab, seed + 4)) {}

  // Mixes into a copy of v, leaving v as it was.
  HostTensor<T> forward() {
    HostTensor<T> mixed = v;
    ops::value_embed_gate_forward(mixed.view(), gate_sigmoid.view(), u.view(), gate_weight.view(),
                                  table.view(), ids.view());
    return mixed;
  }
};

struct GateReference {
  std::vector<double> v, gate_sigmoid;
};

GateReference reference_gate(const GateCase& c, const GateTensors<double>& t) {
  GateReference r{t.v.as_double(), std::vector<double>(static_cast<size_t>(c.rows * c.kv_heads))};
  for (int64_t n = 0; n < c.rows; ++n) {
    for (int64_t h = 0; h < c.kv_heads; ++h) {
      double pre = 0;
      for (int64_t j = 0; j < kGateChannels; ++j)
        pre += t.u[n * c.channels + j] * t.gate_weight[h * kGateChannels + j];
      const double p = sigmoid(pre);
      r.gate_sigmoid[n * c.kv_heads + h] = p;
      for (int64_t d = 0; d < c.head_dim; ++d) {
        r.v[(n * c.kv_heads + h) * c.head_dim + d] +=
            kGateRange * p * t.table[t.ids[n] * c.kv_heads * c.head_dim + h * c.head_dim + d];
      }
    }
  }
  return r;
}

const GateCase kCases[] = {
    {14, 1, 8, 32, 5},  // one kv head
    {14, 2, 8, 32, 5},  // GQA models' kv heads: one gate per kv head
    {9, 4, 16, 20, 3},  // four kv heads, few ids (many repeats)
};

template <class T>
void check_gate_forward(double rel) {
  for (const GateCase& c : kCases) {
    SCOPED_TRACE(describe(c));
    GateTensors<T> t(c, 110);
    // The reference runs on the same values in double.
    GateTensors<double> t64(c, 110);
    t64.v = t.v.template cast<double>();
    t64.u = t.u.template cast<double>();
    t64.gate_weight = t.gate_weight.template cast<double>();
    t64.table = t.table.template cast<double>();
    const GateReference expected = reference_gate(c, t64);
    const HostTensor<T> mixed = t.forward();
    EXPECT_TRUE(all_close(mixed, expected.v, rel));
    EXPECT_TRUE(all_close(t.gate_sigmoid, expected.gate_sigmoid, rel));
  }
}

TEST(ValueEmbedGate, ForwardMatchesReferenceF64) {
  check_gate_forward<double>(kF64Rel);
}
// f32: a 12-term gate dot through a sigmoid, then one multiply-add: a few roundings of 6e-8.
TEST(ValueEmbedGate, ForwardMatchesReferenceF32) {
  check_gate_forward<float>(1e-5);
}

// L = sum(w * mixed v) in u, gate_weight and table; all three gradients are added to (they start random) and
// only what they gained is the gradient. d_u's columns from G on must gain nothing.
TEST(ValueEmbedGate, BackwardMatchesFiniteDifferences) {
  for (const GateCase& c : kCases) {
    SCOPED_TRACE(describe(c));
    GateTensors<double> t(c, 111);
    HostTensor<double> w = random_tensor<double>(t.v.shape, 112);
    const Objective objective = [&] { return weighted_sum(w, t.forward()); };
    objective();
    HostTensor<double> d_u = random_tensor<double>(t.u.shape, 113);
    HostTensor<double> d_gate = random_tensor<double>(t.gate_weight.shape, 114);
    HostTensor<double> d_table = random_tensor<double>(t.table.shape, 115);
    const HostTensor<double> d_u_before = d_u, d_gate_before = d_gate, d_table_before = d_table;
    ops::value_embed_gate_backward(d_u.view(), d_gate.view(), d_table.view(), w.view(), t.u.view(),
                                   t.gate_sigmoid.view(), t.gate_weight.view(), t.table.view(), t.ids.view(),
                                   {});
    EXPECT_TRUE(gradient_matches(t.u, added(d_u, d_u_before), objective, 116, t.u.numel())) << "d_u";
    EXPECT_TRUE(gradient_matches(t.gate_weight, added(d_gate, d_gate_before), objective, 117))
        << "d_gate_weight";
    EXPECT_TRUE(gradient_matches(t.table, added(d_table, d_table_before), objective, 118, t.table.numel()))
        << "d_table";
  }
}

// The f32 backward against the f64 one on the same inputs.
TEST(ValueEmbedGate, BackwardF32MatchesF64) {
  const GateCase c{200, 2, 64, 32, 9};
  GateTensors<float> t(c, 119);
  GateTensors<double> t64(c, 119);
  t64.v = t.v.cast<double>();
  t64.u = t.u.cast<double>();
  t64.gate_weight = t.gate_weight.cast<double>();
  t64.table = t.table.cast<double>();
  t.forward();
  t64.forward();
  HostTensor<float> w = random_tensor<float>(t.v.shape, 120);
  HostTensor<double> w64 = w.cast<double>();
  HostTensor<float> d_u(t.u.shape), d_gate(t.gate_weight.shape), d_table(t.table.shape);
  HostTensor<double> d_u64(t.u.shape), d_gate64(t.gate_weight.shape), d_table64(t.table.shape);
  ops::value_embed_gate_backward(d_u.view(), d_gate.view(), d_table.view(), w.view(), t.u.view(),
                                 t.gate_sigmoid.view(), t.gate_weight.view(), t.table.view(), t.ids.view(),
                                 {});
  ops::value_embed_gate_backward(d_u64.view(), d_gate64.view(), d_table64.view(), w64.view(), t64.u.view(),
                                 t64.gate_sigmoid.view(), t64.gate_weight.view(), t64.table.view(),
                                 t64.ids.view(), {});
  // 64-term dots for the gate gradient, ~22 rows scattered into each table row in f32: 1e-5 of the rms.
  EXPECT_TRUE(all_close(d_u, d_u64.as_double(), 1e-5)) << "d_u";
  EXPECT_TRUE(all_close(d_gate, d_gate64.as_double(), 1e-5)) << "d_gate_weight";
  EXPECT_TRUE(all_close(d_table, d_table64.as_double(), 1e-5)) << "d_table";
}

// 300 rows (several ordered-sum blocks), 2 kv heads of 64 (two table column tasks), 7 ids. Run in f64 too: a
// reordering of the double partial sums can vanish when the total is rounded to f32.
template <class T>
void check_gate_backward_thread_independence() {
  const GateCase c{300, 2, 64, 32, 7};
  GateTensors<T> t(c, 121);
  t.forward();
  const HostTensor<T> w = random_tensor<T>(t.v.shape, 122);
  EXPECT_TRUE(same_bits_for_every_thread_count<T>([&] {
    HostTensor<T> d_u(t.u.shape, T(0.5)), d_gate(t.gate_weight.shape, T(-0.5)),
        d_table(t.table.shape, T(0.25));
    HostTensor<T> grad = w;
    ops::value_embed_gate_backward(d_u.view(), d_gate.view(), d_table.view(), grad.view(), t.u.view(),
                                   t.gate_sigmoid.view(), t.gate_weight.view(), t.table.view(), t.ids.view(),
                                   {});
    return std::vector<HostTensor<T>>{d_u, d_gate, d_table};
  }));
}

TEST(ValueEmbedGate, BackwardIsThreadCountIndependentF32) {
  check_gate_backward_thread_independence<float>();
}
TEST(ValueEmbedGate, BackwardIsThreadCountIndependentF64) {
  check_gate_backward_thread_independence<double>();
}

TEST(ValueEmbedGateContracts, RejectsBadIdsAndShapes) {
  use_threadsafe_death_tests();
  const GateCase c{6, 2, 8, 32, 5};
  GateTensors<double> t(c, 123);
  t.ids[3] = 5;
  EXPECT_DEATH(t.forward(), "id 5 at row 3 outside \\[0, 5\\)");
  t.ids[3] = 0;
  HostTensor<double> wrong_gate({3, kGateChannels});  // 3 gate rows for 2 kv heads
  EXPECT_DEATH(ops::value_embed_gate_forward(t.v.view(), t.gate_sigmoid.view(), t.u.view(), wrong_gate.view(),
                                             t.table.view(), t.ids.view()),
               "inconsistent shapes");
}

}  // namespace
}  // namespace nanoforge::test
