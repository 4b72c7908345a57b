// The logistic sigmoid used by nanochat's smear and value-embedding gates.
#pragma once

#include <cmath>

namespace nanoforge::cpu {

template <class T>
inline T sigmoid(T x) {
  return T{1} / (T{1} + std::exp(-x));
}

}  // namespace nanoforge::cpu
