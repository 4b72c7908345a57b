// CPU rotary embedding in nanochat's convention (half split, rotation by -theta), in place. The backward is
// the transpose rotation, also in place.
#include "kernels/cpu/cpu_ops.h"

namespace nanoforge::cpu {
namespace {

// sign = +1: (x1, x2) -> (x1 c + x2 s, -x1 s + x2 c); sign = -1: the transpose.
template <class T>
void rotate(TensorView x, TensorView cos, TensorView sin, T sign, const char* op) {
  check_rank(x, 4, op, "x");
  const int64_t batch = x.shape[0], seq = x.shape[1], heads = x.shape[2], head_dim = x.shape[3];
  const int64_t half = head_dim / 2;
  NANOFORGE_CHECK(head_dim % 2 == 0, "{}: head dim {} must be even", op, head_dim);
  NANOFORGE_CHECK(
      cos.dim(-1) == half && sin.dim(-1) == half && cos.numel() / half >= seq && sin.numel() == cos.numel(),
      "{}: tables {} / {} must be (>= {}, {})", op, cos.describe(), sin.describe(), seq, half);
  T* data = x.as<T>();
  const T* cos_table = cos.as<T>();
  const T* sin_table = sin.as<T>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < seq; ++t) {
      const T* c = cos_table + t * half;
      const T* s = sin_table + t * half;
      for (int64_t h = 0; h < heads; ++h) {
        T* x1 = data + ((b * seq + t) * heads + h) * head_dim;
        T* x2 = x1 + half;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const T first = x1[i], second = x2[i];
          x1[i] = first * c[i] + sign * second * s[i];
          x2[i] = -sign * first * s[i] + second * c[i];
        }
      }
    }
  }
}

}  // namespace

template <class T>
void rotary_forward(TensorView x, TensorView cos, TensorView sin) {
  rotate<T>(x, cos, sin, T{1}, "rotary_forward");
}

template <class T>
void rotary_backward(TensorView d_x, TensorView cos, TensorView sin) {
  rotate<T>(d_x, cos, sin, T{-1}, "rotary_backward");
}

template void rotary_forward<float>(TensorView, TensorView, TensorView);
template void rotary_forward<double>(TensorView, TensorView, TensorView);
template void rotary_backward<float>(TensorView, TensorView, TensorView);
template void rotary_backward<double>(TensorView, TensorView, TensorView);

}  // namespace nanoforge::cpu
