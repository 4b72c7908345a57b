// TensorView helpers: sizes, reshaping, row slices and the contract checks every backend's ops share.
#include "kernels/tensor.h"

#include <fmt/format.h>

namespace nanoforge {

int64_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kBF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
    case DType::kF8E4M3:
      return "f8e4m3";
    case DType::kF8E5M2:
      return "f8e5m2";
  }
  return "?";
}

const char* device_name(Device device) {
  return device == Device::kCpu ? "cpu" : "cuda";
}

TensorView::TensorView(void* data_, std::initializer_list<int64_t> dims, DType dtype_, Device device_)
    : TensorView(data_, std::span<const int64_t>(dims.begin(), dims.size()), dtype_, device_) {}

TensorView::TensorView(void* data_, std::span<const int64_t> dims, DType dtype_, Device device_)
    : data(data_), dtype(dtype_), device(device_) {
  NANOFORGE_CHECK(dims.size() <= kMaxRank, "a tensor has at most {} dimensions, got {}", kMaxRank,
                  dims.size());
  for (int64_t d : dims) {
    NANOFORGE_CHECK(d >= 0, "negative dimension {}", d);
    shape[rank++] = d;
  }
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    n *= shape[i];
  return n;
}

int64_t TensorView::dim(int axis) const {
  int index = axis < 0 ? rank + axis : axis;
  NANOFORGE_CHECK(index >= 0 && index < rank, "axis {} out of range for {}", axis, describe());
  return shape[index];
}

TensorView TensorView::reshaped(std::initializer_list<int64_t> dims) const {
  TensorView view(data, dims, dtype, device);
  NANOFORGE_CHECK(view.numel() == numel(), "cannot view {} as {} elements", describe(), view.numel());
  return view;
}

TensorView TensorView::rows(int64_t begin, int64_t count) const {
  NANOFORGE_CHECK(rank >= 1 && begin >= 0 && count >= 0 && begin + count <= shape[0],
                  "rows [{}, {}) out of range for {}", begin, begin + count, describe());
  TensorView view = *this;
  int64_t row_elements = shape[0] == 0 ? 0 : numel() / shape[0];
  view.data = static_cast<char*>(data) + begin * row_elements * dtype_bytes(dtype);
  view.shape[0] = count;
  return view;
}

std::string TensorView::describe() const {
  std::string dims;
  for (int i = 0; i < rank; ++i)
    dims += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return fmt::format("{}[{}] on {}", dtype_name(dtype), dims, device_name(device));
}

void check_same_shape(const TensorView& a, const TensorView& b, const char* op) {
  bool same = a.rank == b.rank;
  for (int i = 0; same && i < a.rank; ++i)
    same = a.shape[i] == b.shape[i];
  NANOFORGE_CHECK(same, "{}: shapes differ: {} vs {}", op, a.describe(), b.describe());
}

void check_rank(const TensorView& t, int rank, const char* op, const char* name) {
  NANOFORGE_CHECK(t.rank == rank, "{}: {} must have rank {}, got {}", op, name, rank, t.describe());
}

}  // namespace nanoforge
