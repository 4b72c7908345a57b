// A communicator that moves nothing and tells a listener about every collective: what it is, how many bytes
// each rank sends, when it is issued and when the caller first waits for it. It stands for one rank of a
// world of any size in the performance model's recording of a training step (perf/), where the
// buffers are reserved address space that must never be touched.
#pragma once

#include <cstdint>
#include <string>

#include "dist/communicator.h"

namespace nanoforge {

enum class CollectiveKind { kAllReduce, kReduceScatter, kAllGather, kBroadcast };
const char* collective_name(CollectiveKind kind);  // "all_reduce", ... (NCCL's names)

struct CollectiveCall {
  int64_t id = 0;  // issue order, from 0
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int64_t bytes = 0;  // the full buffer: input of a reduce-scatter, output of an all-gather
  int world_size = 1;
};

class CollectiveListener {
 public:
  virtual ~CollectiveListener() = default;
  virtual void issued(const CollectiveCall& call) = 0;
  virtual void waited(int64_t id) = 0;  // the first wait (or done) on that call's work
};

class RecordingCommunicator final : public Communicator {
 public:
  RecordingCommunicator(int rank, int world_size, Device device, CollectiveListener& listener);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int local_rank() const override { return rank_; }
  std::string engine_name() const override { return "recording"; }

  CommWork all_reduce(TensorView buffer, ReduceOp op) override;
  CommWork reduce_scatter(TensorView input, TensorView output, ReduceOp op) override;
  CommWork all_gather(TensorView input, TensorView output) override;
  CommWork broadcast(TensorView buffer, int root) override;
  absl::Status barrier() override { return absl::OkStatus(); }

 private:
  CommWork issue(CollectiveKind kind, int64_t bytes);

  int rank_, world_size_;
  Device device_;
  CollectiveListener& listener_;
  int64_t next_id_ = 0;
};

}  // namespace nanoforge
