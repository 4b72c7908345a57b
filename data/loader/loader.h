// The pretraining data loader: (B, T + 1) int32 token rows per rank (inputs row[:-1], targets row[1:]),
// packed with nanochat's BOS-aligned best fit (bos_bestfit_packer.h) from a ShardSet's documents in a
// seeded, epoch-wise shuffled order (loader_doc_order.h). Global row g belongs to rank g mod world_size, so a
// step consumes the same rows for any world size with the same world_size * B, and a state (loader_state.h)
// restores into another world size. A background thread fills a ring of buffers allocated once; next()
// hands out the oldest ready one. docs/data.md (The loader) gives the rules and the measurements.
#pragma once

#include <absl/status/statusor.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "data/loader/bos_bestfit_packer.h"
#include "data/loader/loader_doc_order.h"
#include "data/loader/loader_state.h"
#include "data/shards/shard_set.h"

namespace nanoforge {

// Limits on a batch (far above any training batch: nanochat's is 32 x 2049 tokens), checked by
// Loader::create before the ring is allocated.
inline constexpr int64_t kMaxRowTokens = int64_t{1} << 24;
inline constexpr int64_t kMaxBatchTokens = int64_t{1} << 28;

struct LoaderOptions {
  int64_t batch_rows = 0;       // B: rows per rank per batch
  int64_t sequence_length = 0;  // T: a row holds T + 1 tokens
  int64_t rank = 0;
  int64_t world_size = 1;
  uint64_t seed = 0;               // shuffle seed (the order of every epoch follows from it)
  bool shuffle = true;             // false: file order, for validation
  int64_t doc_buffer_size = 1000;  // nanochat's buffer_size for best fit
  int64_t ring_batches = 4;        // batch buffers: the one the consumer holds + those prefetched
};

// A view of one batch, valid until the next call to Loader::next().
struct TokenBatch {
  int64_t batch_rows = 0;
  int64_t sequence_length = 0;
  std::span<const int32_t> tokens;  // (B, T + 1) row-major
  int64_t first_global_row = 0;     // this batch's window of global rows starts here
  int64_t world_size = 1;
  int64_t rank = 0;

  std::span<const int32_t> row(int64_t b) const {
    return tokens.subspan(static_cast<size_t>(b * (sequence_length + 1)),
                          static_cast<size_t>(sequence_length + 1));
  }
  std::span<const int32_t> inputs(int64_t b) const {
    return row(b).first(static_cast<size_t>(sequence_length));
  }
  std::span<const int32_t> targets(int64_t b) const { return row(b).subspan(1); }
  // The global row index of row b.
  int64_t global_row(int64_t b) const {
    const int64_t first_own =
        first_global_row + ((rank - first_global_row) % world_size + world_size) % world_size;
    return first_own + b * world_size;
  }
};

struct LoaderWaitStats {
  int64_t batches = 0;            // handed out since the last start or restore
  double first_wait_seconds = 0;  // the first batch after a start or restore (the thread starts cold)
  int64_t waited_batches = 0;     // later batches for which next() had to wait
  double total_wait_seconds = 0;  // summed over the later batches
  double max_wait_seconds = 0;
};

class Loader {
 public:
  // Starts the prefetch thread at `resume` (checked against the data and options), or at the beginning.
  static absl::StatusOr<std::unique_ptr<Loader>> create(std::shared_ptr<const ShardSet> data,
                                                        const LoaderOptions& options,
                                                        const LoaderState* resume = nullptr);
  ~Loader();  // stops and joins the thread
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch of this rank. A data error (a token outside the vocabulary, a document without BOS) comes
  // back here, at the batch it would have spoiled, and again from every later call.
  absl::StatusOr<TokenBatch> next();

  // The state after the last batch next() returned (or the start state before any).
  LoaderState state() const;
  // Continues from `state` (checked like create's `resume`); batches prefetched so far are dropped, and the
  // batch next() returned last is no longer valid.
  absl::Status restore(const LoaderState& state);
  // Back to the state this loader was created with.
  absl::Status rewind() { return restore(initial_state_); }

  LoaderWaitStats wait_stats() const;
  const LoaderOptions& options() const { return options_; }
  const ShardSet& data() const { return *data_; }
  // The ring's buffers, (B, T + 1) int32 each, allocated once: a trainer may register them for DMA.
  std::vector<std::span<const int32_t>> ring_buffers() const;

 private:
  struct Slot {
    std::vector<int32_t> tokens;
    int64_t first_global_row = 0;
    LoaderState state_after;
    absl::Status status;
  };

  Loader(std::shared_ptr<const ShardSet> data, const LoaderOptions& options);
  absl::Status check_state(const LoaderState& state) const;
  LoaderState start_state() const;
  void start(const LoaderState& state);
  void stop();
  void produce_loop();
  absl::Status produce(Slot& slot);

  std::shared_ptr<const ShardSet> data_;
  LoaderOptions options_;
  LoaderState initial_state_;

  // Producer side (touched only by the thread while it runs).
  DocOrder order_;
  BosBestFitPacker packer_;
  int64_t next_global_row_ = 0;
  std::vector<PackedSegment> segments_;

  // Shared between the thread and the consumer, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable slot_freed_;
  std::condition_variable batch_ready_;
  std::vector<Slot> slots_;
  std::deque<size_t> free_slots_;
  std::deque<size_t> ready_slots_;
  bool stopping_ = false;
  std::thread thread_;

  // Consumer side.
  static constexpr size_t kNoSlot = static_cast<size_t>(-1);
  size_t held_slot_ = kNoSlot;
  LoaderState consumed_state_;
  absl::Status error_;
  LoaderWaitStats wait_stats_;
};

}  // namespace nanoforge
