// Where a loader is in its data, small enough to store in every checkpoint (~8 KB with nanochat's 1000-doc
// buffer): the stream position of the next document to pull, the packer's buffer as stream positions, and
// the next global row. The shuffle is a pure function of (seed, epoch) and the packer is deterministic, so
// restoring a state into a fresh loader gives exactly the batches the saved one would have given next, for
// any world size. All ranks hold the same state at a step boundary; rank 0 saves it. Bytes (little-endian):
// "NFLOADER", uint32 format version (1), uint32 zero, then the int64 fields below (docs/data.md gives them).
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <span>
#include <vector>

#include "data/loader/bos_bestfit_packer.h"

namespace nanoforge {

struct LoaderState {
  static constexpr uint32_t kFormatVersion = 1;

  // What the state belongs to; restoring into a loader with other values is refused.
  uint64_t data_fingerprint = 0;  // ShardSet::fingerprint()
  int64_t data_doc_count = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  int64_t row_capacity = 0;  // T + 1
  int64_t doc_buffer_size = 0;

  // Where the stream is.
  int64_t next_global_row = 0;              // rows [0, next_global_row) of the global row stream are done
  int64_t next_stream_position = 0;         // the next document position the packer pulls
  std::vector<int64_t> buffered_positions;  // the packer's buffer, in buffer order
  PackingStats stats;                       // over rows [0, next_global_row)

  // The epoch of the next document to be pulled (documents still buffered may be from the one before).
  int64_t epoch() const { return data_doc_count == 0 ? 0 : next_stream_position / data_doc_count; }

  std::vector<uint8_t> to_bytes() const;
  // Checks the header, the version and the sizes; the values are checked against a loader by Loader.
  static absl::StatusOr<LoaderState> from_bytes(std::span<const uint8_t> bytes);

  bool operator==(const LoaderState&) const = default;
};

}  // namespace nanoforge
