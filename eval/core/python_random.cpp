// PythonRandom: MT19937 as CPython's _randommodule.c runs it, and random.py's getrandbits / _randbelow /
// shuffle / sample on top.
#include "eval/core/python_random.h"

#include <cmath>
#include <unordered_set>

#include "support/check.h"

namespace nanoforge {
namespace {

constexpr int kShift = 397;  // MT19937's middle word offset (M)
constexpr uint32_t kMatrixA = 0x9908b0dfU, kUpperMask = 0x80000000U, kLowerMask = 0x7fffffffU;

}  // namespace

PythonRandom::PythonRandom(uint64_t seed) {
  // random_seed(): the absolute value's 32-bit words, least significant first; zero is one word.
  std::vector<uint32_t> key;
  for (uint64_t rest = seed; rest != 0; rest >>= 32)
    key.push_back(static_cast<uint32_t>(rest));
  if (key.empty()) key.push_back(0);
  seed_by_array(key);
}

void PythonRandom::seed_by_array(std::span<const uint32_t> key) {
  std::array<uint32_t, kStateWords>& mt = state_;
  mt[0] = 19650218U;  // init_genrand(19650218)
  for (uint32_t i = 1; i < kStateWords; ++i)
    mt[i] = 1812433253U * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i;
  uint32_t i = 1, j = 0;
  const uint32_t length = static_cast<uint32_t>(key.size());
  for (uint32_t k = std::max<uint32_t>(kStateWords, length); k > 0; --k) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525U)) + key[j] + j;
    ++i, ++j;
    if (i >= kStateWords) mt[0] = mt[kStateWords - 1], i = 1;
    if (j >= length) j = 0;
  }
  for (uint32_t k = kStateWords - 1; k > 0; --k) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941U)) - i;
    ++i;
    if (i >= kStateWords) mt[0] = mt[kStateWords - 1], i = 1;
  }
  mt[0] = 0x80000000U;  // non-zero initial state
  next_ = kStateWords;
}

uint32_t PythonRandom::next_uint32() {
  std::array<uint32_t, kStateWords>& mt = state_;
  if (next_ >= kStateWords) {
    auto twist = [&](int k, int next_k, int shifted_k) {
      const uint32_t y = (mt[k] & kUpperMask) | (mt[next_k] & kLowerMask);
      mt[k] = mt[shifted_k] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    };
    int k = 0;
    for (; k < kStateWords - kShift; ++k)
      twist(k, k + 1, k + kShift);
    for (; k < kStateWords - 1; ++k)
      twist(k, k + 1, k + kShift - kStateWords);
    twist(kStateWords - 1, 0, kShift - 1);
    next_ = 0;
  }
  uint32_t y = mt[next_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= y >> 18;
  return y;
}

uint64_t PythonRandom::getrandbits(int bits) {
  NANOFORGE_CHECK(bits >= 0 && bits <= 64, "getrandbits: {} bits (0..64 supported)", bits);
  if (bits == 0) return 0;
  if (bits <= 32) return next_uint32() >> (32 - bits);
  // Whole 32-bit words, least significant first; the last one keeps its top bits.
  const uint64_t low = next_uint32();
  const uint64_t high = next_uint32() >> (64 - bits);
  return low | (high << 32);
}

uint64_t PythonRandom::randbelow(uint64_t n) {
  NANOFORGE_CHECK(n >= 1, "randbelow: n must be >= 1");
  const int bits = static_cast<int>(std::bit_width(n));  // n.bit_length()
  uint64_t r = getrandbits(bits);
  while (r >= n)
    r = getrandbits(bits);
  return r;
}

std::vector<int64_t> PythonRandom::sample(std::span<const int64_t> population, size_t k) {
  const size_t n = population.size();
  NANOFORGE_CHECK(k <= n, "sample: {} from a population of {}", k, n);
  std::vector<int64_t> result(k);
  // CPython picks whichever is smaller in memory: an n-element pool list or a k-element set.
  size_t set_size = 21;
  if (k > 5) set_size += static_cast<size_t>(std::pow(4.0, std::ceil(std::log(3.0 * k) / std::log(4.0))));
  if (n <= set_size) {
    std::vector<int64_t> pool(population.begin(), population.end());
    for (size_t i = 0; i < k; ++i) {
      const size_t j = static_cast<size_t>(randbelow(n - i));
      result[i] = pool[j];
      pool[j] = pool[n - i - 1];  // the last unselected item fills the hole
    }
  } else {
    std::unordered_set<size_t> selected;
    for (size_t i = 0; i < k; ++i) {
      size_t j = static_cast<size_t>(randbelow(n));
      while (selected.contains(j))
        j = static_cast<size_t>(randbelow(n));
      selected.insert(j);
      result[i] = population[j];
    }
  }
  return result;
}

}  // namespace nanoforge
