// upload / download: convert on the host in a staging vector of the tensor's dtype, then one copy.
#include "kernels/host_transfer.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/device_buffer.h"
#include "kernels/fp8_format.h"

namespace nanoforge {
namespace {

template <class Stored, class Host>
std::vector<Stored> convert(const Host* src, int64_t n) {
  std::vector<Stored> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<Stored>(src[i]);
  return out;
}

template <class Host, class Stored>
std::vector<Host> convert_back(const std::vector<Stored>& staged) {
  return std::vector<Host>(staged.begin(), staged.end());
}

// bf16 as its 16 bits: the upper half of an fp32, rounded to nearest even (as the GPU's __float2bfloat16_rn;
// NaN stays NaN).
uint16_t bf16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

float bf16_value(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

}  // namespace

template <class Host>
void upload(TensorView dst, const Host* src) {
  const int64_t n = dst.numel();
  switch (dst.dtype) {
    case DType::kF32:
      copy_from_host(dst, convert<float>(src, n).data());
      return;
    case DType::kF64:
      copy_from_host(dst, convert<double>(src, n).data());
      return;
    case DType::kI32:
      copy_from_host(dst, convert<int32_t>(src, n).data());
      return;
    case DType::kBF16: {
      std::vector<uint16_t> staged(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        staged[i] = bf16_bits(static_cast<float>(src[i]));
      copy_from_host(dst, staged.data());
      return;
    }
    case DType::kF8E4M3:
    case DType::kF8E5M2: {  // unscaled codes, rounded to nearest even and saturated (kernels/fp8_format.h)
      std::vector<uint8_t> staged(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        staged[i] = fp8::encode(static_cast<float>(src[i]), fp8::format_of(dst.dtype));
      copy_from_host(dst, staged.data());
      return;
    }
  }
}

template <class Host>
std::vector<Host> download(TensorView src) {
  const auto n = static_cast<size_t>(src.numel());
  switch (src.dtype) {
    case DType::kF32: {
      std::vector<float> staged(n);
      copy_to_host(staged.data(), src);
      return convert_back<Host>(staged);
    }
    case DType::kF64: {
      std::vector<double> staged(n);
      copy_to_host(staged.data(), src);
      return convert_back<Host>(staged);
    }
    case DType::kI32: {
      std::vector<int32_t> staged(n);
      copy_to_host(staged.data(), src);
      return convert_back<Host>(staged);
    }
    case DType::kBF16: {
      std::vector<uint16_t> staged(n);
      copy_to_host(staged.data(), src);
      std::vector<Host> values(n);
      for (size_t i = 0; i < n; ++i)
        values[i] = static_cast<Host>(bf16_value(staged[i]));
      return values;
    }
    case DType::kF8E4M3:
    case DType::kF8E5M2: {  // the codes' values, unscaled
      std::vector<uint8_t> staged(n);
      copy_to_host(staged.data(), src);
      std::vector<Host> values(n);
      for (size_t i = 0; i < n; ++i)
        values[i] = static_cast<Host>(fp8::decode(staged[i], fp8::format_of(src.dtype)));
      return values;
    }
  }
  NANOFORGE_CHECK(false, "download: unknown dtype {}", static_cast<int>(src.dtype));
  return {};
}

template <class Host>
void download_into(TensorView src, std::vector<Host>& out) {
  const bool same_type = (std::is_same_v<Host, float> && src.dtype == DType::kF32) ||
                         (std::is_same_v<Host, double> && src.dtype == DType::kF64) ||
                         (std::is_same_v<Host, int32_t> && src.dtype == DType::kI32);
  if (!same_type) {
    out = download<Host>(src);
    return;
  }
  out.resize(static_cast<size_t>(src.numel()));
  copy_to_host(out.data(), src);
}

template void upload<float>(TensorView, const float*);
template void upload<double>(TensorView, const double*);
template void upload<int32_t>(TensorView, const int32_t*);
template void upload<int64_t>(TensorView, const int64_t*);
template std::vector<float> download<float>(TensorView);
template std::vector<double> download<double>(TensorView);
template std::vector<int32_t> download<int32_t>(TensorView);
template void download_into<float>(TensorView, std::vector<float>&);

}  // namespace nanoforge
