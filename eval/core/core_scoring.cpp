// CoreScorer::score: builds the padded (rows, T) ids and span targets, runs the forward pass and reads the
// per-token losses (multiple choice, schema) or the span's logits (language modelling).
#include "eval/core/core_scoring.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/host_transfer.h"
#include "support/check.h"

namespace nanoforge {
namespace {

constexpr int64_t kLengthBucket = 64;  // rows are padded to a multiple of this (fewer re-plans)

}  // namespace

CoreOutcome CoreScorer::score(CoreTaskType type, const CoreSequences& sequences, int64_t gold) {
  const int64_t rows = static_cast<int64_t>(sequences.tokens.size());
  int64_t longest = 2;
  for (const std::vector<int32_t>& row : sequences.tokens)
    longest = std::max<int64_t>(longest, static_cast<int64_t>(row.size()));
  const int64_t limit = model_.config().max_positions();
  NANOFORGE_CHECK(longest <= limit, "CoreScorer: a row of {} tokens exceeds the model's {} positions",
                  longest, limit);
  const int64_t seq = std::min(limit, (longest + kLengthBucket - 1) / kLengthBucket * kLengthBucket);
  const int32_t pad = sequences.tokens[0][0];  // BOS, nanochat's pad token
  ids_.assign(static_cast<size_t>(rows * seq), pad);
  targets_.assign(static_cast<size_t>(rows * seq), -1);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int32_t>& row = sequences.tokens[static_cast<size_t>(r)];
    std::copy(row.begin(), row.end(), ids_.begin() + r * seq);
    // The loss at position t scores token t + 1: the span [start, end) is scored at [start - 1, end - 1).
    for (int64_t t = std::max<int64_t>(sequences.start[r], 1); t < sequences.end[r]; ++t)
      targets_[static_cast<size_t>(r * seq + t - 1)] = row[static_cast<size_t>(t)];
  }
  model_.plan(rows, seq);
  const Device device = model_.device();
  TensorView ids(ids_.data(), {rows, seq}, DType::kI32, Device::kCpu);
  TensorView targets(targets_.data(), {rows, seq}, DType::kI32, Device::kCpu);
  if (device != Device::kCpu) {
    const int64_t bytes = 2 * rows * seq * static_cast<int64_t>(sizeof(int32_t));
    if (device_rows_.bytes() < bytes) device_rows_ = DeviceBuffer(device, bytes);
    int32_t* base = static_cast<int32_t*>(device_rows_.data());
    ids = TensorView(base, {rows, seq}, DType::kI32, device);
    targets = TensorView(base + rows * seq, {rows, seq}, DType::kI32, device);
    copy_from_host(ids, ids_.data());
    copy_from_host(targets, targets_.data());
  }
  model_.forward(ids, targets);

  CoreOutcome outcome;
  if (type == CoreTaskType::kLanguageModeling) {
    const int64_t start = sequences.start[0], end = sequences.end[0];
    const std::vector<float> logits = model_.capped_logits(start - 1, end - start);
    const size_t vocab = logits.size() / static_cast<size_t>(end - start);
    outcome.correct = true;
    for (int64_t t = start; t < end; ++t) {
      const auto row =
          logits.begin() + static_cast<std::ptrdiff_t>((t - start) * static_cast<int64_t>(vocab));
      const int64_t predicted = std::max_element(row, row + static_cast<std::ptrdiff_t>(vocab)) - row;
      outcome.correct = outcome.correct && predicted == sequences.tokens[0][static_cast<size_t>(t)];
    }
    return outcome;
  }
  const std::vector<float> losses = download<float>(model_.token_losses());
  for (int64_t r = 0; r < rows; ++r) {
    // An empty span (start == end, or start == 0 where Python's slice from -1 is empty) is NaN, as torch's
    // mean of nothing.
    const int64_t start = sequences.start[r], end = sequences.end[r];
    double sum = 0;
    for (int64_t t = start; t < end; ++t)
      sum += losses[static_cast<size_t>(r * seq + t - 1)];
    outcome.mean_losses.push_back(start >= 1 && end > start ? sum / static_cast<double>(end - start)
                                                            : std::numeric_limits<double>::quiet_NaN());
  }
  // Python's min() keeps the first element unless a later one is strictly smaller (a NaN never is).
  int64_t chosen = 0;
  for (int64_t r = 1; r < rows; ++r) {
    if (outcome.mean_losses[r] < outcome.mean_losses[chosen]) chosen = r;
  }
  outcome.chosen = chosen;
  outcome.correct = chosen == gold;
  return outcome;
}

}  // namespace nanoforge
