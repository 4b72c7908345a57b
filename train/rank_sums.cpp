// RankSums: upload, all-reduce, download.
#include "train/rank_sums.h"

#include <algorithm>
#include <vector>

#include "kernels/host_transfer.h"

namespace nanoforge {

RankSums::RankSums(Communicator& communicator, Device device)
    : communicator_(communicator), device_(device), buffer_(device, kMaxValues * sizeof(double)) {}

absl::Status RankSums::sum_in_place(std::span<double> values) {
  if (communicator_.world_size() == 1) return absl::OkStatus();
  const TensorView scalars(buffer_.data(), {static_cast<int64_t>(values.size())}, DType::kF64, device_);
  upload<double>(scalars, values.data());
  NANOFORGE_RETURN_IF_ERROR(communicator_.all_reduce(scalars, ReduceOp::kSum).wait());
  const std::vector<double> summed = download<double>(scalars);
  std::copy(summed.begin(), summed.end(), values.begin());
  return absl::OkStatus();
}

}  // namespace nanoforge
