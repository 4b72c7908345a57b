// LoaderState to and from bytes: fixed little-endian fields after a magic and a version, so a checkpoint
// can hold the state as an opaque uint8 dataset and a later nanoforge can tell what it reads.
#include "data/loader/loader_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace nanoforge {
namespace {

constexpr char kMagic[8] = {'N', 'F', 'L', 'O', 'A', 'D', 'E', 'R'};
constexpr size_t kFixedFields = 15;  // int64 fields before the buffered positions
constexpr size_t kHeaderBytes = sizeof(kMagic) + 2 * sizeof(uint32_t);

// Appends raw bytes; the machines nanoforge runs on (x86-64, aarch64) are little-endian. (resize + memcpy
// rather than insert: GCC 12 warns falsely about insert into a reserved vector at -O3.)
void put(std::vector<uint8_t>& out, const void* value, size_t bytes) {
  const size_t at = out.size();
  out.resize(at + bytes);
  std::memcpy(out.data() + at, value, bytes);
}

void put64(std::vector<uint8_t>& out, int64_t value) {
  put(out, &value, sizeof(value));
}

int64_t get64(std::span<const uint8_t> bytes, size_t& offset) {
  int64_t value = 0;
  std::memcpy(&value, bytes.data() + offset, sizeof(value));
  offset += sizeof(value);
  return value;
}

}  // namespace

std::vector<uint8_t> LoaderState::to_bytes() const {
  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + 8 * (kFixedFields + buffered_positions.size()));
  put(out, kMagic, sizeof(kMagic));
  const uint32_t version = kFormatVersion, reserved = 0;
  put(out, &version, sizeof(version));
  put(out, &reserved, sizeof(reserved));
  for (int64_t value :
       {static_cast<int64_t>(data_fingerprint), data_doc_count, static_cast<int64_t>(seed), int64_t{shuffle},
        row_capacity, doc_buffer_size, next_global_row, next_stream_position, stats.rows, stats.tokens_packed,
        stats.tokens_cropped, stats.docs_whole, stats.docs_cropped, int64_t{0}}) {
    put64(out, value);
  }
  put64(out, static_cast<int64_t>(buffered_positions.size()));
  for (int64_t position : buffered_positions)
    put64(out, position);
  return out;
}

absl::StatusOr<LoaderState> LoaderState::from_bytes(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes + 8 * kFixedFields ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(
        fmt::format("not a loader state: {} bytes{}", bytes.size(),
                    bytes.size() >= sizeof(kMagic) ? " without the NFLOADER header" : " (too short)"));
  }
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + sizeof(kMagic), sizeof(version));
  if (version != kFormatVersion) {
    return absl::FailedPreconditionError(fmt::format(
        "loader state format version {}; this nanoforge reads version {}", version, kFormatVersion));
  }
  size_t offset = kHeaderBytes;
  LoaderState state;
  state.data_fingerprint = static_cast<uint64_t>(get64(bytes, offset));
  state.data_doc_count = get64(bytes, offset);
  state.seed = static_cast<uint64_t>(get64(bytes, offset));
  state.shuffle = get64(bytes, offset) != 0;
  state.row_capacity = get64(bytes, offset);
  state.doc_buffer_size = get64(bytes, offset);
  state.next_global_row = get64(bytes, offset);
  state.next_stream_position = get64(bytes, offset);
  state.stats.rows = get64(bytes, offset);
  state.stats.tokens_packed = get64(bytes, offset);
  state.stats.tokens_cropped = get64(bytes, offset);
  state.stats.docs_whole = get64(bytes, offset);
  state.stats.docs_cropped = get64(bytes, offset);
  get64(bytes, offset);  // reserved
  const int64_t buffered = get64(bytes, offset);
  // What every loader has (a row holds a token and its target at least), so that no message or comparison
  // computes with an absurd size.
  if (state.row_capacity < 2 || state.doc_buffer_size < 1) {
    return absl::DataLossError(fmt::format(
        "loader state: rows of {} tokens and a buffer of {} documents; every loader has rows of at "
        "least 2 and a buffer of at least 1 (corrupt state)",
        state.row_capacity, state.doc_buffer_size));
  }
  // Positions and counters no loader reaches (2^62 tokens is millions of times any corpus): a state that
  // claims them was damaged, and adding to them would overflow.
  constexpr int64_t kCountLimit = int64_t{1} << 62;
  for (const int64_t count :
       {state.next_global_row, state.next_stream_position, state.stats.rows, state.stats.tokens_packed,
        state.stats.tokens_cropped, state.stats.docs_whole, state.stats.docs_cropped}) {
    if (count < 0 || count >= kCountLimit) {
      return absl::DataLossError(fmt::format(
          "loader state: a position or count of {}; every loader's are between 0 and 2^62 (corrupt state)",
          count));
    }
  }
  // Compared with what follows the fields, never multiplied: a huge count must not wrap around.
  const size_t following = bytes.size() - offset;
  if (buffered < 0 || following % 8 != 0 || static_cast<uint64_t>(buffered) != following / 8) {
    return absl::DataLossError(
        fmt::format("loader state: its header announces {} buffered documents, but {} bytes ({} documents) "
                    "follow; truncated or corrupt",
                    buffered, following, following / 8));
  }
  state.buffered_positions.resize(static_cast<size_t>(buffered));
  for (int64_t& position : state.buffered_positions)
    position = get64(bytes, offset);
  return state;
}

}  // namespace nanoforge
