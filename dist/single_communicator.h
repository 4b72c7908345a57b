// The world-size-1 engine: one process, nothing to communicate. all_reduce and broadcast leave the buffer as
// it is (the sum or average over one rank), reduce_scatter and all_gather copy input to output; every
// CommWork is complete when returned. Training code runs the same calls on 1 and N ranks.
#pragma once

#include "dist/communicator.h"

namespace nanoforge {

class SingleCommunicator final : public Communicator {
 public:
  explicit SingleCommunicator(Device device) : device_(device) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  std::string engine_name() const override { return "single"; }

  CommWork all_reduce(TensorView buffer, ReduceOp op) override;
  CommWork reduce_scatter(TensorView input, TensorView output, ReduceOp op) override;
  CommWork all_gather(TensorView input, TensorView output) override;
  CommWork broadcast(TensorView buffer, int root) override;
  absl::Status barrier() override { return absl::OkStatus(); }

 private:
  Device device_;
};

}  // namespace nanoforge
