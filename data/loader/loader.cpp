// Loader: state checks, the producer thread (plan every row of the window, copy this rank's rows), and the
// ring handoff. The ring is two queues of slot indices under one mutex; a slot is free, being filled by the
// thread, ready, or held by the consumer, and moves between them only under the mutex.
#include "data/loader/loader.h"

#include <fmt/format.h>

#include <chrono>

#include "support/status.h"

namespace nanoforge {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status check_options(const LoaderOptions& options) {
  if (options.batch_rows < 1 || options.sequence_length < 1) {
    return absl::InvalidArgumentError(fmt::format("loader: batch rows {} and sequence length {} must be >= 1",
                                                  options.batch_rows, options.sequence_length));
  }
  // The ring holds ring_batches x batch_rows x (sequence_length + 1) int32: refuse sizes no batch has
  // before allocating them.
  if (options.sequence_length >= kMaxRowTokens ||
      options.batch_rows > kMaxBatchTokens / (options.sequence_length + 1)) {
    return absl::InvalidArgumentError(
        fmt::format("loader: batch of {} rows x {} tokens exceeds the limits (rows of at most {} tokens, "
                    "batches of at most "
                    "{} tokens)",
                    options.batch_rows, options.sequence_length, kMaxRowTokens, kMaxBatchTokens));
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        fmt::format("loader: rank {} is not in [0, world size {})", options.rank, options.world_size));
  }
  if (options.doc_buffer_size < 1 || options.ring_batches < 2) {
    return absl::InvalidArgumentError(fmt::format("loader: document buffer {} must be >= 1 and ring {} >= 2",
                                                  options.doc_buffer_size, options.ring_batches));
  }
  return absl::OkStatus();
}

}  // namespace

Loader::Loader(std::shared_ptr<const ShardSet> data, const LoaderOptions& options)
    : data_(std::move(data)),
      options_(options),
      order_(data_->doc_count(), options.seed, options.shuffle),
      packer_(options.sequence_length + 1, options.doc_buffer_size, [this](int64_t position) {
        const int64_t doc = order_.doc_at(position);
        return BosBestFitPacker::StreamDoc{doc, data_->locate(doc).length};
      }) {
  slots_.resize(static_cast<size_t>(options.ring_batches));
  for (Slot& slot : slots_) {
    slot.tokens.assign(static_cast<size_t>(options.batch_rows * (options.sequence_length + 1)), 0);
    slot.state_after.buffered_positions.reserve(static_cast<size_t>(options.doc_buffer_size));
  }
  initial_state_ = start_state();
}

absl::StatusOr<std::unique_ptr<Loader>> Loader::create(std::shared_ptr<const ShardSet> data,
                                                       const LoaderOptions& options,
                                                       const LoaderState* resume) {
  if (data == nullptr || data->doc_count() == 0) return absl::InvalidArgumentError("loader: no documents");
  NANOFORGE_RETURN_IF_ERROR(check_options(options));
  std::unique_ptr<Loader> loader(new Loader(std::move(data), options));
  if (resume != nullptr) {
    NANOFORGE_RETURN_IF_ERROR(loader->check_state(*resume));
    loader->initial_state_ = *resume;
  }
  loader->start(loader->initial_state_);
  return loader;
}

Loader::~Loader() {
  stop();
}

LoaderState Loader::start_state() const {
  LoaderState state;
  state.data_fingerprint = data_->fingerprint();
  state.data_doc_count = data_->doc_count();
  state.seed = options_.seed;
  state.shuffle = options_.shuffle;
  state.row_capacity = options_.sequence_length + 1;
  state.doc_buffer_size = options_.doc_buffer_size;
  return state;
}

absl::Status Loader::check_state(const LoaderState& state) const {
  const LoaderState mine = start_state();
  if (state.data_fingerprint != mine.data_fingerprint || state.data_doc_count != mine.data_doc_count) {
    return absl::FailedPreconditionError(fmt::format(
        "loader state was saved for other data ({} documents, fingerprint {:#018x}); this loader reads {} "
        "(fingerprint {:#018x}): give the same shards as the run that saved it",
        state.data_doc_count, state.data_fingerprint, data_->describe(), mine.data_fingerprint));
  }
  if (state.seed != mine.seed || state.shuffle != mine.shuffle) {
    return absl::FailedPreconditionError(
        fmt::format("loader state was saved with seed {} ({}), this loader has seed {} ({}): the document "
                    "order would change",
                    state.seed, state.shuffle ? "shuffled" : "file order", mine.seed,
                    mine.shuffle ? "shuffled" : "file order"));
  }
  if (state.row_capacity != mine.row_capacity || state.doc_buffer_size != mine.doc_buffer_size) {
    return absl::FailedPreconditionError(fmt::format(
        "loader state was saved with sequence length {} and a {}-document buffer, this loader has {} and {}: "
        "the packing would change",
        state.row_capacity - 1, state.doc_buffer_size, mine.row_capacity - 1, mine.doc_buffer_size));
  }
  if (state.next_global_row < 0 || state.next_stream_position < 0 ||
      static_cast<int64_t>(state.buffered_positions.size()) > state.doc_buffer_size) {
    return absl::InvalidArgumentError(
        "loader state: negative positions or an oversized buffer (corrupt state)");
  }
  for (int64_t position : state.buffered_positions) {
    if (position < 0 || position >= state.next_stream_position) {
      return absl::InvalidArgumentError(
          fmt::format("loader state: buffered position {} is not before the next position {} (corrupt state)",
                      position, state.next_stream_position));
    }
  }
  return absl::OkStatus();
}

void Loader::start(const LoaderState& state) {
  packer_.restore(state.next_stream_position, state.buffered_positions, state.stats);
  next_global_row_ = state.next_global_row;
  consumed_state_ = state;
  error_ = absl::OkStatus();
  wait_stats_ = LoaderWaitStats{};
  held_slot_ = kNoSlot;
  free_slots_.clear();
  ready_slots_.clear();
  for (size_t i = 0; i < slots_.size(); ++i)
    free_slots_.push_back(i);
  stopping_ = false;
  thread_ = std::thread([this] { produce_loop(); });
}

void Loader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  slot_freed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status Loader::restore(const LoaderState& state) {
  NANOFORGE_RETURN_IF_ERROR(check_state(state));
  stop();
  start(state);
  return absl::OkStatus();
}

void Loader::produce_loop() {
  while (true) {
    size_t index = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      slot_freed_.wait(lock, [this] { return stopping_ || !free_slots_.empty(); });
      if (stopping_) return;
      index = free_slots_.front();
      free_slots_.pop_front();
    }
    Slot& slot = slots_[index];
    slot.status = produce(slot);
    const bool failed = !slot.status.ok();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_slots_.push_back(index);
    }
    batch_ready_.notify_one();
    if (failed) return;  // the consumer gets the error; nothing after it is produced
  }
}

absl::Status Loader::produce(Slot& slot) {
  const int64_t world_size = options_.world_size, rank = options_.rank;
  const int64_t row_tokens = options_.sequence_length + 1;
  const int64_t window_start = next_global_row_;
  const int64_t window_end = window_start + world_size * options_.batch_rows;
  slot.first_global_row = window_start;
  int64_t own_row = 0;
  for (int64_t global_row = window_start; global_row < window_end; ++global_row) {
    packer_.pack_row(segments_);
    if (global_row % world_size != rank) continue;
    int32_t* out = slot.tokens.data() + own_row * row_tokens;
    for (const PackedSegment& segment : segments_) {
      const ShardSet::DocLocation location = data_->locate(segment.doc);
      NANOFORGE_RETURN_IF_ERROR(
          data_->shard(location.shard).copy_document_prefix(location.doc, segment.length, out));
      out += segment.length;
    }
    ++own_row;
  }
  next_global_row_ = window_end;
  LoaderState& state = slot.state_after;
  state.data_fingerprint = data_->fingerprint();
  state.data_doc_count = data_->doc_count();
  state.seed = options_.seed;
  state.shuffle = options_.shuffle;
  state.row_capacity = row_tokens;
  state.doc_buffer_size = options_.doc_buffer_size;
  state.next_global_row = next_global_row_;
  state.next_stream_position = packer_.next_position();
  const std::span<const int64_t> buffered = packer_.buffered_positions();
  state.buffered_positions.assign(buffered.begin(), buffered.end());
  state.stats = packer_.stats();
  return absl::OkStatus();
}

absl::StatusOr<TokenBatch> Loader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (held_slot_ != kNoSlot) {
    free_slots_.push_back(held_slot_);
    held_slot_ = kNoSlot;
    slot_freed_.notify_one();
  }
  if (!error_.ok()) return error_;
  double waited_seconds = 0;
  if (ready_slots_.empty()) {
    const Clock::time_point begin = Clock::now();
    batch_ready_.wait(lock, [this] { return !ready_slots_.empty(); });
    waited_seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  }
  if (wait_stats_.batches == 0) {
    wait_stats_.first_wait_seconds = waited_seconds;
  } else if (waited_seconds > 0) {
    ++wait_stats_.waited_batches;
    wait_stats_.total_wait_seconds += waited_seconds;
    wait_stats_.max_wait_seconds = std::max(wait_stats_.max_wait_seconds, waited_seconds);
  }
  ++wait_stats_.batches;
  const size_t index = ready_slots_.front();
  ready_slots_.pop_front();
  Slot& slot = slots_[index];
  if (!slot.status.ok()) {
    error_ = slot.status;
    free_slots_.push_back(index);
    return error_;
  }
  held_slot_ = index;
  consumed_state_ = slot.state_after;
  TokenBatch batch;
  batch.batch_rows = options_.batch_rows;
  batch.sequence_length = options_.sequence_length;
  batch.tokens = slot.tokens;
  batch.first_global_row = slot.first_global_row;
  batch.world_size = options_.world_size;
  batch.rank = options_.rank;
  return batch;
}

LoaderState Loader::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return consumed_state_;
}

LoaderWaitStats Loader::wait_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return wait_stats_;
}

std::vector<std::span<const int32_t>> Loader::ring_buffers() const {
  std::vector<std::span<const int32_t>> buffers;
  for (const Slot& slot : slots_)
    buffers.emplace_back(slot.tokens);
  return buffers;
}

}  // namespace nanoforge
