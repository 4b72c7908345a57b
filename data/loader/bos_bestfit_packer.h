// nanochat's BOS-aligned best-fit packing (nanochat/dataloader.py), one row at a time: the longest buffered
// document that fits the space left is placed whole; when none fits, the shortest is cropped to fill the row.
// Every row starts with a BOS, holds no padding and fills exactly. The packer deals in stream positions and
// lengths only (no tokens), so a rank can plan every global row but copy only its own (loader.h). It refills
// one document at a time to exactly `buffer_docs` (nanochat: chunks of 128), which keeps the state a plain
// list; docs/data.md (Packing) has the details and the measured crop fractions.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace nanoforge {

// The first `length` tokens of the document at stream position `position` (global document `doc`).
struct PackedSegment {
  int64_t position = 0;
  int64_t doc = 0;
  int64_t length = 0;
};

// Counts over the rows packed so far. Tokens of documents still in the buffer are not counted.
struct PackingStats {
  int64_t rows = 0;
  int64_t tokens_packed = 0;   // rows * capacity
  int64_t tokens_cropped = 0;  // tokens of cropped documents that no row holds
  int64_t docs_whole = 0;
  int64_t docs_cropped = 0;
  // Share of the tokens of the documents used that were discarded by cropping (nanochat: ~35% at T=2048).
  double crop_fraction() const {
    const int64_t used = tokens_packed + tokens_cropped;
    return used == 0 ? 0.0 : static_cast<double>(tokens_cropped) / static_cast<double>(used);
  }
  bool operator==(const PackingStats&) const = default;
};

class BosBestFitPacker {
 public:
  struct StreamDoc {
    int64_t doc = 0;
    int64_t length = 0;  // >= 1
  };
  using DocLookup = std::function<StreamDoc(int64_t position)>;

  BosBestFitPacker(int64_t row_capacity, int64_t buffer_docs, DocLookup lookup);

  // Puts the packer where a saved state left it: the next stream position to pull and the buffer's
  // documents in buffer order (their lengths are looked up again).
  void restore(int64_t next_position, std::span<const int64_t> buffered_positions, const PackingStats& stats);

  // Plans the next row into `segments` (cleared first): in row order, lengths summing to the capacity.
  void pack_row(std::vector<PackedSegment>& segments);

  int64_t row_capacity() const { return row_capacity_; }
  int64_t next_position() const { return next_position_; }
  std::span<const int64_t> buffered_positions() const { return positions_; }
  const PackingStats& stats() const { return stats_; }

 private:
  void refill();
  void remove(size_t index);

  int64_t row_capacity_;
  int64_t buffer_docs_;
  DocLookup lookup_;
  int64_t next_position_ = 0;
  // The buffer, in arrival order, as parallel arrays; fit_lengths_ holds min(length, INT32_MAX) so the scan
  // over it vectorises (a capacity is far below that, so the choice is the same).
  std::vector<int64_t> positions_;
  std::vector<int64_t> docs_;
  std::vector<int64_t> lengths_;
  std::vector<int32_t> fit_lengths_;
  PackingStats stats_;
};

}  // namespace nanoforge
