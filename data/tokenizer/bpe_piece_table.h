// Fast lookups of whole pieces on the encode hot path. PieceTable maps the byte strings of the ranked
// tokens to their ids (open addressing, linear probing, a 32-bit tag per slot so that a probe rarely
// compares bytes). PieceCache remembers, per thread, the ids of recently merged pieces that are not tokens
// themselves (direct-mapped, pieces up to 22 bytes and 8 ids), so the rank merge runs once per distinct
// word instead of once per occurrence. Both key on piece_hash, computed once per piece.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace nanoforge {

namespace bpe_hash_detail {
inline uint64_t mix(uint64_t a, uint64_t b) {
  const __uint128_t product = static_cast<__uint128_t>(a) * b;
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}
inline uint64_t load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
}  // namespace bpe_hash_detail

// A 64-bit hash of a byte string that reads only inside it (wyhash-style overlapping loads).
inline uint64_t piece_hash(std::string_view bytes) {
  using namespace bpe_hash_detail;
  constexpr uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull, k2 = 0x8ebc6af09c88c6e3ull;
  const char* p = bytes.data();
  const size_t n = bytes.size();
  uint64_t a = 0, b = 0, seed = k0 ^ n;
  if (n <= 16) {
    if (n >= 8) {
      a = load64(p);
      b = load64(p + n - 8);
    } else if (n >= 4) {
      a = load32(p);
      b = load32(p + n - 4);
    } else if (n > 0) {
      a = static_cast<uint64_t>(static_cast<unsigned char>(p[0])) << 16 |
          static_cast<uint64_t>(static_cast<unsigned char>(p[n >> 1])) << 8 |
          static_cast<unsigned char>(p[n - 1]);
    }
  } else {
    size_t i = 0;
    for (; i + 16 < n; i += 16)
      seed = mix(load64(p + i) ^ k1, load64(p + i + 8) ^ seed);
    a = load64(p + n - 16);
    b = load64(p + n - 8);
  }
  return mix(k1 ^ n, mix(a ^ k1, b ^ seed) ^ k2);
}

class PieceTable {
 public:
  // keys[i] -> i; the keys' bytes must outlive the table and be distinct.
  void build(const std::vector<std::string_view>& keys);

  // The id of `piece` (whose piece_hash is `hash`), or -1.
  int32_t find(std::string_view piece, uint64_t hash) const {
    const uint32_t tag = static_cast<uint32_t>(hash >> 32) | 1;  // 0 marks an empty slot
    for (uint64_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.tag == 0) return -1;
      if (slot.tag == tag && slot.length == piece.size() &&
          std::memcmp(slot.data, piece.data(), piece.size()) == 0)
        return slot.id;
    }
  }

 private:
  struct Slot {
    const char* data = nullptr;
    uint32_t length = 0;
    uint32_t tag = 0;
    int32_t id = -1;
  };
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
};

class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 22;
  static constexpr size_t kMaxIds = 8;

  PieceCache() : entries_(kEntries) {}

  // Appends the cached ids of `piece` to `out` and returns true, or returns false.
  template <typename Out>
  bool append(std::string_view piece, uint64_t hash, Out& out) const {
    if (piece.size() > kMaxPieceBytes) return false;
    const Entry& entry = entries_[hash & (kEntries - 1)];
    if (entry.hash != hash || entry.length != piece.size() ||
        std::memcmp(entry.bytes, piece.data(), piece.size()) != 0)
      return false;
    out.insert(out.end(), entry.ids, entry.ids + entry.num_ids);
    return true;
  }
  // Remembers ids[0..n) for `piece` if both fit, replacing what was in its slot.
  void put(std::string_view piece, uint64_t hash, const int32_t* ids, size_t n) {
    if (piece.size() > kMaxPieceBytes || n > kMaxIds) return;
    Entry& entry = entries_[hash & (kEntries - 1)];
    entry.hash = hash;
    entry.length = static_cast<uint8_t>(piece.size());
    entry.num_ids = static_cast<uint8_t>(n);
    std::memcpy(entry.bytes, piece.data(), piece.size());
    std::memcpy(entry.ids, ids, n * sizeof(int32_t));
  }

 private:
  static constexpr size_t kEntries = 1 << 14;  // 1 MiB per thread and tokenizer
  struct Entry {
    uint64_t hash = 0;
    uint8_t length = 0xff;  // longer than any cached piece: matches none until written
    uint8_t num_ids = 0;
    char bytes[kMaxPieceBytes];
    int32_t ids[kMaxIds];
  };
  static_assert(sizeof(Entry) == 64);
  std::vector<Entry> entries_;
};

}  // namespace nanoforge
