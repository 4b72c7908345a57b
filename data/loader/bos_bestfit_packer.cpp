// Best-fit picks as two branch-free passes over the buffer's lengths (the largest length that fits, then the
// first index holding it), which the compiler vectorises; the buffer is ~1000 documents and a row takes a
// few picks, so planning a 2049-token row costs a few microseconds (docs/data.md).
#include "data/loader/bos_bestfit_packer.h"

#include <algorithm>
#include <climits>

#include "support/check.h"

namespace nanoforge {
namespace {

// Largest length <= limit, or 0 when none fits.
int32_t largest_fitting(const int32_t* lengths, size_t count, int32_t limit) {
  int32_t best = 0;
  for (size_t i = 0; i < count; ++i)
    best = std::max(best, lengths[i] <= limit ? lengths[i] : 0);
  return best;
}

int32_t shortest(const int32_t* lengths, size_t count) {
  int32_t best = INT32_MAX;
  for (size_t i = 0; i < count; ++i)
    best = std::min(best, lengths[i]);
  return best;
}

// First index holding `value` (count if none). Blocks of 64 are tested without branches (GCC vectorises this
// form; a plain early-exit loop it does not), and only the block with the hit is searched one by one.
size_t first_index_of(const int32_t* lengths, size_t count, int32_t value) {
  constexpr size_t kBlock = 64;
  size_t base = 0;
  for (; base + kBlock <= count; base += kBlock) {
    int32_t hits = 0;
    for (size_t j = 0; j < kBlock; ++j)
      hits |= lengths[base + j] == value ? 1 : 0;
    if (hits != 0) break;
  }
  for (size_t i = base; i < count; ++i) {
    if (lengths[i] == value) return i;
  }
  return count;
}

}  // namespace

BosBestFitPacker::BosBestFitPacker(int64_t row_capacity, int64_t buffer_docs, DocLookup lookup)
    : row_capacity_(row_capacity), buffer_docs_(buffer_docs), lookup_(std::move(lookup)) {
  NANOFORGE_CHECK(row_capacity >= 1 && row_capacity < INT32_MAX && buffer_docs >= 1,
                  "row capacity {} and buffer size {} must be >= 1", row_capacity, buffer_docs);
  positions_.reserve(static_cast<size_t>(buffer_docs));
  docs_.reserve(static_cast<size_t>(buffer_docs));
  lengths_.reserve(static_cast<size_t>(buffer_docs));
  fit_lengths_.reserve(static_cast<size_t>(buffer_docs));
}

void BosBestFitPacker::restore(int64_t next_position, std::span<const int64_t> buffered_positions,
                               const PackingStats& stats) {
  positions_.clear();
  docs_.clear();
  lengths_.clear();
  fit_lengths_.clear();
  for (int64_t position : buffered_positions) {
    const StreamDoc doc = lookup_(position);
    positions_.push_back(position);
    docs_.push_back(doc.doc);
    lengths_.push_back(doc.length);
    fit_lengths_.push_back(static_cast<int32_t>(std::min<int64_t>(doc.length, INT32_MAX)));
  }
  next_position_ = next_position;
  stats_ = stats;
}

void BosBestFitPacker::refill() {
  while (static_cast<int64_t>(positions_.size()) < buffer_docs_) {
    const StreamDoc doc = lookup_(next_position_);
    positions_.push_back(next_position_);
    docs_.push_back(doc.doc);
    lengths_.push_back(doc.length);
    fit_lengths_.push_back(static_cast<int32_t>(std::min<int64_t>(doc.length, INT32_MAX)));
    ++next_position_;
  }
}

void BosBestFitPacker::remove(size_t index) {
  positions_.erase(positions_.begin() + static_cast<std::ptrdiff_t>(index));
  docs_.erase(docs_.begin() + static_cast<std::ptrdiff_t>(index));
  lengths_.erase(lengths_.begin() + static_cast<std::ptrdiff_t>(index));
  fit_lengths_.erase(fit_lengths_.begin() + static_cast<std::ptrdiff_t>(index));
}

void BosBestFitPacker::pack_row(std::vector<PackedSegment>& segments) {
  segments.clear();
  int64_t filled = 0;
  while (filled < row_capacity_) {
    refill();
    const auto remaining = static_cast<int32_t>(row_capacity_ - filled);
    const size_t count = fit_lengths_.size();
    const int32_t best_length = largest_fitting(fit_lengths_.data(), count, remaining);
    if (best_length > 0) {
      const size_t index = first_index_of(fit_lengths_.data(), count, best_length);
      segments.push_back({positions_[index], docs_[index], lengths_[index]});
      filled += lengths_[index];
      ++stats_.docs_whole;
      remove(index);
    } else {
      // Nothing fits: crop the shortest document to the space left; the rest of it is discarded.
      const size_t index = first_index_of(fit_lengths_.data(), count, shortest(fit_lengths_.data(), count));
      segments.push_back({positions_[index], docs_[index], remaining});
      filled += remaining;
      stats_.tokens_cropped += lengths_[index] - remaining;
      ++stats_.docs_cropped;
      remove(index);
    }
  }
  ++stats_.rows;
  stats_.tokens_packed += row_capacity_;
}

}  // namespace nanoforge
