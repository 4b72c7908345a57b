// nanochat's packing loop written out plainly, as the reference the optimised packer
// (data/loader/bos_bestfit_packer.h) is checked against.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "data/loader/bos_bestfit_packer.h"

namespace nanoforge::testing {

// nanochat's loop (nanochat/dataloader.py) on document lengths, as plainly as it is written in Python: a list
// buffer refilled to `buffer_docs` before every pick, the largest fitting document (strict >, so the first
// among ties), else the shortest (min, so the first among ties) cropped. `length_at(position)` gives the
// stream; segments carry the stream position in `doc`.
template <class LengthAt>
std::vector<std::vector<PackedSegment>> reference_bestfit_rows(LengthAt length_at, int64_t capacity,
                                                               int64_t buffer_docs, int64_t rows) {
  std::vector<std::pair<int64_t, int64_t>> buffer;  // (position, length)
  int64_t next_position = 0;
  std::vector<std::vector<PackedSegment>> result;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<PackedSegment> row;
    int64_t pos = 0;
    while (pos < capacity) {
      while (static_cast<int64_t>(buffer.size()) < buffer_docs) {
        buffer.emplace_back(next_position, length_at(next_position));
        ++next_position;
      }
      const int64_t remaining = capacity - pos;
      int64_t best_index = -1, best_length = 0;
      for (size_t i = 0; i < buffer.size(); ++i) {
        if (buffer[i].second <= remaining && buffer[i].second > best_length) {
          best_index = static_cast<int64_t>(i);
          best_length = buffer[i].second;
        }
      }
      if (best_index >= 0) {
        row.push_back({buffer[best_index].first, buffer[best_index].first, best_length});
        buffer.erase(buffer.begin() + best_index);
        pos += best_length;
      } else {
        size_t shortest = 0;
        for (size_t i = 1; i < buffer.size(); ++i) {
          if (buffer[i].second < buffer[shortest].second) shortest = i;
        }
        row.push_back({buffer[shortest].first, buffer[shortest].first, remaining});
        buffer.erase(buffer.begin() + static_cast<std::ptrdiff_t>(shortest));
        pos += remaining;
      }
    }
    result.push_back(std::move(row));
  }
  return result;
}

}  // namespace nanoforge::testing
