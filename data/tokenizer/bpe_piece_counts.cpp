// count_pieces: a bounded queue of document batches between the reading thread and the counting threads.
#include "data/tokenizer/bpe_piece_counts.h"

#include <absl/container/flat_hash_map.h>
#include <absl/strings/string_view.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace nanoforge {
namespace {

// Documents are handed to the counting threads in batches of about this many bytes.
constexpr size_t kBatchBytes = 1 << 20;

using PieceMap = absl::flat_hash_map<std::string, int64_t>;

class BatchQueue {
 public:
  explicit BatchQueue(size_t capacity) : capacity_(capacity) {}
  void push(std::vector<std::string> batch) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return batches_.size() < capacity_; });
    batches_.push_back(std::move(batch));
    not_empty_.notify_one();
  }
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
  }
  // False once the queue is closed and empty.
  bool pop(std::vector<std::string>& batch) {
    std::unique_lock lock(mutex_);
    not_empty_.wait(lock, [&] { return !batches_.empty() || closed_; });
    if (batches_.empty()) return false;
    batch = std::move(batches_.front());
    batches_.pop_front();
    not_full_.notify_one();
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<std::vector<std::string>> batches_;
  size_t capacity_;
  bool closed_ = false;
};

}  // namespace

std::string_view first_chars(std::string_view text, int64_t max_chars, int64_t& chars_taken) {
  int64_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (max_chars > 0 && chars == max_chars) {
        chars_taken = chars;
        return text.substr(0, i);
      }
      ++chars;
    }
  }
  chars_taken = chars;
  return text;
}

namespace {

// A counting thread: splits each text of each batch into pieces and counts them in its own map; returns
// the number of pieces.
int64_t count_batches(BatchQueue& queue, const PieceSplitter& splitter, PieceMap& map) {
  std::vector<std::string> batch;
  int64_t pieces = 0;
  while (queue.pop(batch)) {
    for (const std::string& text : batch) {
      splitter.for_each_piece(text, [&](std::string_view piece) {
        ++pieces;
        // This Abseil's heterogeneous lookup takes absl::string_view (not std::string_view).
        const absl::string_view key(piece.data(), piece.size());
        if (auto it = map.find(key); it != map.end()) {
          ++it->second;
        } else {
          map.emplace(std::string(piece), 1);
        }
      });
    }
  }
  return pieces;
}

void report_progress(const PieceCountOptions& options, const PieceCounts& result,
                     const DocumentReader& reader, std::chrono::steady_clock::time_point start,
                     bool finished) {
  if (!options.progress) return;
  PieceCountProgress progress;
  progress.documents = result.documents;
  progress.chars = result.chars;
  progress.file_bytes_read = reader.bytes_read();
  progress.file_bytes_total = reader.total_bytes();
  progress.max_chars = options.max_chars;
  progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.finished = finished;
  options.progress(progress);
}

// The reading thread: documents, each cut to doc_max_chars, in batches of kBatchBytes onto the queue, until
// the input ends, max_chars is passed or a read fails; result counts the documents, characters and bytes
// taken.
absl::Status read_batches(DocumentReader& reader, const PieceCountOptions& options, BatchQueue& queue,
                          PieceCounts& result, std::chrono::steady_clock::time_point start) {
  auto last_report = start;
  std::vector<std::string> batch;
  size_t batch_bytes = 0;
  Document document;
  absl::Status read_status;
  while (options.max_chars <= 0 || result.chars <= options.max_chars) {
    absl::StatusOr<bool> got = reader.next(document);
    if (!got.ok()) {
      read_status = got.status();
      break;
    }
    if (!*got) break;
    int64_t chars = 0;
    const std::string_view text = first_chars(document.text, options.doc_max_chars, chars);
    document.text.resize(text.size());
    result.documents += 1;
    result.chars += chars;
    result.bytes += static_cast<int64_t>(document.text.size());
    batch_bytes += document.text.size();
    batch.push_back(std::move(document.text));
    document.text = std::string();
    if (batch_bytes >= kBatchBytes) {
      queue.push(std::move(batch));
      batch = {};
      batch_bytes = 0;
      if (std::chrono::steady_clock::now() - last_report > std::chrono::seconds(1)) {
        last_report = std::chrono::steady_clock::now();
        report_progress(options, result, reader, start, false);
      }
    }
  }
  if (!batch.empty()) queue.push(std::move(batch));
  return read_status;
}

// Adds the threads' maps into the largest one, and that into result's pieces and counts.
void add_piece_maps(std::vector<PieceMap>& maps, const std::vector<int64_t>& piece_totals,
                    PieceCounts& result) {
  size_t largest = 0;
  for (size_t t = 1; t < maps.size(); ++t) {
    if (maps[t].size() > maps[largest].size()) largest = t;
  }
  PieceMap& total = maps[largest];
  for (size_t t = 0; t < maps.size(); ++t) {
    result.total_pieces += piece_totals[t];
    if (t == largest) continue;
    for (auto& [piece, count] : maps[t]) {
      total[piece] += count;
    }
    PieceMap().swap(maps[t]);
  }
  result.pieces.reserve(total.size());
  result.counts.reserve(total.size());
  for (auto& [piece, count] : total) {
    result.pieces.push_back(piece);
    result.counts.push_back(count);
  }
}

}  // namespace

absl::StatusOr<PieceCounts> count_pieces(DocumentReader& reader, const PieceSplitter& splitter,
                                         const PieceCountOptions& options) {
  const int threads = options.threads > 0
                          ? options.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  BatchQueue queue(2 * static_cast<size_t>(threads));
  std::vector<PieceMap> maps(threads);
  std::vector<int64_t> piece_totals(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] { piece_totals[t] = count_batches(queue, splitter, maps[t]); });
  }
  PieceCounts result;
  const auto start = std::chrono::steady_clock::now();
  const absl::Status read_status = read_batches(reader, options, queue, result, start);
  queue.close();
  for (std::thread& worker : workers)
    worker.join();
  if (!read_status.ok()) return read_status;
  report_progress(options, result, reader, start, true);
  add_piece_maps(maps, piece_totals, result);
  return result;
}

}  // namespace nanoforge
