// A dense row-major array in host memory with its shape: what files are read into and written from.
#pragma once

#include <cstdint>
#include <functional>
#include <numeric>
#include <vector>

namespace nanoforge {

template <class T>
struct HostArray {
  std::vector<int64_t> shape;  // empty for a scalar
  std::vector<T> values;       // row-major, product(shape) elements

  static int64_t count(const std::vector<int64_t>& shape) {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  }
  int64_t numel() const { return count(shape); }
};

}  // namespace nanoforge
