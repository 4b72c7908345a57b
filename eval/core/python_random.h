// CPython's `random.Random`, the parts nanochat's CORE evaluation draws with: seeding from a non-negative int
// (init_by_array over the int's 32-bit words), the Mersenne Twister's 32-bit outputs, getrandbits,
// _randbelow (rejection sampling on getrandbits), shuffle and sample (with CPython's choice between a pool
// list and a selected-set by population size). Bit-exact with CPython 3.11-3.13, so the same seed draws the
// same few-shot examples and the same shuffled order as nanochat.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace nanoforge {

class PythonRandom {
 public:
  // random.Random(seed) for seed >= 0.
  explicit PythonRandom(uint64_t seed);

  uint32_t next_uint32();          // genrand_uint32
  uint64_t getrandbits(int bits);  // 0 <= bits <= 64
  uint64_t randbelow(uint64_t n);  // _randbelow_with_getrandbits: uniform in [0, n), n >= 1
  // random.shuffle: Fisher-Yates from the end.
  template <class T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i-- > 1;) {
      const size_t j = static_cast<size_t>(randbelow(i + 1));
      std::swap(items[i], items[j]);
    }
  }
  // random.sample(population, k): k distinct elements in selection order; k <= population.size().
  std::vector<int64_t> sample(std::span<const int64_t> population, size_t k);

 private:
  static constexpr int kStateWords = 624;
  void seed_by_array(std::span<const uint32_t> key);
  std::array<uint32_t, kStateWords> state_{};
  int next_ = kStateWords;
};

}  // namespace nanoforge
