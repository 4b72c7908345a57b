// PieceTable::build: a power-of-two table at most half full.
#include "data/tokenizer/bpe_piece_table.h"

namespace nanoforge {

void PieceTable::build(const std::vector<std::string_view>& keys) {
  size_t capacity = 16;
  while (capacity < 2 * keys.size())
    capacity *= 2;
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  for (size_t id = 0; id < keys.size(); ++id) {
    const uint64_t hash = piece_hash(keys[id]);
    uint64_t i = hash & mask_;
    while (slots_[i].tag != 0)
      i = (i + 1) & mask_;
    slots_[i] = Slot{keys[id].data(), static_cast<uint32_t>(keys[id].size()),
                     static_cast<uint32_t>(hash >> 32) | 1, static_cast<int32_t>(id)};
  }
}

}  // namespace nanoforge
