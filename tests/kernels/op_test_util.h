// Shared helpers for the kernel op tests: host tensors that own their memory and hand out TensorViews,
// seeded random inputs, an elementwise comparison that reports the worst element, a central finite-difference
// gradient checker, and a guard that sets the OpenMP thread count for one test and restores it afterwards.
// References in the tests are written in double straight from the math in kernels/ops.h; these helpers only
// compare and perturb, they compute nothing an op computes.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace nanoforge::test {

// ---- tolerances shared by every op test ----
// f64 forward against the double reference: both compute the same sums, only the order of the terms (BLAS
// blocking, SIMD lanes) differs, which costs a few ulps per term over sums of ~1e2-1e3 terms.
inline constexpr double kF64Rel = 1e-12;
// Central-difference step, relative to max(1, |x|): balances truncation O(h^2 f''') ~ 1e-12 against rounding
// O(eps |L| / h) ~ 1e-16 * 1e2 / 1e-6 = 1e-8 for the objectives used here (|L| <~ 1e2).
inline constexpr double kFdStep = 1e-6;
// Analytic vs finite-difference gradient: truncation (~1e-12) plus rounding (~1e-8 of a gradient ~1) stay
// well under 1e-6 relative; a wrong term in a backward shows up as an O(1) relative error.
inline constexpr double kFdRel = 1e-6;
// Absolute rounding noise of a central difference: each objective value carries ~this many ulps of its
// magnitude sum(|w * out|) (the op's own rounding plus the weighted sum), divided by the step 2h.
inline constexpr double kFdNoiseUlps = 16;

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  if constexpr (std::is_same_v<T, double>) return DType::kF64;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
}

// A host tensor that owns its elements; view() is the TensorView an op takes.
template <class T>
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<T> data;

  HostTensor() = default;
  explicit HostTensor(std::vector<int64_t> dims, T value = T{}) : shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    data.assign(static_cast<size_t>(n), value);
  }
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  TensorView view() {
    return TensorView(data.data(), std::span<const int64_t>(shape), dtype_of<T>(), Device::kCpu);
  }
  T& operator[](int64_t i) { return data[static_cast<size_t>(i)]; }
  const T& operator[](int64_t i) const { return data[static_cast<size_t>(i)]; }
  std::vector<double> as_double() const { return std::vector<double>(data.begin(), data.end()); }
  // The same values in another element type (f64 inputs rounded to f32 for the f32 runs, or back).
  template <class U>
  HostTensor<U> cast() const {
    HostTensor<U> out(shape);
    for (size_t i = 0; i < data.size(); ++i)
      out.data[i] = static_cast<U>(data[i]);
    return out;
  }
};

// Uniform random values in [lo, hi), from a fixed seed.
template <class T>
HostTensor<T> random_tensor(std::vector<int64_t> shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  HostTensor<T> t(std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (T& x : t.data)
    x = static_cast<T>(dist(rng));
  return t;
}

// Random token ids in [0, vocab), from a fixed seed.
inline HostTensor<int32_t> random_ids(std::vector<int64_t> shape, int32_t vocab, uint64_t seed) {
  HostTensor<int32_t> t(std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  for (int32_t& x : t.data)
    x = dist(rng);
  return t;
}

inline double rms(std::span<const double> values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values)
    sum += v * v;
  return std::sqrt(sum / static_cast<double>(values.size()));
}

inline std::string multi_index(int64_t flat, const std::vector<int64_t>& shape) {
  if (shape.empty()) return std::to_string(flat);
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  std::string s = "[";
  for (size_t d = 0; d < index.size(); ++d)
    s += (d ? ", " : "") + std::to_string(index[d]);
  return s + "]";
}

// Elementwise |actual - expected| <= rel * max(|expected|, rms(expected)) + abs. The rms floor: an element
// that cancels to near zero still carries the rounding error of its terms, whose size the tensor's rms
// tracks. NaN anywhere fails. On failure, says how many elements are off and prints the worst one.
template <class A>
::testing::AssertionResult all_close(std::span<const A> actual, std::span<const double> expected, double rel,
                                     double abs = 0, const std::vector<int64_t>& shape = {}) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << actual.size() << " vs " << expected.size();
  }
  const double floor = rms(expected);
  int64_t bad = 0, worst = -1;
  double worst_ratio = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]), e = expected[i];
    const double allowed = rel * std::max(std::abs(e), floor) + abs;
    const double diff = std::abs(a - e);
    const double ratio =
        allowed > 0 ? diff / allowed : (diff > 0 ? std::numeric_limits<double>::infinity() : 0);
    if (!(diff <= allowed)) {
      ++bad;
      if (worst < 0 || !(ratio <= worst_ratio)) worst = static_cast<int64_t>(i), worst_ratio = ratio;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  const double a = static_cast<double>(actual[static_cast<size_t>(worst)]);
  const double e = expected[static_cast<size_t>(worst)];
  std::ostringstream message;
  message.precision(17);
  message << bad << " of " << actual.size() << " elements outside rel " << rel << " (rms floor " << floor
          << ", abs " << abs << "); worst at " << multi_index(worst, shape) << ": actual " << a
          << ", expected " << e << ", |diff| " << std::abs(a - e) << " = " << worst_ratio << " x allowed";
  return ::testing::AssertionFailure() << message.str();
}

template <class A>
::testing::AssertionResult all_close(const HostTensor<A>& actual, const std::vector<double>& expected,
                                     double rel, double abs = 0) {
  return all_close(std::span<const A>(actual.data), std::span<const double>(expected), rel, abs,
                   actual.shape);
}

// Bitwise equality of two tensors' bytes (the determinism checks).
template <class T>
::testing::AssertionResult bitwise_equal(const HostTensor<T>& a, const HostTensor<T>& b) {
  if (a.data.size() != b.data.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.data.size(); ++i) {
    if (std::memcmp(&a.data[i], &b.data[i], sizeof(T)) != 0) {
      std::ostringstream message;
      message.precision(17);
      message << "first difference at " << multi_index(static_cast<int64_t>(i), a.shape) << ": " << a.data[i]
              << " vs " << b.data[i];
      return ::testing::AssertionFailure() << message.str();
    }
  }
  return ::testing::AssertionSuccess();
}

// `after - before`, elementwise: what an "added to" output gained.
template <class T>
std::vector<double> added(const HostTensor<T>& after, const HostTensor<T>& before) {
  std::vector<double> diff(after.data.size());
  for (size_t i = 0; i < diff.size(); ++i)
    diff[i] = double(after.data[i]) - double(before.data[i]);
  return diff;
}

// ---- threads ----

// Sets the OpenMP thread count for a scope, restoring the previous count afterwards.
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : previous_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ThreadCount() { omp_set_num_threads(previous_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int previous_;
};

// ---- finite differences ----

// An objective's value and the magnitude sum(|terms|) it was summed from (which sets its rounding noise).
struct ObjectiveValue {
  double value = 0;
  double magnitude = 0;
};
using Objective = std::function<ObjectiveValue()>;

// L = sum(w * out): the scalar objective every backward test differentiates; d_out is then w.
template <class T>
ObjectiveValue weighted_sum(const HostTensor<T>& w, const HostTensor<T>& out) {
  ObjectiveValue result;
  for (size_t i = 0; i < w.data.size(); ++i) {
    const double term = double(w.data[i]) * double(out.data[i]);
    result.value += term;
    result.magnitude += std::abs(term);
  }
  return result;
}

inline double fd_noise(const ObjectiveValue& plus, const ObjectiveValue& minus, double step) {
  return kFdNoiseUlps * std::numeric_limits<double>::epsilon() * std::max(plus.magnitude, minus.magnitude) /
         (2 * step);
}

// Checks `analytic`, the claimed gradient of objective() with respect to `param` (f64 elements the objective
// reads), against central differences. Every element is checked when there are at most `max_elements`;
// otherwise a seeded sample of them (always including the first and last). A directional derivative along a
// random direction then checks all elements at once: (L(x + h v) - L(x - h v)) / 2h against analytic . v.
// On return param holds its original values and objective() has run on them again, so whatever the
// objective writes (forward outputs, saved statistics) is as it was before the call.
inline ::testing::AssertionResult gradient_matches(HostTensor<double>& param,
                                                   std::span<const double> analytic,
                                                   const Objective& objective, uint64_t seed,
                                                   int64_t max_elements = 128) {
  // Thousands of small forward calls: on one thread they cost no OpenMP barriers, which dominate the run time
  // on a busy machine. The forward ops' values do not depend on the thread count.
  ThreadCount one_thread(1);
  struct RerunAtOriginal {
    const Objective& objective;
    ~RerunAtOriginal() { objective(); }
  } rerun_at_original{objective};
  const int64_t n = param.numel();
  if (static_cast<int64_t>(analytic.size()) != n) {
    return ::testing::AssertionFailure()
           << "gradient has " << analytic.size() << " elements, parameter " << n;
  }
  std::vector<int64_t> indices(static_cast<size_t>(n));
  std::iota(indices.begin(), indices.end(), 0);
  std::mt19937_64 rng(seed);
  if (n > max_elements) {
    std::shuffle(indices.begin() + 1, indices.end() - 1, rng);
    indices.resize(static_cast<size_t>(max_elements - 1));
    indices.push_back(n - 1);
  }
  std::vector<double> numeric, claimed, noise;
  for (int64_t i : indices) {
    double& x = param.data[static_cast<size_t>(i)];
    const double original = x;
    const double step = kFdStep * std::max(1.0, std::abs(original));
    x = original + step;
    const ObjectiveValue plus = objective();
    x = original - step;
    const ObjectiveValue minus = objective();
    x = original;
    numeric.push_back((plus.value - minus.value) / (2 * step));
    claimed.push_back(analytic[static_cast<size_t>(i)]);
    noise.push_back(fd_noise(plus, minus, step));
  }
  const double floor = rms(numeric);
  int64_t bad = 0;
  size_t worst = 0;
  double worst_ratio = -1;
  for (size_t j = 0; j < numeric.size(); ++j) {
    const double allowed = kFdRel * std::max(std::abs(numeric[j]), floor) + noise[j];
    const double diff = std::abs(claimed[j] - numeric[j]);
    const double ratio = diff / allowed;
    if (!(diff <= allowed)) ++bad;
    if (!(ratio <= worst_ratio)) worst = j, worst_ratio = ratio;
  }
  std::ostringstream message;
  message.precision(17);
  if (bad > 0) {
    message << bad << " of " << numeric.size()
            << " checked elements differ from central differences; worst at "
            << multi_index(indices[worst], param.shape) << ": analytic " << claimed[worst] << ", numeric "
            << numeric[worst] << " (" << worst_ratio << " x allowed, rms of numeric " << floor << ")";
    return ::testing::AssertionFailure() << message.str();
  }

  // Directional derivative over every element.
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> direction(static_cast<size_t>(n));
  for (double& d : direction)
    d = dist(rng);
  double largest = 0, along = 0, along_magnitude = 0;
  for (int64_t i = 0; i < n; ++i) {
    largest = std::max(largest, std::abs(param.data[static_cast<size_t>(i)]));
    along += analytic[static_cast<size_t>(i)] * direction[static_cast<size_t>(i)];
    along_magnitude += std::abs(analytic[static_cast<size_t>(i)] * direction[static_cast<size_t>(i)]);
  }
  const std::vector<double> original = param.data;
  const double step = kFdStep * std::max(1.0, largest);
  for (int64_t i = 0; i < n; ++i)
    param.data[i] = original[i] + step * direction[i];
  const ObjectiveValue plus = objective();
  for (int64_t i = 0; i < n; ++i)
    param.data[i] = original[i] - step * direction[i];
  const ObjectiveValue minus = objective();
  param.data = original;
  const double numeric_along = (plus.value - minus.value) / (2 * step);
  const double allowed = kFdRel * along_magnitude + fd_noise(plus, minus, step);
  if (!(std::abs(numeric_along - along) <= allowed)) {
    message << "directional derivative over all " << n << " elements: analytic " << along << ", numeric "
            << numeric_along << ", allowed |diff| " << allowed;
    return ::testing::AssertionFailure() << message.str();
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult gradient_matches(HostTensor<double>& param,
                                                   const std::vector<double>& analytic,
                                                   const Objective& objective, uint64_t seed,
                                                   int64_t max_elements = 128) {
  return gradient_matches(param, std::span<const double>(analytic), objective, seed, max_elements);
}

// The thread counts the determinism tests compare: one, two, and an odd count that splits work unevenly.
inline constexpr int kThreadCounts[] = {1, 2, 3};

// Runs `run` (the op on fresh copies of fixed inputs; returns its outputs) once per thread count in
// kThreadCounts and expects every output to have the same bits each time.
template <class T>
::testing::AssertionResult same_bits_for_every_thread_count(
    const std::function<std::vector<HostTensor<T>>()>& run) {
  std::vector<std::vector<HostTensor<T>>> results;
  for (int threads : kThreadCounts) {
    ThreadCount scope(threads);
    results.push_back(run());
  }
  for (size_t i = 1; i < results.size(); ++i) {
    for (size_t output = 0; output < results[0].size(); ++output) {
      const ::testing::AssertionResult same = bitwise_equal(results[0][output], results[i][output]);
      if (!same) {
        return ::testing::AssertionFailure() << "output " << output << " with " << kThreadCounts[i]
                                             << " threads vs " << kThreadCounts[0] << ": " << same.message();
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Death tests fork and re-execute the binary ("threadsafe"), which is safe with OpenMP worker threads alive.
inline void use_threadsafe_death_tests() {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
}

}  // namespace nanoforge::test
