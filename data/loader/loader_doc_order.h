// The order in which the loader takes documents: an endless stream of positions, epoch e being positions
// [e N, (e + 1) N), which visit each of the N documents of a ShardSet once. Shuffled (training), epoch e's
// order is a pseudo-random permutation of all N documents keyed by (seed, e); unshuffled (validation), it is
// file order every epoch. The permutation is a Feistel network over the next power of 4 with cycle walking:
// any position is looked up in O(1) with no table, so epochs cost no memory and no set-up however large the
// data, and a saved loader state needs only a position.
#pragma once

#include <array>
#include <cstdint>

namespace nanoforge {

// A pseudo-random bijection of [0, n) (6-round balanced Feistel network, splitmix64 rounds).
class FeistelPermutation {
 public:
  FeistelPermutation(uint64_t n, uint64_t key);
  uint64_t operator()(uint64_t index) const;
  uint64_t size() const { return n_; }

 private:
  static constexpr int kRounds = 6;
  uint64_t encrypt(uint64_t value) const;
  uint64_t n_;
  int half_bits_ = 1;
  uint64_t half_mask_ = 1;
  std::array<uint64_t, kRounds> round_keys_{};
};

// Not thread-safe: it caches the current epoch's permutation (each loader's thread owns one).
class DocOrder {
 public:
  DocOrder(int64_t doc_count, uint64_t seed, bool shuffle)
      : doc_count_(doc_count), seed_(seed), shuffle_(shuffle) {}

  // The global document at stream position `position` (>= 0).
  int64_t doc_at(int64_t position) const;
  int64_t epoch_of(int64_t position) const { return position / doc_count_; }
  int64_t doc_count() const { return doc_count_; }
  uint64_t seed() const { return seed_; }
  bool shuffled() const { return shuffle_; }

 private:
  int64_t doc_count_;
  uint64_t seed_;
  bool shuffle_;
  // The permutation of the epoch last asked for: consecutive positions share it.
  mutable int64_t cached_epoch_ = -1;
  mutable FeistelPermutation cached_permutation_{1, 0};
};

// splitmix64's output function (Steele et al. 2014): a fast 64-bit mixer, used for keys and rounds.
uint64_t splitmix64(uint64_t value);

}  // namespace nanoforge
