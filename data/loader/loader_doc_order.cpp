// Feistel permutation and the document stream. A balanced Feistel network on 2h bits is a bijection of
// [0, 4^h) for any round function; cycle walking (re-applying it until the value falls below n) restricts it
// to a bijection of [0, n). With 4^h < 4n the expected number of walks is below 4.
#include "data/loader/loader_doc_order.h"

namespace nanoforge {

uint64_t splitmix64(uint64_t value) {
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

FeistelPermutation::FeistelPermutation(uint64_t n, uint64_t key) : n_(n) {
  while (half_bits_ < 32 && (uint64_t{1} << (2 * half_bits_)) < n)
    ++half_bits_;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t state = key;
  for (uint64_t& round_key : round_keys_) {
    state = splitmix64(state);
    round_key = state;
  }
}

uint64_t FeistelPermutation::encrypt(uint64_t value) const {
  uint64_t left = value >> half_bits_, right = value & half_mask_;
  for (uint64_t round_key : round_keys_) {
    const uint64_t mixed = left ^ (splitmix64(right ^ round_key) & half_mask_);
    left = right;
    right = mixed;
  }
  return (left << half_bits_) | right;
}

uint64_t FeistelPermutation::operator()(uint64_t index) const {
  if (n_ <= 1) return 0;
  uint64_t value = encrypt(index);
  while (value >= n_)
    value = encrypt(value);
  return value;
}

int64_t DocOrder::doc_at(int64_t position) const {
  const int64_t epoch = position / doc_count_;
  const int64_t index = position % doc_count_;
  if (!shuffle_) return index;
  if (epoch != cached_epoch_) {
    // One key per (seed, epoch): splitmix64 of each keeps nearby seeds and epochs unrelated.
    cached_permutation_ = FeistelPermutation(static_cast<uint64_t>(doc_count_),
                                             splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(epoch))));
    cached_epoch_ = epoch;
  }
  return static_cast<int64_t>(cached_permutation_(static_cast<uint64_t>(index)));
}

}  // namespace nanoforge
