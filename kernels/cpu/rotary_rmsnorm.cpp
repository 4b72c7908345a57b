// CPU pass of rotary embedding (nanochat's convention: half split, rotation by -theta) with the QK-norm that
// follows it, in place on a head slice (q or k inside the fused projection's output), one (position, head)
// row at a time; the backward is the norm's backward then the transpose rotation. Each row does the
// arithmetic of the unfused sequence (rotation, then rmsnorm_rows.h), so the results are bitwise those of the
// separate rotary and norm ops this pass replaced.
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/rmsnorm_rows.h"

namespace nanoforge::cpu {
namespace {

// The (batch, seq, heads, head_dim) shape of the slice, and how far apart its positions are, checked against
// the tables and rstd.
struct HeadRows {
  int64_t batch, seq, heads, head_dim, row_elements;
  // Element offset of head h at position (b, t); rstd's row of it is (b * seq + t) * heads + h.
  int64_t offset(int64_t b, int64_t t, int64_t h) const {
    return (b * seq + t) * row_elements + h * head_dim;
  }
};

HeadRows check_shapes(const HeadSlice& x, const TensorView& rstd, const TensorView& cos,
                      const TensorView& sin, const char* op) {
  const HeadRows shape{x.batch(), x.seq(), x.heads(), x.head_dim(), x.row_elements()};
  const int64_t half = shape.head_dim / 2;
  NANOFORGE_CHECK(shape.head_dim % 2 == 0, "{}: head dim {} must be even", op, shape.head_dim);
  NANOFORGE_CHECK(cos.dim(-1) == half && sin.dim(-1) == half && cos.numel() / half >= shape.seq &&
                      sin.numel() == cos.numel(),
                  "{}: tables {} / {} must be (>= {}, {})", op, cos.describe(), sin.describe(), shape.seq,
                  half);
  NANOFORGE_CHECK(rstd.numel() == shape.batch * shape.seq * shape.heads,
                  "{}: rstd {} must hold one value per head of x {}", op, rstd.describe(), x.describe());
  return shape;
}

// sign = +1: (x1, x2) -> (x1 c + x2 s, -x1 s + x2 c); sign = -1: the transpose. In place on one head.
template <class T>
void rotate_head(T* x1, const T* c, const T* s, int64_t half, T sign) {
  T* x2 = x1 + half;
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) {
    const T first = x1[i], second = x2[i];
    x1[i] = first * c[i] + sign * second * s[i];
    x2[i] = -sign * first * s[i] + second * c[i];
  }
}

}  // namespace

template <class T>
void rotary_rmsnorm_forward(HeadSlice x, TensorView rstd, TensorView cos, TensorView sin, double scale) {
  const HeadRows shape = check_shapes(x, rstd, cos, sin, "rotary_rmsnorm_forward");
  const int64_t half = shape.head_dim / 2;
  T* data = x.as<T>();
  T* inv_rms = rstd.as<T>();
  const T* cos_table = cos.as<T>();
  const T* sin_table = sin.as<T>();
  const T factor = static_cast<T>(scale);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t t = 0; t < shape.seq; ++t) {
      for (int64_t h = 0; h < shape.heads; ++h) {
        const int64_t row = (b * shape.seq + t) * shape.heads + h;
        T* head = data + shape.offset(b, t, h);
        rotate_head(head, cos_table + t * half, sin_table + t * half, half, T{1});
        inv_rms[row] = rmsnorm_row_forward(head, head, shape.head_dim, factor);
      }
    }
  }
}

template <class T>
void rotary_rmsnorm_backward(HeadSlice d_x, HeadSlice out, TensorView rstd, TensorView cos, TensorView sin,
                             double scale) {
  const HeadRows shape = check_shapes(d_x, rstd, cos, sin, "rotary_rmsnorm_backward");
  check_same_shape(out, d_x, "rotary_rmsnorm_backward");
  HeadRows out_shape = shape;  // where out's heads lie: the same rows, out's own position stride
  out_shape.row_elements = out.row_elements();
  const int64_t half = shape.head_dim / 2;
  T* grad = d_x.as<T>();
  const T* y = out.as<T>();
  const T* inv_rms = rstd.as<T>();
  const T* cos_table = cos.as<T>();
  const T* sin_table = sin.as<T>();
  const T factor = static_cast<T>(scale);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t t = 0; t < shape.seq; ++t) {
      for (int64_t h = 0; h < shape.heads; ++h) {
        const int64_t row = (b * shape.seq + t) * shape.heads + h;
        T* head = grad + shape.offset(b, t, h);
        rmsnorm_row_backward(head, head, y + out_shape.offset(b, t, h), inv_rms[row], shape.head_dim, factor,
                             /*add=*/false);
        rotate_head(head, cos_table + t * half, sin_table + t * half, half, T{-1});
      }
    }
  }
}

NANOFORGE_CPU_INSTANTIATE(rotary_rmsnorm_forward);
NANOFORGE_CPU_INSTANTIATE(rotary_rmsnorm_backward);

}  // namespace nanoforge::cpu
