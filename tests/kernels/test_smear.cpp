// smear_forward / smear_backward (nanochat's smear: lambda * sigmoid(x_t[:G] . gate) times the previous
// token, G = 24): forward against the formula in double, every gradient (d_x written; d_gate_weight and
// d_lambda added) against central differences, and thread-count-independent parameter gradients.
#include <cmath>
#include <limits>

#include "tests/kernels/op_test_util.h"

namespace nanoforge::test {
namespace {

constexpr int64_t kGateChannels = 24;  // nanochat's smear gate reads the first 24 channels
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

struct SmearReference {
  std::vector<double> out, gate_sigmoid;
};

// out[:, 0] = x[:, 0]; out[:, t] = x[:, t] + lambda * sigmoid(x[:, t, :G] . gate_weight) * x[:, t - 1].
SmearReference reference_smear(const std::vector<double>& x, const std::vector<int64_t>& shape,
                               const std::vector<double>& gate_weight, double lambda) {
  const int64_t batch = shape[0], seq = shape[1], C = shape[2];
  SmearReference r{x, std::vector<double>(static_cast<size_t>(batch * seq), 0.0)};
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 1; t < seq; ++t) {
      const int64_t row = b * seq + t;
      double pre = 0;
      for (int64_t j = 0; j < kGateChannels; ++j)
        pre += x[row * C + j] * gate_weight[j];
      r.gate_sigmoid[row] = sigmoid(pre);
      for (int64_t c = 0; c < C; ++c)
        r.out[row * C + c] += lambda * r.gate_sigmoid[row] * x[(row - 1) * C + c];
    }
  }
  return r;
}

template <class T>
struct SmearTensors {
  HostTensor<T> x, gate_weight, lambda, out, gate_sigmoid;

  SmearTensors(int64_t batch, int64_t seq, int64_t channels, uint64_t seed)
      : x(random_tensor<T>({batch, seq, channels}, seed, -2, 2)),
        gate_weight(random_tensor<T>({1, kGateChannels}, seed + 1)),
        lambda({1}, static_cast<T>(0.7)),
        out(x.shape, static_cast<T>(kNaN)),
        gate_sigmoid({batch, seq}, T{0}) {}

  void forward() {
    ops::smear_forward(out.view(), gate_sigmoid.view(), x.view(), gate_weight.view(), lambda.view());
  }
};

template <class T>
void check_smear_forward(double rel) {
  SmearTensors<T> t(2, 9, 32, 90);
  const SmearReference expected =
      reference_smear(t.x.as_double(), t.x.shape, t.gate_weight.as_double(), double(t.lambda[0]));
  t.forward();
  EXPECT_TRUE(all_close(t.out, expected.out, rel));
  // Column 0 of gate_sigmoid is unused; compare the others.
  for (int64_t row = 0; row < 18; ++row) {
    if (row % 9 == 0) continue;
    EXPECT_NEAR(double(t.gate_sigmoid[row]), expected.gate_sigmoid[row], rel) << "gate_sigmoid row " << row;
  }
}

TEST(Smear, ForwardMatchesReferenceF64) {
  check_smear_forward<double>(kF64Rel);
}
// f32: a 24-term gate dot (~24 * 6e-8 = 1.5e-6 of its magnitude) through a sigmoid, then one multiply-add.
TEST(Smear, ForwardMatchesReferenceF32) {
  check_smear_forward<float>(1e-5);
}

// L = sum(w * out) in x, gate_weight and lambda. d_x is written (starts NaN); the parameter gradients are
// added (start random), so only what they gained is the gradient.
TEST(Smear, BackwardMatchesFiniteDifferences) {
  SmearTensors<double> t(2, 7, 30, 91);
  HostTensor<double> w = random_tensor<double>(t.x.shape, 92);
  const Objective objective = [&] {
    t.forward();
    return weighted_sum(w, t.out);
  };
  objective();
  HostTensor<double> d_x(t.x.shape, kNaN);
  HostTensor<double> d_gate_weight = random_tensor<double>(t.gate_weight.shape, 93);
  HostTensor<double> d_lambda({1}, 0.25);
  const HostTensor<double> d_gate_weight_before = d_gate_weight, d_lambda_before = d_lambda;
  ops::smear_backward(d_x.view(), d_gate_weight.view(), d_lambda.view(), w.view(), t.x.view(),
                      t.gate_sigmoid.view(), t.gate_weight.view(), t.lambda.view());
  EXPECT_TRUE(gradient_matches(t.x, d_x.as_double(), objective, 94, t.x.numel())) << "d_x";
  EXPECT_TRUE(gradient_matches(t.gate_weight, added(d_gate_weight, d_gate_weight_before), objective, 95))
      << "d_gate";
  EXPECT_TRUE(gradient_matches(t.lambda, added(d_lambda, d_lambda_before), objective, 96)) << "d_lambda";
}

// The f32 backward against the f64 one on the same inputs: C-term dots and 64 ordered block sums in double.
TEST(Smear, BackwardF32MatchesF64) {
  SmearTensors<float> t32(3, 40, 32, 97);
  SmearTensors<double> t64(3, 40, 32, 97);
  t64.x = t32.x.cast<double>();
  t64.gate_weight = t32.gate_weight.cast<double>();
  t64.lambda = t32.lambda.cast<double>();
  HostTensor<float> w = random_tensor<float>(t32.x.shape, 98);
  HostTensor<double> w64 = w.cast<double>();
  t32.forward();
  t64.forward();
  HostTensor<float> d_x(t32.x.shape), d_gate({1, kGateChannels}), d_lambda({1});
  HostTensor<double> d_x64(t32.x.shape), d_gate64({1, kGateChannels}), d_lambda64({1});
  ops::smear_backward(d_x.view(), d_gate.view(), d_lambda.view(), w.view(), t32.x.view(),
                      t32.gate_sigmoid.view(), t32.gate_weight.view(), t32.lambda.view());
  ops::smear_backward(d_x64.view(), d_gate64.view(), d_lambda64.view(), w64.view(), t64.x.view(),
                      t64.gate_sigmoid.view(), t64.gate_weight.view(), t64.lambda.view());
  // A few roundings of 6e-8 per element (the gate's f32 sigmoid dominates): 1e-5 of the rms.
  EXPECT_TRUE(all_close(d_x, d_x64.as_double(), 1e-5)) << "d_x";
  EXPECT_TRUE(all_close(d_gate, d_gate64.as_double(), 1e-5)) << "d_gate_weight";
  EXPECT_TRUE(all_close(d_lambda, d_lambda64.as_double(), 1e-5)) << "d_lambda";
}

// d_gate_weight and d_lambda are ordered sums over B*T = 320 rows: the same bits for 1, 2 or 3 threads. Run
// in f64 too: a reordering of the double partial sums can vanish when the total is rounded to f32.
template <class T>
void check_smear_backward_thread_independence() {
  SmearTensors<T> t(4, 80, 32, 99);
  t.forward();
  const HostTensor<T> w = random_tensor<T>(t.x.shape, 100);
  EXPECT_TRUE(same_bits_for_every_thread_count<T>([&] {
    HostTensor<T> d_x(t.x.shape), d_gate({1, kGateChannels}, T(0.5)), d_lambda({1}, T(-0.5)), grad = w;
    ops::smear_backward(d_x.view(), d_gate.view(), d_lambda.view(), grad.view(), t.x.view(),
                        t.gate_sigmoid.view(), t.gate_weight.view(), t.lambda.view());
    return std::vector<HostTensor<T>>{d_x, d_gate, d_lambda};
  }));
}

TEST(Smear, BackwardIsThreadCountIndependentF32) {
  check_smear_backward_thread_independence<float>();
}
TEST(Smear, BackwardIsThreadCountIndependentF64) {
  check_smear_backward_thread_independence<double>();
}

TEST(SmearContracts, RejectsAliasingAndBadShapes) {
  use_threadsafe_death_tests();
  SmearTensors<double> t(1, 4, 32, 101);
  EXPECT_DEATH(ops::smear_forward(t.x.view(), t.gate_sigmoid.view(), t.x.view(), t.gate_weight.view(),
                                  t.lambda.view()),
               "out must not alias x");
  SmearTensors<double> narrow(1, 4, 16, 102);  // 16 channels, but the gate reads 24
  EXPECT_DEATH(narrow.forward(), "gate reads 24 channels of 16");
  HostTensor<double> two_lambdas({2}, 0.5);
  EXPECT_DEATH(ops::smear_forward(t.out.view(), t.gate_sigmoid.view(), t.x.view(), t.gate_weight.view(),
                                  two_lambdas.view()),
               "lambda must have one element");
}

}  // namespace
}  // namespace nanoforge::test
