// generate: one forward per new token over a sliding window of the last sequence_len tokens.
#include "eval/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/device_buffer.h"
#include "support/check.h"
#include "support/philox.h"

namespace nanoforge {
namespace {

// Index of the next token from one row of logits.
int32_t pick_token(std::vector<float>& logits, const SampleOptions& options, double uniform) {
  if (options.temperature <= 0) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  size_t candidates = order.size();
  if (options.top_k > 0 && static_cast<size_t>(options.top_k) < order.size()) {
    candidates = static_cast<size_t>(options.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(candidates), order.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  }
  double max_logit = -INFINITY;
  for (size_t i = 0; i < candidates; ++i)
    max_logit = std::max<double>(max_logit, logits[order[i]]);
  std::vector<double> weights(candidates);
  double total = 0;
  for (size_t i = 0; i < candidates; ++i) {
    weights[i] = std::exp((logits[order[i]] - max_logit) / options.temperature);
    total += weights[i];
  }
  double threshold = uniform * total;
  for (size_t i = 0; i < candidates; ++i) {
    threshold -= weights[i];
    if (threshold <= 0) return order[i];
  }
  return order[candidates - 1];
}

}  // namespace

std::vector<int32_t> generate(GPT& model, std::span<const int32_t> prompt, const SampleOptions& options) {
  NANOFORGE_CHECK(!prompt.empty(), "generate: the prompt needs at least one token (BOS)");
  const GPTConfig& config = model.config();
  const int64_t window = config.sequence_len;
  model.plan(1, window);
  std::vector<int32_t> tokens(prompt.begin(), prompt.end()), generated;
  std::vector<int32_t> ids(static_cast<size_t>(window)), targets(static_cast<size_t>(window), -1);
  // The model reads ids and targets on its own device: a GPU model gets a copy of each row.
  DeviceBuffer on_device(model.device(), model.device() == Device::kCpu ? 0 : 2 * window * 4);
  int32_t* device_ids = model.device() == Device::kCpu ? ids.data() : static_cast<int32_t*>(on_device.data());
  int32_t* device_targets = model.device() == Device::kCpu ? targets.data() : device_ids + window;
  const TensorView ids_view(device_ids, {1, window}, DType::kI32, model.device());
  const TensorView targets_view(device_targets, {1, window}, DType::kI32, model.device());
  if (model.device() != Device::kCpu) copy_from_host(targets_view, targets.data());
  const Philox rng(options.seed, Philox::stream_of("sample"));
  for (int64_t step = 0; step < options.max_tokens; ++step) {
    const int64_t context = std::min<int64_t>(static_cast<int64_t>(tokens.size()), window);
    std::copy(tokens.end() - context, tokens.end(), ids.begin());
    std::fill(ids.begin() + context, ids.end(), tokens.front());  // causal: later positions do not matter
    if (model.device() != Device::kCpu) copy_from_host(ids_view, ids.data());
    model.forward(ids_view, targets_view);
    std::vector<float> row = model.capped_logits(context - 1, 1);
    const int32_t next = pick_token(row, options, rng.uniform(static_cast<uint64_t>(step)));
    tokens.push_back(next);
    generated.push_back(next);
    if (options.on_token) options.on_token(next);
  }
  return generated;
}

const std::vector<const char*>& sample_prompts() {
  static const std::vector<const char*> prompts = {"The capital of France is",
                                                   "The chemical symbol of gold is",
                                                   "If yesterday was Friday, then tomorrow will be",
                                                   "The opposite of hot is",
                                                   "The planets of the solar system are:",
                                                   "My favorite color is",
                                                   "If 5*x + 3 = 13, then x is"};
  return prompts;
}

}  // namespace nanoforge
