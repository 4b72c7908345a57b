// The collective-communication interface data parallelism is built on (PyTorch's ProcessGroup, in small): one
// process per device, `world_size` of them, each with a `rank`. Every collective is asynchronous — queued on
// the engine's own thread (MPI, CPU buffers) or CUDA stream (NCCL, GPU buffers), run in the order of calls on
// this rank; the returned CommWork waits for it. All ranks issue the same collectives in the same order with
// the same sizes; buffers stay the caller's, untouched until the work has been waited for. Engines
// (dist/*_communicator.*): single-process, MPI, NCCL. A watchdog turns a collective that makes no progress
// for `timeout_seconds` (a lost rank) into an error naming the ranks that did not arrive, instead of a hang.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/tensor.h"

namespace nanoforge {

enum class ReduceOp { kSum, kAverage };

// A queued collective. wait() blocks until it has completed (or failed) and returns its status; it may be
// called more than once. A default-constructed CommWork is already complete.
//
// wait_on_device() orders the device work queued after it on this rank's compute stream (the stream the
// kernels run on) after the collective, without blocking the host: on NCCL the compute stream waits for the
// collective's completion event, so a kernel that reads the collective's output may be queued at once.
// Engines with host buffers (MPI, single) have no device queue: there it is wait(). It returns an error at
// once only where the engine already knows of one; a collective that fails later shows in the next host
// wait().
class CommWork {
 public:
  struct State;
  CommWork() = default;
  explicit CommWork(std::shared_ptr<State> state) : state_(std::move(state)) {}
  absl::Status wait() const;
  absl::Status wait_on_device() const;
  bool done() const;

 private:
  std::shared_ptr<State> state_;
};

struct DistOptions {
  double timeout_seconds =
      300;  // a collective that makes no progress this long fails (recipe: dist.timeout_seconds)
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;           // rank among the processes on this machine (the GPU to use)
  virtual std::string engine_name() const = 0;  // "single", "mpi", "nccl"

  // In place: every rank's buffer becomes the sum (or average) of all ranks' buffers.
  virtual CommWork all_reduce(TensorView buffer, ReduceOp op) = 0;
  // input holds world_size equal chunks; rank r's output (input.numel() / world_size elements) becomes the
  // reduction of chunk r over all ranks.
  virtual CommWork reduce_scatter(TensorView input, TensorView output, ReduceOp op) = 0;
  // output holds world_size chunks of input.numel(); chunk r is rank r's input.
  virtual CommWork all_gather(TensorView input, TensorView output) = 0;
  // Every rank's buffer becomes root's.
  virtual CommWork broadcast(TensorView buffer, int root) = 0;
  // Blocks until every rank has reached it (with the same timeout).
  virtual absl::Status barrier() = 0;
};

}  // namespace nanoforge
