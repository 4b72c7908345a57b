// The two FP8 formats of tensorwise-scaled FP8 training, in software: e4m3 ("fn": no infinities, one NaN
// pattern per sign, max 448) for activations and weights, e5m2 (IEEE-like, max 57344) for gradients.
// Encoding rounds to nearest, ties to even, and saturates to the largest finite value (what nanochat's
// clamp-then-cast does; NaN stays NaN). The CPU backend quantises with these, and the tests hold them to
// PyTorch's float8 dtypes code by code. Header-only so the CPU GEMM's inner loops can inline the decode.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "kernels/tensor.h"

namespace nanoforge::fp8 {

enum class Format { kE4m3, kE5m2 };

struct FormatTraits {
  int exponent_bits;
  int mantissa_bits;
  int exponent_bias;
  float max_finite;       // 448 = 1.75 * 2^8 (e4m3); 57344 = 1.75 * 2^15 (e5m2)
  std::uint8_t max_code;  // the code of +max_finite
  std::uint8_t nan_code;  // the positive quiet NaN PyTorch writes
  std::string_view name;
};

constexpr FormatTraits traits(Format format) {
  return format == Format::kE4m3 ? FormatTraits{4, 3, 7, 448.0f, 0x7E, 0x7F, "e4m3"}
                                 : FormatTraits{5, 2, 15, 57344.0f, 0x7B, 0x7F, "e5m2"};
}

// The value of one code (exact in float). e4m3 has NaN at S.1111.111 and no infinity; e5m2 has infinities
// at S.11111.00 and NaNs above.
inline float decode(std::uint8_t code, Format format) {
  const FormatTraits t = traits(format);
  const bool negative = (code & 0x80) != 0;
  const int exponent_field = (code & 0x7F) >> t.mantissa_bits;
  const int mantissa = code & ((1 << t.mantissa_bits) - 1);
  const int all_ones = (1 << t.exponent_bits) - 1;
  float magnitude;
  if (format == Format::kE4m3 && exponent_field == all_ones && mantissa == (1 << t.mantissa_bits) - 1) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (format == Format::kE5m2 && exponent_field == all_ones) {
    magnitude =
        mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (exponent_field == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), 1 - t.exponent_bias - t.mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa + (1 << t.mantissa_bits)),
                           exponent_field - t.exponent_bias - t.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

// Rounds x to the nearest code (ties to the even mantissa), saturating finite and infinite overflow to
// +-max_finite; NaN becomes the NaN code with x's sign.
inline std::uint8_t encode(float x, Format format) {
  const FormatTraits t = traits(format);
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | t.nan_code;
  const float magnitude = std::fabs(x);
  if (magnitude >= t.max_finite) return sign | t.max_code;
  if (magnitude == 0.0f) return sign;
  const int min_normal_exponent = 1 - t.exponent_bias;
  int exponent;  // magnitude = f * 2^exponent with f in [0.5, 1)
  std::frexp(magnitude, &exponent);
  // The spacing of codes around magnitude: 2^(e - mantissa_bits) for normals, the subnormal step below.
  const int unit_exponent = std::max(exponent - 1, min_normal_exponent) - t.mantissa_bits;
  // Scaling by a power of two is exact; rint rounds half to even in the default rounding mode.
  const int units = static_cast<int>(std::rint(std::ldexp(magnitude, -unit_exponent)));
  // units counts steps of 2^unit_exponent; re-express as exponent field and mantissa (a carry into the
  // next binade, units == 2^(mantissa_bits + 1), lands on the right code by the same arithmetic).
  const int leading = 1 << t.mantissa_bits;
  int exponent_field, mantissa;
  if (unit_exponent + t.mantissa_bits == min_normal_exponent && units < leading) {
    exponent_field = 0;
    mantissa = units;
  } else {
    const int shift = units >= 2 * leading ? 1 : 0;
    exponent_field = unit_exponent + t.mantissa_bits + t.exponent_bias + shift;
    mantissa = (units >> shift) - leading;
  }
  return sign | static_cast<std::uint8_t>((exponent_field << t.mantissa_bits) | mantissa);
}

// nanochat's tensorwise scale (fp8.py _to_fp8): fp8_max / max(amax, 1e-12), divided in float64 and
// rounded to float32. (With 448 and 57344 this equals a float32 division for every float32 amax, checked
// over all 2^31 positive floats; it is written as fp8.py writes it.) The GEMM multiplies back by float32's
// reciprocal of that float.
constexpr double kAmaxFloor = 1e-12;  // fp8.py EPS: an all-zero tensor gets a finite scale

inline float tensorwise_scale(float amax, Format format) {
  const double floored = std::max(static_cast<double>(amax), kAmaxFloor);
  return static_cast<float>(static_cast<double>(traits(format).max_finite) / floored);
}

inline float inverse_scale(float scale) {
  return 1.0f / scale;
}

// One element of the quantisation: x * scale in float32, clamped to +-max_finite, rounded to a code.
inline std::uint8_t quantize(float x, float scale, Format format) {
  return encode(x * scale, format);
}

// The format of an FP8 tensor's dtype; the caller has checked that it is kF8E4M3 or kF8E5M2.
constexpr Format format_of(DType dtype) {
  return dtype == DType::kF8E4M3 ? Format::kE4m3 : Format::kE5m2;
}

}  // namespace nanoforge::fp8
