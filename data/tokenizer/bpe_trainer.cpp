// train_bpe: pieces become "words" (id sequences in one flat array, merged in place); pair counts live in a
// hash map keyed by (left << 32 | right); the heap orders (count desc, pair asc, job asc), where a job is a
// pair's list of word indices (sorted, without repeats). A word listed in a job may no longer hold the pair:
// merging it then changes nothing, as in rustbpe.
#include "data/tokenizer/bpe_trainer.h"

#include "data/tokenizer/tokenizer.h"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <queue>
#include <thread>

#include "support/check.h"

namespace nanoforge {
namespace {

using PairKey = uint64_t;
PairKey pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}

struct HeapEntry {
  int64_t count;
  PairKey pair;
  uint32_t job;  // index into the job lists
};

// std::priority_queue puts the "largest" first: higher count, then smaller pair, then smaller job.
struct HeapOrder {
  bool operator()(const HeapEntry& x, const HeapEntry& y) const {
    if (x.count != y.count) return x.count < y.count;
    if (x.pair != y.pair) return x.pair > y.pair;
    return x.job > y.job;
  }
};

struct Words {
  std::vector<int32_t> ids;       // all words' ids back to back
  std::vector<uint64_t> starts;   // word w's ids start at ids[starts[w]]
  std::vector<uint32_t> lengths;  // and are lengths[w] long (shrinks as pairs merge)
  std::vector<int64_t> counts;    // occurrences of the word's piece
};

Words make_words(const PieceCounts& counts) {
  Words words;
  const size_t n = counts.pieces.size();
  uint64_t total = 0;
  for (const std::string& piece : counts.pieces)
    total += piece.size();
  words.ids.reserve(total);
  words.starts.reserve(n);
  words.lengths.reserve(n);
  for (size_t w = 0; w < n; ++w) {
    words.starts.push_back(words.ids.size());
    words.lengths.push_back(static_cast<uint32_t>(counts.pieces[w].size()));
    for (const char c : counts.pieces[w])
      words.ids.push_back(static_cast<unsigned char>(c));
  }
  words.counts = counts.counts;
  return words;
}

struct InitialPairs {
  absl::flat_hash_map<PairKey, int64_t> counts;
  absl::flat_hash_map<PairKey, std::vector<uint32_t>> where;
};

// Counts the pairs of all words in parallel over contiguous word ranges; the per-range lists are joined in
// range order, so each pair's word list stays sorted.
InitialPairs count_initial_pairs(const Words& words, int threads) {
  const size_t n = words.lengths.size();
  threads = static_cast<int>(std::max<size_t>(1, std::min<size_t>(threads, n / 4096 + 1)));
  std::vector<InitialPairs> parts(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const size_t begin = n * t / threads, end = n * (t + 1) / threads;
      InitialPairs& part = parts[t];
      for (size_t w = begin; w < end; ++w) {
        const int32_t* ids = &words.ids[words.starts[w]];
        for (uint32_t i = 0; i + 1 < words.lengths[w]; ++i) {
          const PairKey key = pair_key(ids[i], ids[i + 1]);
          part.counts[key] += words.counts[w];
          std::vector<uint32_t>& list = part.where[key];
          if (list.empty() || list.back() != w) list.push_back(static_cast<uint32_t>(w));
        }
      }
    });
  }
  for (std::thread& worker : workers)
    worker.join();
  InitialPairs& total = parts[0];
  for (int t = 1; t < threads; ++t) {
    for (const auto& [key, count] : parts[t].counts)
      total.counts[key] += count;
    for (auto& [key, list] : parts[t].where) {
      std::vector<uint32_t>& into = total.where[key];
      into.insert(into.end(), list.begin(), list.end());
    }
    parts[t] = InitialPairs();  // free it before joining the next
  }
  return std::move(total);
}

using PairHeap = std::priority_queue<HeapEntry, std::vector<HeapEntry>, HeapOrder>;

// What the merge loop works on: each pair's current count, each heap entry's word list ("job"), the heap.
struct MergeQueue {
  absl::flat_hash_map<PairKey, int64_t> pair_counts;
  std::vector<std::vector<uint32_t>> jobs;
  PairHeap heap;
};

MergeQueue queue_initial_pairs(InitialPairs& initial) {
  MergeQueue queue;
  queue.pair_counts = std::move(initial.counts);
  std::vector<HeapEntry> heap_storage;
  queue.jobs.reserve(initial.where.size());
  heap_storage.reserve(initial.where.size());
  for (auto& [key, list] : initial.where) {
    const int64_t count = queue.pair_counts[key];
    if (count <= 0) continue;
    heap_storage.push_back({count, key, static_cast<uint32_t>(queue.jobs.size())});
    queue.jobs.push_back(std::move(list));
  }
  absl::flat_hash_map<PairKey, std::vector<uint32_t>>().swap(initial.where);
  queue.heap = PairHeap(HeapOrder(), std::move(heap_storage));
  return queue;
}

// The heap's top whose count is current and positive; a stale entry is requeued with its current count, a
// dead one dropped. nullopt once the heap is empty.
std::optional<HeapEntry> pop_pair_to_merge(MergeQueue& queue) {
  while (!queue.heap.empty()) {
    HeapEntry top = queue.heap.top();
    queue.heap.pop();
    const auto current = queue.pair_counts.find(top.pair);
    const int64_t count = current == queue.pair_counts.end() ? 0 : current->second;
    if (count <= 0) {
      std::vector<uint32_t>().swap(queue.jobs[top.job]);
      continue;
    }
    if (count != top.count) {  // stale: requeue with the current count
      top.count = count;
      queue.heap.push(top);
      continue;
    }
    return top;
  }
  return std::nullopt;
}

// The id of the token left+right: a new one, or the existing token with the same bytes (bpe_trainer.h).
int32_t merged_token(int32_t left, int32_t right, BpeTrainResult& result,
                     absl::flat_hash_map<std::string, int32_t>& token_ids) {
  std::string merged_bytes = result.tokens_by_rank[left] + result.tokens_by_rank[right];
  if (const auto existing = token_ids.find(merged_bytes); existing != token_ids.end()) {
    ++result.reused_merges;
    return existing->second;
  }
  const auto merged = static_cast<int32_t>(result.tokens_by_rank.size());
  token_ids.emplace(merged_bytes, merged);
  result.tokens_by_rank.push_back(std::move(merged_bytes));
  ++result.merges;
  return merged;
}

// Replaces left,right by `merged` in each word of the job, updating the pair counts; the pairs the merge
// creates are listed in new_where with their words.
void merge_in_words(const std::vector<uint32_t>& job, int32_t left, int32_t right, int32_t merged,
                    Words& words, absl::flat_hash_map<PairKey, int64_t>& pair_counts,
                    absl::flat_hash_map<PairKey, std::vector<uint32_t>>& new_where) {
  auto add = [&](int32_t a, int32_t b, int64_t delta) { pair_counts[pair_key(a, b)] += delta; };
  auto add_new = [&](int32_t a, int32_t b, int64_t delta, uint32_t word) {
    const PairKey key = pair_key(a, b);
    pair_counts[key] += delta;
    std::vector<uint32_t>& list = new_where[key];
    if (list.empty() || list.back() != word) list.push_back(word);
  };
  for (const uint32_t w : job) {
    int32_t* ids = &words.ids[words.starts[w]];
    const uint32_t n = words.lengths[w];
    const int64_t c = words.counts[w];
    uint32_t write = 0;
    for (uint32_t i = 0; i < n;) {
      if (i + 1 < n && ids[i] == left && ids[i + 1] == right) {
        if (write > 0) {
          add(ids[write - 1], left, -c);
          add_new(ids[write - 1], merged, c, w);
        }
        add(left, right, -c);
        if (i + 2 < n) {
          add(right, ids[i + 2], -c);
          add_new(merged, ids[i + 2], c, w);
        }
        ids[write++] = merged;
        i += 2;
      } else {
        ids[write++] = ids[i++];
      }
    }
    words.lengths[w] = write;
  }
}

// New jobs in pair order, so that job numbers (the last tie-break) do not depend on hash order.
void queue_new_pairs(absl::flat_hash_map<PairKey, std::vector<uint32_t>>& new_where, MergeQueue& queue) {
  std::vector<PairKey> new_pairs;
  new_pairs.reserve(new_where.size());
  for (const auto& [key, list] : new_where)
    new_pairs.push_back(key);
  std::sort(new_pairs.begin(), new_pairs.end());
  for (const PairKey key : new_pairs) {
    const int64_t new_count = queue.pair_counts[key];
    if (new_count <= 0) continue;
    queue.heap.push({new_count, key, static_cast<uint32_t>(queue.jobs.size())});
    queue.jobs.push_back(std::move(new_where[key]));
  }
}

void report_progress(const BpeTrainOptions& options, const BpeTrainResult& result, int64_t last_count,
                     std::chrono::steady_clock::time_point start, bool finished) {
  if (!options.progress) return;
  MergeProgress progress;
  progress.merges_done = result.merges;
  progress.num_merges = options.num_merges;
  progress.last_count = last_count;
  progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.finished = finished;
  options.progress(progress);
}

}  // namespace

BpeTrainResult train_bpe(const PieceCounts& counts, const BpeTrainOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const int threads = options.threads > 0
                          ? options.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  BpeTrainResult result;
  for (int byte = 0; byte < 256; ++byte)
    result.tokens_by_rank.emplace_back(1, static_cast<char>(byte));
  absl::flat_hash_map<std::string, int32_t> token_ids;
  for (int byte = 0; byte < 256; ++byte)
    token_ids.emplace(result.tokens_by_rank[byte], byte);

  Words words = make_words(counts);
  InitialPairs initial = count_initial_pairs(words, threads);
  MergeQueue queue = queue_initial_pairs(initial);
  result.initial_pairs = static_cast<int64_t>(queue.pair_counts.size());

  auto last_report = start;
  absl::flat_hash_map<PairKey, std::vector<uint32_t>> new_where;  // this round's new pairs -> words
  int64_t last_count = 0;
  while (result.merges < options.num_merges) {
    const std::optional<HeapEntry> top = pop_pair_to_merge(queue);
    if (!top) break;
    const auto left = static_cast<int32_t>(top->pair >> 32);
    const auto right = static_cast<int32_t>(top->pair & 0xffffffffu);
    if (static_cast<int64_t>(result.tokens_by_rank[left].size() + result.tokens_by_rank[right].size()) >
        Tokenizer::kMaxTokenBytes) {
      // Never merged: a token may hold at most kMaxTokenBytes (the pair comes back only if its count grows).
      ++result.skipped_long_pairs;
      std::vector<uint32_t>().swap(queue.jobs[top->job]);
      continue;
    }
    const int32_t merged = merged_token(left, right, result, token_ids);
    last_count = top->count;
    new_where.clear();
    merge_in_words(queue.jobs[top->job], left, right, merged, words, queue.pair_counts, new_where);
    std::vector<uint32_t>().swap(queue.jobs[top->job]);
    queue_new_pairs(new_where, queue);
    if (std::chrono::steady_clock::now() - last_report > std::chrono::seconds(1)) {
      last_report = std::chrono::steady_clock::now();
      report_progress(options, result, last_count, start, false);
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report_progress(options, result, last_count, start, true);
  return result;
}

}  // namespace nanoforge
