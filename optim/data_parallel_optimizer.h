// nanochat's MuonAdamW for a data-parallel run, with ZeRO-1 sharding: every rank holds the full parameters
// and gradients, but updates — and keeps optimizer state for — only what it owns (optim/grad_buckets.h).
// Each bucket is reduce-scattered during the last micro-batch's backward as soon as its gradients are final;
// the step updates the owned part and all-gathers back what the forward reads (on the GPU the bf16 compute
// weights of the GEMM matrices), which the next forward waits for layer by layer (weights_needed). The fp32
// masters stay the optimizer's truth: sync_masters() makes the non-owned shards current (checkpoints call
// it). One rank runs the same code and gives MuonAdamW's updates bit for bit. The whole step, its one
// read-back and its bytes: docs/distributed.md, "The data-parallel step".
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
  // Where the forward reads the GEMM matrices when not from the masters: the model's bf16 compute copy
  // (GPT::compute_copy, compute_layout().copy_offset: per parameter in layout order, its element offset in
  // `buffer` or -1). Empty (the CPU, or a caller that refreshes the copy itself): everything is gathered
  // fp32.
  struct ComputeCopy {
    TensorView buffer;
    std::vector<int64_t> offsets;
  };

  // params and grads: the flat buffers (layout order), f32 (or f64 on the CPU); the state has their dtype,
  // Muon's scratch muon_scratch_dtype (bf16 on the GPU). Every buffer a step communicates through is
  // allocated here, once: a step allocates nothing.
  DataParallelOptimizer(std::vector<ParamGroup> groups, const ParamLayout& layout, TensorView params,
                        TensorView grads, Communicator& communicator, int64_t bucket_bytes,
                        ComputeCopy compute = {});

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
  // Starts what is left, waits for each reduction on the device, updates the owned part, then queues the
  // all-reduce of `step_sums` (f64 on the parameters' device, or empty: no norm) after adding this rank's
  // owned squared gradient norm to step_sums[0] — summed over ranks, the squared global gradient norm; the
  // caller's own per-rank values sit after it — and then the gathers. Returns the all-reduce: wait for it,
  // then read step_sums back (it does not wait for the gathers). The weights are complete only once the
  // next forward has waited for them (weights_needed) or finish_weights() has.
  absl::StatusOr<CommWork> start_step(const ScheduleValues& schedule, TensorView step_sums);
  // start_step without scalars, then finish_weights(): the whole step, the weights complete on return.
  absl::Status step(const ScheduleValues& schedule);
  // GPT's weights-needed hook: the forward is about to read the parameters of [from, total). Makes the
  // device wait for the gathers of every bucket that holds some of them and unpacks those buckets. A failure
  // is kept and returned by the next start_step or finish_weights.
  void weights_needed(int64_t from);
  // Every outstanding gather waited for (on the device) and unpacked.
  absl::Status finish_weights();
  // Collective: brings every rank's fp32 masters up to date (on the GPU the non-owned shards of the
  // bf16-gathered matrices are stale after a step), for whoever reads params() whole: checkpoints.
  absl::Status sync_masters();

  const std::vector<ParamGroup>& groups() const { return groups_; }
  int64_t steps_taken() const { return steps_taken_; }
  int64_t state_bytes() const { return state_buffer_.bytes(); }  // this rank's optimizer state
  // The host's time blocked on communication in the last step and the forward before it (the MPI engine; on
  // NCCL the device waits instead, and what is exposed there shows in the step time only).
  double last_exposed_seconds() const { return last_exposed_seconds_; }
  // The bytes of this rank's chunks in one step's all-gathers (each rank receives world_size - 1 times as
  // much); describe() prints it.
  int64_t gather_bytes_per_step() const;
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
    // Gathered as the compute copy (bf16 on the GPU): every tensor has one. Its views reuse the memory of
    // send and staging, which are idle by then.
    bool gathers_copy = false;
    std::vector<int64_t> copy_offsets;  // per tensor: its place in the compute copy, or -1
    TensorView send_copy, gathered_copy;
    std::vector<Piece> pieces;           // elementwise: owned pieces
    const ParamGroup* group = nullptr;   // stacks: the Muon group
    TensorView momentum, second_moment;  // stacks: state of the owned matrix (when owned)
    CommWork reduce, gather;
    bool launched = false;
  };

  // The buckets of `groups` (their plans, tensors and groups; no memory yet).
  // has_copy: whether the forward reads a parameter from the compute copy (such tensors and the others never
  // share an elementwise bucket, so that each bucket gathers one dtype).
  static std::vector<Bucket> make_buckets(const std::vector<ParamGroup>& groups, int world_size,
                                          int64_t bucket_bytes, int64_t element_bytes,
                                          const std::function<bool(const ParamInfo&)>& has_copy);
  // Takes every bucket's staging views and this rank's state from the two arenas.
  static void take_bucket_memory(std::vector<Bucket>& buckets, int rank, int world_size,
                                 ArenaAllocator& staging, ArenaAllocator& state);
  // gather_state's scratch: a whole bucket gathered, and one rank's chunk of it.
  static std::pair<TensorView, TensorView> take_gather_views(const std::vector<Bucket>& buckets,
                                                             int world_size, ArenaAllocator& arena);

  TensorView param_range(TensorView flat, const ParamInfo& info, int64_t begin, int64_t end) const;
  TensorView param_view(TensorView flat, const ParamInfo& info) const;
  void assign_compute_copy(Bucket& bucket);
  void launch(Bucket& bucket);
  void update(Bucket& bucket, const ScheduleValues& schedule);
  void gather(Bucket& bucket);
  void unpack(Bucket& bucket);
  absl::Status wait_on_device(const CommWork& work);  // timed into last_exposed_seconds_

  std::vector<ParamGroup> groups_;
  const ParamLayout& layout_;
  TensorView params_, grads_;
  ComputeCopy compute_;
  Communicator& communicator_;
  int rank_ = 0, world_ = 1;
  std::vector<Bucket> buckets_;  // in reduction order (backward); gathered and unpacked in reverse
  size_t next_launch_ = 0;
  size_t buckets_unpacked_ = 0;  // of the last step's gathers, counted from the back of buckets_
  absl::Status gather_failure_;  // the first failed wait of weights_needed, until reported
  bool masters_stale_ = false;   // non-owned shards of bf16-gathered matrices (sync_masters)
  DeviceBuffer staging_buffer_, state_buffer_, scratch_buffer_;
  DeviceBuffer gather_buffer_;        // gather_state's scratch, allocated on its first call
  std::vector<float> gathered_host_;  // its host copy
  MuonScratch scratch_;
  int64_t steps_taken_ = 0;
  double last_exposed_seconds_ = 0;
  double exposed_seconds_ = 0;  // since the last step
};

}  // namespace nanoforge
