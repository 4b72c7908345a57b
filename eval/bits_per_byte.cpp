// Bits per byte over the validation loader.
#include "eval/bits_per_byte.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "eval/token_batch_tensors.h"
#include "kernels/host_transfer.h"
#include "support/status.h"

namespace nanoforge {

double BitsPerByteSums::bits_per_byte() const {
  if (bytes == 0) return std::numeric_limits<double>::infinity();
  return nats / (std::numbers::ln2 * static_cast<double>(bytes));
}

void add_bits_per_byte(std::span<const float> token_losses, std::span<const int32_t> targets,
                       std::span<const int32_t> token_bytes, BitsPerByteSums& sums) {
  for (size_t n = 0; n < targets.size(); ++n) {
    if (targets[n] < 0) continue;
    const int32_t bytes = token_bytes[static_cast<size_t>(targets[n])];
    ++sums.tokens;
    if (bytes <= 0) continue;
    sums.nats += token_losses[n];
    sums.bytes += bytes;
  }
}

absl::StatusOr<BitsPerByteSums> evaluate_bits_per_byte(GPT& model, Loader& val_loader, int64_t steps,
                                                       std::span<const int32_t> token_bytes,
                                                       const std::function<void(int64_t done)>& progress) {
  NANOFORGE_RETURN_IF_ERROR(val_loader.rewind());
  BitsPerByteSums sums;
  TokenBatchTensors tensors(val_loader.options().batch_rows, val_loader.options().sequence_length,
                            model.device());
  for (int64_t step = 0; step < steps; ++step) {
    NANOFORGE_ASSIGN_OR_RETURN(const TokenBatch batch, val_loader.next());
    tensors.fill(batch);
    model.forward(tensors.ids(), tensors.targets());
    const std::vector<float> losses = download<float>(model.token_losses());
    add_bits_per_byte(losses, tensors.target_values(), token_bytes, sums);
    if (progress) progress(step + 1);
  }
  return sums;
}

absl::Status BitsPerByteSums::check_defined() const {
  if (bytes > 0) return absl::OkStatus();
  return absl::FailedPreconditionError(fmt::format(
      "the {} validation tokens evaluated hold no text bytes (every target is a special token: documents "
      "holding only BOS?), so bits per byte is undefined; check the validation shards",
      tokens));
}

}  // namespace nanoforge
