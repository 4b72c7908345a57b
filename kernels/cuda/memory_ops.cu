// The memory ops of kernels/ops.h on the GPU: fill and copy (f32, bf16, i32), accumulate (f32, bf16) and
// convert (f32 <-> bf16). copy is a device-to-device cudaMemcpyAsync. fill, accumulate and convert are
// memory-bound grid-stride loops over 16-byte packs (for_each_pack; one element at a time where a view is not
// aligned); accumulate adds in fp32 and rounds once, as torch's bf16 add does; convert rounds to nearest
// even, as torch's .to(torch.bfloat16). Everything runs on the default stream.
#include <type_traits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/launch_shape.cuh"
#include "kernels/cuda/vector_pack.cuh"

namespace nanoforge::cuda {
namespace {

// data: (numel) T, flat; every element = value.
template <class T, int kCount>
__global__ void fill_kernel(T* data, int64_t numel, T value) {
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    Pack<T, kWidth> pack;
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      pack.values[k] = value;
    pack_at<kWidth>(data, i) = pack;
  });
}

// into, add: (numel) T, flat; into += add, summed in fp32. into may alias add.
template <class T, int kCount>
__global__ void accumulate_kernel(T* into, const T* add, int64_t numel) {
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    Pack<T, kWidth> sum = pack_at<kWidth>(into, i);
    const Pack<T, kWidth> addend = pack_at<kWidth>(add, i);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      sum.values[k] = from_float<T>(to_float(sum.values[k]) + to_float(addend.values[k]));
    }
    pack_at<kWidth>(into, i) = sum;
  });
}

// dst, src: (numel), flat; dst = src converted. A pack is kCount elements of each side: 4 f32 (16 bytes) and
// 4 bf16 (8 bytes) for f32 <-> bf16.
template <class Dst, class Src, int kCount>
__global__ void convert_kernel(Dst* dst, const Src* src, int64_t numel) {
  for_each_pack<kCount>(numel, [&](int64_t i, auto width) {
    constexpr int kWidth = decltype(width)::value;
    const Pack<Src, kWidth> in = pack_at<kWidth>(src, i);
    Pack<Dst, kWidth> out;
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      out.values[k] = from_float<Dst>(to_float(in.values[k]));
    pack_at<kWidth>(dst, i) = out;
  });
}

template <class T>
void launch_fill(TensorView t, T value) {
  const int64_t numel = t.numel();
  if (numel == 0) return;
  with_pack_count<T>(pack_aligned({t.data}), [&](auto count) {
    constexpr int kCount = decltype(count)::value;
    launch_kernel<fill_kernel<T, kCount>>(elementwise_blocks(numel, kCount), kElementwiseThreads)(
        t.as<T>(), numel, value);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH("fill");
}

template <class T>
void launch_accumulate(TensorView into, TensorView add) {
  const int64_t numel = into.numel();
  if (numel == 0) return;
  with_pack_count<T>(pack_aligned({into.data, add.data}), [&](auto count) {
    constexpr int kCount = decltype(count)::value;
    launch_kernel<accumulate_kernel<T, kCount>>(elementwise_blocks(numel, kCount), kElementwiseThreads)(
        into.as<T>(), add.as<T>(), numel);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH("accumulate");
}

// Packs hold as many elements as 16 bytes of the wider type; each side's pointer must be aligned to its own
// pack (sizeof(T) * count bytes), else one element at a time.
template <class Dst, class Src>
void launch_convert(TensorView dst, TensorView src) {
  const int64_t numel = dst.numel();
  if (numel == 0) return;
  using Wider = std::conditional_t<(sizeof(Dst) > sizeof(Src)), Dst, Src>;
  constexpr int kPack = kElementsPer16Bytes<Wider>;
  const bool packable =
      aligned_to(dst.data, sizeof(Dst) * kPack) && aligned_to(src.data, sizeof(Src) * kPack);
  with_pack_count<Wider>(packable, [&](auto count) {
    constexpr int kCount = decltype(count)::value;
    launch_kernel<convert_kernel<Dst, Src, kCount>>(elementwise_blocks(numel, kCount), kElementwiseThreads)(
        dst.as<Dst>(), src.as<Src>(), numel);
  });
  NANOFORGE_CUDA_CHECK_LAUNCH("convert");
}

}  // namespace

void fill(TensorView t, double value) {
  check_on_gpu(t, "fill", "t");
  switch (t.dtype) {
    case DType::kF32:
      return launch_fill<float>(t, static_cast<float>(value));
    case DType::kBF16:
      return launch_fill<__nv_bfloat16>(t, __float2bfloat16_rn(static_cast<float>(value)));
    case DType::kI32:
      return launch_fill<int32_t>(t, static_cast<int32_t>(value));
    case DType::kF64:
      return launch_fill<double>(t, value);
    default:
      NANOFORGE_CHECK(false, "fill on CUDA: t must be f32, bf16, i32 or f64, got {}", t.describe());
  }
}

void copy(TensorView dst, TensorView src) {
  check_same_shape(dst, src, "copy");
  check_on_gpu(dst, "copy", "dst");
  check_tensor(src, dst.dtype, "copy", "src");
  if (dst.data == src.data || dst.bytes() == 0) return;
  NANOFORGE_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, static_cast<size_t>(dst.bytes()),
                                       cudaMemcpyDeviceToDevice, /*stream=*/nullptr));
}

void accumulate(TensorView into, TensorView add) {
  check_same_shape(into, add, "accumulate");
  check_on_gpu(into, "accumulate", "into");
  check_tensor(add, into.dtype, "accumulate", "add");
  switch (into.dtype) {
    case DType::kF32:
      return launch_accumulate<float>(into, add);
    case DType::kBF16:
      return launch_accumulate<__nv_bfloat16>(into, add);
    default:
      NANOFORGE_CHECK(false, "accumulate on CUDA: into must be f32 or bf16, got {}", into.describe());
  }
}

void convert(TensorView dst, TensorView src) {
  check_same_shape(dst, src, "convert");
  check_on_gpu(dst, "convert", "dst");
  check_on_gpu(src, "convert", "src");
  if (dst.dtype == DType::kBF16 && src.dtype == DType::kF32)
    return launch_convert<__nv_bfloat16, float>(dst, src);
  if (dst.dtype == DType::kF32 && src.dtype == DType::kBF16)
    return launch_convert<float, __nv_bfloat16>(dst, src);
  NANOFORGE_CHECK(false, "convert on CUDA: f32 <-> bf16 only, not {} to {}", src.describe(), dst.describe());
}

}  // namespace nanoforge::cuda
