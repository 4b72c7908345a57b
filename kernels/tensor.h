// TensorView: a non-owning view of a dense, row-major block of memory — pointer, shape, element type and
// the device the memory lives on. It is the only tensor type ops see; ownership lives in DeviceBuffer and in
// the arenas built on it, so a step never allocates.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "support/check.h"

namespace nanoforge {

enum class DType : uint8_t {
  kF32,     // fp32: the CPU backend, master weights, optimizer state, losses
  kF64,     // fp64: the CPU backend in double precision, for gradient checks against finite differences
  kBF16,    // bf16: CUDA activations
  kI32,     // token ids and targets
  kF8E4M3,  // FP8 codes, 4 exponent and 3 mantissa bits (kernels/fp8_format.h): FP8 GEMM inputs and weights
  kF8E5M2,  // FP8 codes, 5 exponent and 2 mantissa bits: FP8 GEMM output gradients
};

enum class Device : uint8_t { kCpu, kCuda };

int64_t dtype_bytes(DType dtype);
const char* dtype_name(DType dtype);
const char* device_name(Device device);

struct TensorView {
  static constexpr int kMaxRank = 4;

  void* data = nullptr;
  std::array<int64_t, kMaxRank> shape{};
  int rank = 0;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;

  TensorView() = default;
  TensorView(void* data, std::initializer_list<int64_t> dims, DType dtype, Device device);
  TensorView(void* data, std::span<const int64_t> dims, DType dtype, Device device);

  int64_t numel() const;
  int64_t bytes() const { return numel() * dtype_bytes(dtype); }
  // Size of dimension `axis`; negative axes count from the end.
  int64_t dim(int axis) const;
  // The view as `dims` (same element count), e.g. (B, T, C) as (B*T, C).
  TensorView reshaped(std::initializer_list<int64_t> dims) const;
  // Rows [begin, begin + count) of dimension 0, as a view of the same rank.
  TensorView rows(int64_t begin, int64_t count) const;
  std::string describe() const;  // "f32[2, 160, 128] on cpu"

  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// Contract checks shared by every backend: same shape, expected dtype / device / rank.
void check_same_shape(const TensorView& a, const TensorView& b, const char* op);
void check_rank(const TensorView& t, int rank, const char* op, const char* name);

}  // namespace nanoforge
