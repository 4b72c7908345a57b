// upload / download: convert on the host in a staging vector of the tensor's dtype, then one copy.
#include "kernels/host_transfer.h"

#include <cstring>
#include <type_traits>

#include "kernels/device_buffer.h"

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
    case DType::kBF16:
      break;
  }
  NANOFORGE_CHECK(false, "upload: no host conversion to {} yet", dtype_name(dst.dtype));
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
    case DType::kBF16:
      break;
  }
  NANOFORGE_CHECK(false, "download: no host conversion from {} yet", dtype_name(src.dtype));
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
