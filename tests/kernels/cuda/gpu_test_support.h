// What the GPU tests share: the skip where there is no usable GPU; bf16 <-> f32 conversions on the host
// (round to nearest even, as the GPU's __float2bfloat16_rn; test data is finite, so NaN handling is left out)
// and the rounding bounds tolerances are built from; random inputs; host vectors moved to and from CUDA
// buffers, at an offset (to defeat 16-byte packs) and between guard elements an op must not touch; CPU views
// for the reference ops; and the element-by-element comparison with a tolerance. The tests in
// tests/kernels/cuda live in this namespace, so they use these unqualified.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/device_buffer.h"
#include "kernels/kernel_settings.h"
#include "kernels/ops.h"

// In a test body or a fixture's SetUp(): skips the test, saying why, where there is no usable GPU.
#define NANOFORGE_SKIP_WITHOUT_GPU()                                \
  do {                                                              \
    std::string nanoforge_no_gpu_reason;                            \
    if (!::nanoforge::cuda::available(&nanoforge_no_gpu_reason))    \
      GTEST_SKIP() << "no usable GPU: " << nanoforge_no_gpu_reason; \
  } while (false)

namespace nanoforge::gpu_test {

// Rounding to nearest moves a value by at most the unit roundoff 2^-p of itself, p the significant bits:
// bf16 keeps 8, so one rounding of an fp32 result to bf16 costs at most 2^-8 of its value.
inline constexpr double kBf16Rounding = 1.0 / 256.0;
// fp32 keeps 24: one fp32 rounding costs at most 2^-24 of the value.
inline constexpr double kFp32Rounding = 1.0 / (1 << 24);

inline uint16_t bf16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t round_to_nearest_even = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + round_to_nearest_even) >> 16);
}

inline float bf16_value(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

inline float round_to_bf16(float value) {
  return bf16_value(bf16_bits(value));
}

inline std::vector<uint16_t> to_bf16_bits(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = bf16_bits(values[i]);
  return bits;
}

inline std::vector<float> from_bf16_bits(const std::vector<uint16_t>& bits) {
  std::vector<float> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i)
    values[i] = bf16_value(bits[i]);
  return values;
}

// `values`, each rounded to bf16 and widened back: the values both sides see when the GPU's copy is bf16.
inline std::vector<float> rounded_to_bf16(std::vector<float> values) {
  for (float& value : values)
    value = round_to_bf16(value);
  return values;
}

// `count` fp32 draws from N(0, stddev^2).
inline std::vector<float> normal_values(int64_t count, float stddev, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& value : values)
    value = normal(rng);
  return values;
}

// `count` fp32 draws from U[low, high).
inline std::vector<float> uniform_values(int64_t count, float low, float high, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& value : values)
    value = uniform(rng);
  return values;
}

// `count` draws from N(0, stddev^2) rounded to bf16.
inline std::vector<float> random_bf16(int64_t count, float stddev, std::mt19937& rng) {
  return rounded_to_bf16(normal_values(count, stddev, rng));
}

// A CUDA buffer holding a copy of `host`.
template <class HostT>
DeviceBuffer upload(const std::vector<HostT>& host) {
  DeviceBuffer buffer(Device::kCuda, static_cast<int64_t>(host.size() * sizeof(HostT)));
  cuda::copy_from_host(buffer.data(), host.data(), buffer.bytes());
  return buffer;
}

// The whole of a CUDA buffer, as elements of HostT.
template <class HostT>
std::vector<HostT> download(const DeviceBuffer& buffer) {
  std::vector<HostT> host(static_cast<size_t>(buffer.bytes()) / sizeof(HostT));
  cuda::copy_to_host(host.data(), buffer.data(), buffer.bytes());
  return host;
}

// Elements [offset, offset + count) of a CUDA buffer of `dtype`, as a 1-D view.
inline TensorView view_of(const DeviceBuffer& buffer, DType dtype, int64_t offset, int64_t count) {
  return TensorView(static_cast<char*>(buffer.data()) + offset * dtype_bytes(dtype), {count}, dtype,
                    Device::kCuda);
}

// The start of a CUDA buffer as a `dtype` view of `shape`.
inline TensorView cuda_view(const DeviceBuffer& buffer, std::initializer_list<int64_t> shape, DType dtype) {
  return TensorView(buffer.data(), shape, dtype, Device::kCuda);
}

// The dtype of a CPU view of host values: f32, f64 or i32.
template <class HostT>
constexpr DType host_dtype() {
  if constexpr (std::is_same_v<HostT, double>) {
    return DType::kF64;
  } else if constexpr (std::is_same_v<HostT, int32_t>) {
    return DType::kI32;
  } else {
    static_assert(std::is_same_v<HostT, float>, "CPU views hold float, double or int32_t");
    return DType::kF32;
  }
}

// `values` as a CPU tensor of `shape`: an operand of the CPU reference op.
template <class HostT>
TensorView cpu_view(std::vector<HostT>& values, std::initializer_list<int64_t> shape) {
  return TensorView(values.data(), shape, host_dtype<HostT>(), Device::kCpu);
}
template <class HostT>
TensorView cpu_view(std::vector<HostT>& values, std::span<const int64_t> shape) {
  return TensorView(values.data(), shape, host_dtype<HostT>(), Device::kCpu);
}

// Elements after each padded view (PaddedOnGpu, and the memory ops' buffers) that no op may touch.
inline constexpr int64_t kGuardElements = 9;

// A CUDA copy of `values` (HostT: float, int32_t, or uint16_t holding bf16 bits), `offset` elements into its
// buffer and followed by kGuardElements guard elements. contents() reads the values back and expects every
// element around them to have kept its bits.
template <class HostT>
class PaddedOnGpu {
 public:
  PaddedOnGpu(const std::vector<HostT>& values, int64_t offset, DType dtype)
      : offset_(offset), count_(static_cast<int64_t>(values.size())), dtype_(dtype) {
    host_.assign(static_cast<size_t>(offset + count_ + kGuardElements), guard_value());
    std::copy(values.begin(), values.end(), host_.begin() + offset);
    buffer_ = upload(host_);
  }

  TensorView view(std::initializer_list<int64_t> shape) const {
    return view_of(buffer_, dtype_, offset_, count_).reshaped(shape);
  }

  std::vector<HostT> contents() const {
    const std::vector<HostT> all = download<HostT>(buffer_);
    for (size_t i = 0; i < all.size(); ++i) {
      if (static_cast<int64_t>(i) >= offset_ && static_cast<int64_t>(i) < offset_ + count_) continue;
      EXPECT_EQ(std::memcmp(&all[i], &host_[i], sizeof(HostT)), 0) << "guard element " << i << " changed";
    }
    return std::vector<HostT>(all.begin() + offset_, all.begin() + offset_ + count_);
  }

 private:
  static HostT guard_value() {
    if constexpr (sizeof(HostT) == 2) {
      return bf16_bits(-12345.0f);
    } else {
      return static_cast<HostT>(-12345);
    }
  }

  int64_t offset_;
  int64_t count_;
  DType dtype_;
  std::vector<HostT> host_;
  DeviceBuffer buffer_;
};

// f32 values on the GPU as a `dtype` (bf16, rounded to nearest even, or f32) tensor of `shape`, `offset`
// elements into its allocation after zero padding: 0 keeps the allocation's alignment, 1 leaves a bf16 view
// 2-byte and an f32 one 4-byte aligned. values() reads the tensor back, widened to f32.
struct GpuTensor {
  DeviceBuffer buffer;
  TensorView view;
  int64_t offset = 0;

  GpuTensor(const std::vector<float>& values, const std::vector<int64_t>& shape, DType dtype, int64_t offset_)
      : offset(offset_) {
    if (dtype == DType::kBF16) {
      std::vector<uint16_t> bits(static_cast<size_t>(offset), 0);
      const std::vector<uint16_t> value_bits = to_bf16_bits(values);
      bits.insert(bits.end(), value_bits.begin(), value_bits.end());
      buffer = upload(bits);
    } else {
      std::vector<float> padded(static_cast<size_t>(offset), 0.0f);
      padded.insert(padded.end(), values.begin(), values.end());
      buffer = upload(padded);
    }
    view = TensorView(static_cast<char*>(buffer.data()) + offset * dtype_bytes(dtype),
                      std::span<const int64_t>(shape), dtype, Device::kCuda);
  }

  std::vector<float> values() const {
    const std::vector<float> all =
        view.dtype == DType::kBF16 ? from_bf16_bits(download<uint16_t>(buffer)) : download<float>(buffer);
    return std::vector<float>(all.begin() + offset, all.end());
  }
};

// An activation-shaped test case: (rows, channels) bf16 views `offset` elements into their buffers: 0 keeps
// the buffer's 16-byte alignment, 1 leaves none (no 16-byte packs).
struct ActivationShape {
  int64_t rows, channels;
  int64_t offset;
  int64_t numel() const { return rows * channels; }
};

inline std::string activation_shape_name(const testing::TestParamInfo<ActivationShape>& info) {
  const ActivationShape& s = info.param;
  return std::to_string(s.rows) + "x" + std::to_string(s.channels) + (s.offset == 0 ? "_aligned" : "_offset");
}

// |values|, elementwise (the magnitudes a GEMM's rounding bound is made of).
inline std::vector<float> absolute(std::vector<float> values) {
  for (float& v : values)
    v = std::abs(v);
  return values;
}

// sum_k |a_ik b_kj| per element of a (rows, K) times op(b) (`transpose_b` as ops::matmul takes it): the
// magnitudes a GEMM's accumulation bound scales with (a CPU GEMM of them; its own rounding is far below the
// bounds).
inline std::vector<float> gemm_magnitudes(const std::vector<float>& a, const std::vector<float>& b,
                                          std::initializer_list<int64_t> a_shape,
                                          std::initializer_list<int64_t> b_shape, ops::Transpose transpose_b,
                                          int64_t rows, int64_t columns) {
  std::vector<float> a_abs = absolute(a), b_abs = absolute(b);
  std::vector<float> result(static_cast<size_t>(rows * columns));
  ops::matmul(TensorView(result.data(), {rows, columns}, DType::kF32, Device::kCpu),
              TensorView(a_abs.data(), a_shape, DType::kF32, Device::kCpu), ops::Transpose::kNo,
              TensorView(b_abs.data(), b_shape, DType::kF32, Device::kCpu), transpose_b, 1.0, 0.0);
  return result;
}

// act = relu(pre)^2 rounded to bf16, from a pre off by at most d: relu is off by at most d, its square by
// (2 relu + d) d, and the rounding adds 2^-8 of (relu + d)^2.
inline double relu_squared_bound(double relu, double d) {
  return (2 * relu + d) * d + kBf16Rounding * (relu + d) * (relu + d);
}

// Expects |gpu[i] - cpu[i]| <= allowed(i) everywhere (NaN fails), reporting the first few misses and their
// count.
template <class Allowed>
void expect_within(const std::vector<float>& gpu, const std::vector<float>& cpu, Allowed&& allowed,
                   const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const double bound = allowed(i);
    if (!(std::abs(static_cast<double>(gpu[i]) - cpu[i]) <= bound) && ++bad <= 5) {
      ADD_FAILURE() << what << " element " << i << ": gpu " << gpu[i] << ", cpu " << cpu[i]
                    << ", allowed |diff| " << bound;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": elements outside the bound";
}

}  // namespace nanoforge::gpu_test
