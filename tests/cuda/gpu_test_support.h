// Host-side helpers for the GPU tests: bf16 <-> f32 conversions (round to nearest even, as the GPU's
// __float2bfloat16_rn; test data is finite, so NaN handling is left out), and moving host vectors to and from
// CUDA buffers.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/device_buffer.h"

namespace nanoforge::gpu_test {

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

}  // namespace nanoforge::gpu_test
