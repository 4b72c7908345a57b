// CPU fill / copy / accumulate / convert: the elementwise memory ops, parallel over elements.
#include <cstring>

#include "kernels/cpu/cpu_ops.h"

namespace nanoforge::cpu {

template <class T>
void fill(TensorView t, double value) {
  T* data = t.as<T>();
  const int64_t n = t.numel();
  const T v = static_cast<T>(value);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    data[i] = v;
}

template <class T>
void copy(TensorView dst, TensorView src) {
  check_same_shape(dst, src, "copy");
  if (dst.data != src.data) std::memcpy(dst.data, src.data, static_cast<size_t>(dst.bytes()));
}

template <class T>
void accumulate(TensorView into, TensorView add) {
  check_same_shape(into, add, "accumulate");
  T* out = into.as<T>();
  const T* in = add.as<T>();
  const int64_t n = into.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    out[i] += in[i];
}

template <class T>
void copy_columns(TensorView dst, int64_t dst_first_column, TensorView src, int64_t src_first_column,
                  int64_t columns) {
  check_rank(dst, 2, "copy_columns", "dst");
  check_rank(src, 2, "copy_columns", "src");
  NANOFORGE_CHECK(dst.shape[0] == src.shape[0] && columns >= 0 && dst_first_column >= 0 &&
                      src_first_column >= 0 && dst_first_column + columns <= dst.shape[1] &&
                      src_first_column + columns <= src.shape[1],
                  "copy_columns: {} columns from {} at {} into {} at {}", columns, src.describe(),
                  src_first_column, dst.describe(), dst_first_column);
  const T* in = src.as<T>();
  T* out = dst.as<T>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < dst.shape[0]; ++r) {
    std::memcpy(out + r * dst.shape[1] + dst_first_column, in + r * src.shape[1] + src_first_column,
                static_cast<size_t>(columns) * sizeof(T));
  }
}

template <class Dst, class Src>
void convert(TensorView dst, TensorView src) {
  check_same_shape(dst, src, "convert");
  Dst* out = dst.as<Dst>();
  const Src* in = src.as<Src>();
  const int64_t n = dst.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<Dst>(in[i]);
}

NANOFORGE_CPU_INSTANTIATE(fill);
NANOFORGE_CPU_INSTANTIATE_FOR(fill, int32_t);
NANOFORGE_CPU_INSTANTIATE(copy);
NANOFORGE_CPU_INSTANTIATE_FOR(copy, int32_t);
NANOFORGE_CPU_INSTANTIATE(accumulate);
NANOFORGE_CPU_INSTANTIATE(copy_columns);
template void convert<float, double>(TensorView, TensorView);
template void convert<double, float>(TensorView, TensorView);

}  // namespace nanoforge::cpu
