// nanochat's MuonAdamW for a data-parallel run, with ZeRO-1 sharding: every rank holds the full parameters
// and gradients, but updates — and keeps optimizer state for — only what it owns (optim/grad_buckets.h:
// chunks of the AdamW buckets, whole Muon matrices). During the backward pass of a step's last micro-batch
// each bucket is reduce-scattered as soon as its gradients are final; step() waits for each reduction in
// turn, updates the owned part and all-gathers it back, so every rank ends the step with the same parameters.
// With one rank the same code runs with local copies, and gives MuonAdamW's updates bit for bit.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "model/param_layout.h"
#include "optim/grad_buckets.h"
#include "optim/named_tensor.h"
#include "optim/optimizer_steps.h"
#include "optim/param_groups.h"
#include "optim/schedules.h"

namespace nanoforge {

class DataParallelOptimizer {
 public:
  // params and grads: the flat buffers (layout order), f32 (or f64 on the CPU); the state has their dtype,
  // Muon's scratch muon_scratch_dtype (bf16 on the GPU).
  DataParallelOptimizer(std::vector<ParamGroup> groups, const ParamLayout& layout, TensorView params,
                        TensorView grads, Communicator& communicator, int64_t bucket_bytes);

  // The device memory one rank's optimizer takes, measured without allocating anything.
  struct MemoryBytes {
    int64_t state = 0;              // this rank's moments and momentum buffers
    int64_t staging = 0;            // the gradient buckets, their owned chunks and the chunks sent back
    int64_t muon_scratch = 0;       // the orthogonalisation's matrices
    int64_t checkpoint_gather = 0;  // gather_state's scratch, allocated at the first checkpoint
  };
  static MemoryBytes memory_bytes(const std::vector<ParamGroup>& groups, Device device, DType param_dtype,
                                  int rank, int world_size, int64_t bucket_bytes);

  // From the backward pass of the step's last micro-batch: the gradients of [0, ready_elements) of the flat
  // buffer are final. Starts the reduction of every bucket that is now complete.
  void gradients_ready(int64_t ready_elements);
  // Starts what is left, then reduces, updates and gathers every bucket.
  absl::Status step(const ScheduleValues& schedule);

  const std::vector<ParamGroup>& groups() const { return groups_; }
  int64_t steps_taken() const { return steps_taken_; }
  int64_t state_bytes() const { return state_buffer_.bytes(); }  // this rank's optimizer state
  // The sum of squares of the averaged gradient this rank owned in the last step (each element is owned by
  // one rank: summed over ranks it is the squared global gradient norm).
  double last_owned_grad_squared_norm() const { return last_owned_grad_squared_norm_; }
  double last_exposed_seconds() const {
    return last_exposed_seconds_;
  }  // waiting on communication, last step
  std::string describe() const;

  // The optimizer state of every parameter as whole tensors, named as in checkpoints
  // ("/state/<name>/exp_avg", ...): collective — every rank must call it; the tensors are complete on rank 0.
  absl::Status gather_state(std::vector<NamedTensor>& out);
  // Restores the state from whole tensors: `read(dataset, numel)` returns a dataset's values on every rank
  // (the caller decides where they come from); each rank keeps its own pieces.
  absl::Status load_state(
      const std::function<absl::StatusOr<std::vector<float>>(const std::string&, int64_t)>& read,
      int64_t steps_taken);

 private:
  struct Piece {  // an elementwise bucket's tensor, as far as this rank owns it
    const ParamInfo* param = nullptr;
    const ParamGroup* group = nullptr;
    int64_t begin = 0, end = 0;  // within the tensor
    int64_t chunk_offset = 0;
    TensorView exp_avg, exp_avg_sq;  // (end - begin)
  };
  struct Bucket {
    GradBucket plan;
    std::vector<const ParamInfo*> params;         // tensors' parameters, packing order
    std::vector<const ParamGroup*> param_groups;  // the group of each
    TensorView staging, owned_grad, send;
    std::vector<Piece> pieces;           // elementwise: owned pieces
    const ParamGroup* group = nullptr;   // stacks: the Muon group
    TensorView momentum, second_moment;  // stacks: state of the owned matrix (when owned)
    CommWork reduce, gather;
    bool launched = false;
  };

  // The buckets of `groups` (their plans, tensors and groups; no memory yet).
  static std::vector<Bucket> make_buckets(const std::vector<ParamGroup>& groups, int world_size,
                                          int64_t bucket_bytes, int64_t element_bytes);
  // Takes every bucket's staging views and this rank's state from the two arenas.
  static void take_bucket_memory(std::vector<Bucket>& buckets, int rank, int world_size,
                                 ArenaAllocator& staging, ArenaAllocator& state);
  // gather_state's scratch: a whole bucket gathered, and one rank's chunk of it.
  static std::pair<TensorView, TensorView> take_gather_views(const std::vector<Bucket>& buckets,
                                                             int world_size, ArenaAllocator& arena);

  TensorView param_range(TensorView flat, const ParamInfo& info, int64_t begin, int64_t end) const;
  TensorView param_view(TensorView flat, const ParamInfo& info) const;
  void launch(Bucket& bucket);
  void update(Bucket& bucket, const ScheduleValues& schedule);
  void unpack(Bucket& bucket);

  std::vector<ParamGroup> groups_;
  const ParamLayout& layout_;
  TensorView params_, grads_;
  Communicator& communicator_;
  int rank_ = 0, world_ = 1;
  std::vector<Bucket> buckets_;
  size_t next_launch_ = 0;
  DeviceBuffer staging_buffer_, state_buffer_, scratch_buffer_;
  DeviceBuffer gather_buffer_;        // gather_state's scratch, allocated on its first call
  std::vector<float> gathered_host_;  // its host copy
  MuonScratch scratch_;
  int64_t steps_taken_ = 0;
  double last_exposed_seconds_ = 0;
  double last_owned_grad_squared_norm_ = 0;
};

}  // namespace nanoforge
