// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a counter-based
// generator, so element e of a stream can be drawn without drawing elements 0 .. e-1. Parameter init uses
// one stream per parameter name: values do not depend on thread count, device, or the other parameters.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

namespace nanoforge {

class Philox {
 public:
  Philox(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}

  // 64-bit FNV-1a of a name, to derive a stream from e.g. a parameter name.
  static uint64_t stream_of(std::string_view name) {
    uint64_t hash = 0xcbf29ce484222325ull;
    for (char c : name) {
      hash ^= static_cast<uint8_t>(c);
      hash *= 0x100000001b3ull;
    }
    return hash;
  }

  // Four independent 32-bit words for counter value `block`.
  std::array<uint32_t, 4> block(uint64_t block) const {
    std::array<uint32_t, 4> counter = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                       static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)};
    uint32_t key0 = static_cast<uint32_t>(seed_), key1 = static_cast<uint32_t>(seed_ >> 32);
    for (int round = 0; round < 10; ++round) {
      const uint64_t product0 = uint64_t{kMultiplier0} * counter[0];
      const uint64_t product1 = uint64_t{kMultiplier1} * counter[2];
      counter = {static_cast<uint32_t>(product1 >> 32) ^ counter[1] ^ key0, static_cast<uint32_t>(product1),
                 static_cast<uint32_t>(product0 >> 32) ^ counter[3] ^ key1, static_cast<uint32_t>(product0)};
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    return counter;
  }

  // Element e of the stream as a uniform double in [0, 1) (53 random bits).
  double uniform(uint64_t element) const {
    const auto words = block(element / 2);
    const int slot = static_cast<int>(element % 2) * 2;
    return to_unit((uint64_t{words[slot]} << 32) | words[slot + 1]);
  }

  // Element e of the stream as a standard normal (Box-Muller on one counter block per pair of elements).
  double normal(uint64_t element) const {
    const auto words = block(element / 2);
    const double u1 = to_unit((uint64_t{words[0]} << 32) | words[1]);
    const double u2 = to_unit((uint64_t{words[2]} << 32) | words[3]);
    const double radius = std::sqrt(-2.0 * std::log(1.0 - u1));  // 1 - u1 is in (0, 1]
    const double angle = 2.0 * std::numbers::pi * u2;
    return element % 2 == 0 ? radius * std::cos(angle) : radius * std::sin(angle);
  }

 private:
  static constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
  static constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  static double to_unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

  uint64_t seed_;
  uint64_t stream_;
};

}  // namespace nanoforge
