// Scalars all ranks sum (the bits-per-byte sums, stop votes, the resume agreement): one f64 all-reduce for
// all of them, through a buffer on the run's device (the NCCL engine reduces GPU buffers only). A lost rank
// fails the all-reduce: that error is returned, for the program to exit with kCommFailureExitCode.
#pragma once

#include <absl/status/statusor.h>

#include <array>
#include <cstddef>
#include <span>

#include "dist/communicator.h"
#include "kernels/device_buffer.h"
#include "kernels/tensor.h"
#include "support/status.h"

namespace nanoforge {

class RankSums {
 public:
  static constexpr size_t kMaxValues = 3;  // the most scalars one sum adds up (the bits-per-byte sums)

  RankSums(Communicator& communicator, Device device);

  // `values` summed over every rank (one rank: as they are).
  template <size_t kCount>
  absl::StatusOr<std::array<double, kCount>> sum(std::array<double, kCount> values) {
    static_assert(kCount <= kMaxValues);
    NANOFORGE_RETURN_IF_ERROR(sum_in_place(values));
    return values;
  }

 private:
  absl::Status sum_in_place(std::span<double> values);

  Communicator& communicator_;
  Device device_;
  DeviceBuffer buffer_;  // kMaxValues f64 on the run's device
};

}  // namespace nanoforge
