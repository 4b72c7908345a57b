// DataParallelOptimizer: bucket set-up (ownership, state, staging, which buckets gather the compute copy),
// the reduce-scatter / update / all-gather of a step and the forward's waits for the gathers, and the
// state's gathering and loading for checkpoints.
#include "optim/data_parallel_optimizer.h"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <utility>

#include "kernels/host_transfer.h"
#include "kernels/ops.h"
#include "model/compute_weights.h"
#include "support/number_format.h"
#include "support/status.h"

namespace nanoforge {

std::vector<DataParallelOptimizer::Bucket> DataParallelOptimizer::make_buckets(
    const std::vector<ParamGroup>& groups, int world_size, int64_t bucket_bytes, int64_t element_bytes,
    const std::function<bool(const ParamInfo&)>& has_copy) {
  // Which group each parameter is in; the plan's input by place in the flat buffer.
  std::map<int64_t, std::pair<const ParamInfo*, const ParamGroup*>> by_offset;
  BucketPlanInput input;
  input.world_size = world_size;
  input.bucket_bytes = bucket_bytes;
  input.first_bucket_bytes = std::min<int64_t>(bucket_bytes, 1 << 20);
  input.element_bytes = element_bytes;
  std::vector<const ParamGroup*> muon_groups;
  for (const ParamGroup& group : groups) {
    if (group.kind == GroupKind::kMuon) {
      muon_groups.push_back(&group);
      input.matrix_groups.emplace_back();
    }
    for (const ParamInfo* info : group.params) {
      by_offset[info->offset] = {info, &group};
      const BucketTensor tensor{info->offset, info->numel, has_copy(*info) ? 1 : 0};
      (group.kind == GroupKind::kAdamW ? input.elementwise : input.matrix_groups.back()).push_back(tensor);
    }
  }
  std::vector<Bucket> buckets;
  for (const GradBucket& plan : plan_grad_buckets(input)) {
    Bucket bucket;
    bucket.plan = plan;
    for (const BucketTensor& tensor : plan.tensors) {
      const auto& [info, group] = by_offset.at(tensor.offset);
      bucket.params.push_back(info);
      bucket.param_groups.push_back(group);
    }
    if (plan.kind == GradBucket::Kind::kMatrixStack)
      bucket.group = muon_groups[static_cast<size_t>(plan.group)];
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

// Staging (the packed bucket, then the gathered updates), the owned gradient chunk and the chunk to send,
// and this rank's optimizer state.
void DataParallelOptimizer::take_bucket_memory(std::vector<Bucket>& buckets, int rank, int world_size,
                                               ArenaAllocator& staging, ArenaAllocator& state) {
  for (Bucket& bucket : buckets) {
    const int64_t chunk = bucket.plan.padded_elements / world_size;
    bucket.staging = staging.take({bucket.plan.padded_elements});
    bucket.owned_grad = staging.take({chunk});
    bucket.send = staging.take({chunk});
    bucket.pieces.clear();
    if (bucket.plan.kind == GradBucket::Kind::kElementwise) {
      for (size_t t = 0; t < bucket.params.size(); ++t) {
        const OwnedPiece owned = owned_piece(bucket.plan, t, rank, world_size);
        if (owned.tensor_begin == owned.tensor_end) continue;
        const int64_t numel = owned.tensor_end - owned.tensor_begin;
        Piece piece{bucket.params[t],   bucket.param_groups[t], owned.tensor_begin, owned.tensor_end,
                    owned.chunk_offset, state.take({numel}),    state.take({numel})};
        bucket.pieces.push_back(piece);
      }
    } else if (static_cast<size_t>(rank) < bucket.params.size()) {
      const ParamGroup& group = *bucket.group;
      bucket.momentum = state.take({group.rows, group.cols});
      bucket.second_moment =
          group.rows >= group.cols ? state.take({group.rows, 1}) : state.take({1, group.cols});
    }
  }
}

std::pair<TensorView, TensorView> DataParallelOptimizer::take_gather_views(const std::vector<Bucket>& buckets,
                                                                           int world_size,
                                                                           ArenaAllocator& arena) {
  int64_t largest = 0;
  for (const Bucket& bucket : buckets)
    largest = std::max(largest, bucket.plan.padded_elements);
  const TensorView gathered = arena.take({std::max<int64_t>(largest, 1)});
  return {gathered, arena.take({std::max<int64_t>(largest / world_size, 1)})};
}

DataParallelOptimizer::MemoryBytes DataParallelOptimizer::memory_bytes(const std::vector<ParamGroup>& groups,
                                                                       Device device, DType param_dtype,
                                                                       int rank, int world_size,
                                                                       int64_t bucket_bytes) {
  // The GPU model has compute copies of exactly its GEMM matrices (model/compute_weights.h).
  const auto has_copy = [device](const ParamInfo& info) {
    return device == Device::kCuda && is_gemm_matrix(info);
  };
  std::vector<Bucket> buckets =
      make_buckets(groups, world_size, bucket_bytes, dtype_bytes(param_dtype), has_copy);
  ArenaAllocator staging(device, param_dtype), state(device, param_dtype), scratch(device, param_dtype),
      gather(device, param_dtype);
  take_bucket_memory(buckets, rank, world_size, staging, state);
  take_muon_scratch_for(scratch, groups);
  take_gather_views(buckets, world_size, gather);
  return {state.used_bytes(), staging.used_bytes(), scratch.used_bytes(), gather.used_bytes()};
}

DataParallelOptimizer::DataParallelOptimizer(std::vector<ParamGroup> groups, const ParamLayout& layout,
                                             TensorView params, TensorView grads, Communicator& communicator,
                                             int64_t bucket_bytes, ComputeCopy compute)
    : groups_(std::move(groups)),
      layout_(layout),
      params_(params),
      grads_(grads),
      compute_(std::move(compute)),
      communicator_(communicator),
      rank_(communicator.rank()),
      world_(communicator.world_size()) {
  const auto copy_offset = [&](const ParamInfo& info) {
    if (compute_.buffer.data == nullptr) return int64_t{-1};
    return compute_.offsets[static_cast<size_t>(&info - layout_.params().data())];
  };
  buckets_ = make_buckets(groups_, world_, bucket_bytes, dtype_bytes(params.dtype),
                          [&](const ParamInfo& info) { return copy_offset(info) >= 0; });
  // Measured first, then carved out of the buffers.
  ArenaAllocator measure_staging(params.device, params.dtype), measure_state(params.device, params.dtype);
  take_bucket_memory(buckets_, rank_, world_, measure_staging, measure_state);
  staging_buffer_ = DeviceBuffer(params.device, measure_staging.used_bytes());
  state_buffer_ = DeviceBuffer(params.device, measure_state.used_bytes());
  ArenaAllocator staging(staging_buffer_, params.dtype), state(state_buffer_, params.dtype);
  take_bucket_memory(buckets_, rank_, world_, staging, state);
  ArenaAllocator measure_scratch(params.device, params.dtype);
  take_muon_scratch_for(measure_scratch, groups_);
  scratch_buffer_ = DeviceBuffer(params.device, measure_scratch.used_bytes());
  ArenaAllocator scratch(scratch_buffer_, params.dtype);
  scratch_ = take_muon_scratch_for(scratch, groups_);
  for (Bucket& bucket : buckets_) {
    for (const ParamInfo* info : bucket.params)
      bucket.copy_offsets.push_back(copy_offset(*info));
    assign_compute_copy(bucket);
  }
  buckets_unpacked_ = buckets_.size();  // nothing gathered yet
}

// A bucket whose every tensor has a compute copy gathers the copy itself: the owner converts its shard into
// the send chunk's memory, the gather lands in the staging memory, and unpacking is a copy.
void DataParallelOptimizer::assign_compute_copy(Bucket& bucket) {
  bucket.gathers_copy = !bucket.copy_offsets.empty();
  for (const int64_t offset : bucket.copy_offsets)
    bucket.gathers_copy = bucket.gathers_copy && offset >= 0;
  if (!bucket.gathers_copy) return;
  const DType dtype = compute_.buffer.dtype;
  NANOFORGE_CHECK(dtype_bytes(dtype) <= dtype_bytes(params_.dtype),
                  "the compute copy ({}) must not be wider than the parameters ({})", dtype_name(dtype),
                  dtype_name(params_.dtype));
  bucket.send_copy = TensorView(bucket.send.data, {bucket.send.numel()}, dtype, params_.device);
  bucket.gathered_copy = TensorView(bucket.staging.data, {bucket.staging.numel()}, dtype, params_.device);
}

int64_t DataParallelOptimizer::gather_bytes_per_step() const {
  int64_t bytes = 0;
  for (const Bucket& bucket : buckets_) {
    bytes += bucket.gathers_copy ? bucket.send_copy.bytes() : bucket.send.bytes();
  }
  return bytes;
}

TensorView DataParallelOptimizer::param_range(TensorView flat, const ParamInfo& info, int64_t begin,
                                              int64_t end) const {
  return flat.rows(info.offset + begin, end - begin);
}

TensorView DataParallelOptimizer::param_view(TensorView flat, const ParamInfo& info) const {
  return TensorView(flat.rows(info.offset, info.numel).data, std::span<const int64_t>(info.shape), flat.dtype,
                    flat.device);
}

std::string DataParallelOptimizer::describe() const {
  std::vector<GradBucket> plans;
  for (const Bucket& bucket : buckets_)
    plans.push_back(bucket.plan);
  return fmt::format(
      "{}; optimizer state on this rank {:.1f} MB, all-gathers {:.1f} MB per step (rank {} of {})",
      describe_buckets(plans, dtype_bytes(params_.dtype)), state_bytes() / 1e6,
      static_cast<double>(gather_bytes_per_step()) / 1e6, rank_, world_);
}

void DataParallelOptimizer::launch(Bucket& bucket) {
  // Pack the gradients: tensors one after another (elementwise), or one per slot (stacks); the padding stays
  // 0.
  int64_t at = 0;
  for (size_t t = 0; t < bucket.params.size(); ++t) {
    const ParamInfo& info = *bucket.params[t];
    if (bucket.plan.kind == GradBucket::Kind::kMatrixStack) at = static_cast<int64_t>(t) * info.numel;
    ops::copy(bucket.staging.rows(at, info.numel), grads_.rows(info.offset, info.numel));
    at += info.numel;
  }
  bucket.reduce = communicator_.reduce_scatter(bucket.staging, bucket.owned_grad, ReduceOp::kAverage);
  bucket.launched = true;
}

void DataParallelOptimizer::gradients_ready(int64_t ready_elements) {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].plan.ready_offset <= ready_elements) {
    launch(buckets_[next_launch_++]);
  }
}

void DataParallelOptimizer::update(Bucket& bucket, const ScheduleValues& schedule) {
  if (bucket.plan.kind == GradBucket::Kind::kElementwise) {
    for (const Piece& piece : bucket.pieces) {
      const int64_t length = piece.end - piece.begin;
      const TensorView param = param_range(params_, *piece.param, piece.begin, piece.end);
      adamw_step(param, bucket.owned_grad.rows(piece.chunk_offset, length), piece.exp_avg, piece.exp_avg_sq,
                 *piece.group, piece.group->initial_lr * schedule.lr_multiplier, steps_taken_);
      if (bucket.gathers_copy) {
        ops::convert(bucket.send_copy.rows(piece.chunk_offset, length), param);
      } else {
        ops::copy(bucket.send.rows(piece.chunk_offset, length), param);
      }
    }
  } else if (static_cast<size_t>(rank_) < bucket.params.size()) {
    const ParamInfo& info = *bucket.params[static_cast<size_t>(rank_)];
    const ParamGroup& group = *bucket.group;
    const TensorView param = param_view(params_, info);
    muon_step(param, bucket.owned_grad.reshaped({group.rows, group.cols}), bucket.momentum,
              bucket.second_moment, group, schedule, group.initial_lr * schedule.lr_multiplier, scratch_);
    if (bucket.gathers_copy) {
      ops::convert(bucket.send_copy, params_.rows(info.offset, info.numel));
    } else {
      ops::copy(bucket.send, params_.rows(info.offset, info.numel));
    }
  }
}

void DataParallelOptimizer::gather(Bucket& bucket) {
  bucket.gather = bucket.gathers_copy ? communicator_.all_gather(bucket.send_copy, bucket.gathered_copy)
                                      : communicator_.all_gather(bucket.send, bucket.staging);
  masters_stale_ = masters_stale_ || (bucket.gathers_copy && world_ > 1);
}

void DataParallelOptimizer::unpack(Bucket& bucket) {
  int64_t at = 0;
  for (size_t t = 0; t < bucket.params.size(); ++t) {
    const ParamInfo& info = *bucket.params[t];
    if (bucket.plan.kind == GradBucket::Kind::kMatrixStack) at = static_cast<int64_t>(t) * info.numel;
    const int64_t copy_offset = bucket.copy_offsets[t];
    if (bucket.gathers_copy) {
      ops::copy(compute_.buffer.rows(copy_offset, info.numel), bucket.gathered_copy.rows(at, info.numel));
    } else {
      ops::copy(params_.rows(info.offset, info.numel), bucket.staging.rows(at, info.numel));
      // A tensor with a copy in a bucket gathered fp32 (a Muon group mixing matrices with and without one).
      if (copy_offset >= 0) {
        ops::convert(compute_.buffer.rows(copy_offset, info.numel), params_.rows(info.offset, info.numel));
      }
    }
    at += info.numel;
  }
  bucket.launched = false;
}

absl::Status DataParallelOptimizer::wait_on_device(const CommWork& work) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = work.wait_on_device();
  exposed_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return status;
}

absl::StatusOr<CommWork> DataParallelOptimizer::start_step(const ScheduleValues& schedule,
                                                           TensorView step_sums) {
  NANOFORGE_RETURN_IF_ERROR(finish_weights());  // the previous step's, if no forward has waited for them
  gradients_ready(layout_.total_numel());
  ++steps_taken_;
  for (Bucket& bucket : buckets_) {
    NANOFORGE_RETURN_IF_ERROR(wait_on_device(bucket.reduce));
    if (step_sums.data != nullptr)
      ops::add_squared_norm(step_sums.rows(0, 1), bucket.owned_grad);  // padding is 0
    update(bucket, schedule);
  }
  next_launch_ = 0;
  // The scalars first: reading them back then waits for the updates, not for the gathers queued after.
  CommWork sums;
  if (step_sums.data != nullptr) sums = communicator_.all_reduce(step_sums, ReduceOp::kSum);
  // In forward order, as the next forward needs them.
  for (auto bucket = buckets_.rbegin(); bucket != buckets_.rend(); ++bucket)
    gather(*bucket);
  buckets_unpacked_ = 0;
  last_exposed_seconds_ = std::exchange(exposed_seconds_, 0.0);  // this forward's waits and this step's
  return sums;
}

absl::Status DataParallelOptimizer::step(const ScheduleValues& schedule) {
  NANOFORGE_RETURN_IF_ERROR(start_step(schedule, TensorView()).status());
  return finish_weights();
}

void DataParallelOptimizer::weights_needed(int64_t from) {
  while (buckets_unpacked_ < buckets_.size()) {
    Bucket& bucket = buckets_[buckets_.size() - 1 - buckets_unpacked_];
    if (bucket.plan.ready_offset <= from) break;  // every tensor of it lies before `from`
    if (absl::Status status = wait_on_device(bucket.gather); !status.ok() && gather_failure_.ok())
      gather_failure_ = status;
    unpack(bucket);
    ++buckets_unpacked_;
  }
}

absl::Status DataParallelOptimizer::finish_weights() {
  weights_needed(-1);
  return std::exchange(gather_failure_, absl::OkStatus());
}

absl::Status DataParallelOptimizer::sync_masters() {
  NANOFORGE_RETURN_IF_ERROR(finish_weights());  // the staging memory is the gathers' until then
  if (!masters_stale_) return absl::OkStatus();
  for (Bucket& bucket : buckets_) {
    if (!bucket.gathers_copy) continue;
    if (bucket.plan.kind == GradBucket::Kind::kElementwise) {
      for (const Piece& piece : bucket.pieces) {
        ops::copy(bucket.send.rows(piece.chunk_offset, piece.end - piece.begin),
                  param_range(params_, *piece.param, piece.begin, piece.end));
      }
    } else if (static_cast<size_t>(rank_) < bucket.params.size()) {
      const ParamInfo& info = *bucket.params[static_cast<size_t>(rank_)];
      ops::copy(bucket.send, params_.rows(info.offset, info.numel));
    }
    NANOFORGE_RETURN_IF_ERROR(communicator_.all_gather(bucket.send, bucket.staging).wait());
    int64_t at = 0;
    for (size_t t = 0; t < bucket.params.size(); ++t) {
      const ParamInfo& info = *bucket.params[t];
      if (bucket.plan.kind == GradBucket::Kind::kMatrixStack) at = static_cast<int64_t>(t) * info.numel;
      ops::copy(params_.rows(info.offset, info.numel), bucket.staging.rows(at, info.numel));
      at += info.numel;
    }
  }
  masters_stale_ = false;
  return absl::OkStatus();
}

absl::Status DataParallelOptimizer::gather_state(std::vector<NamedTensor>& out) {
  // `out` keeps its tensors from one checkpoint to the next (same names, same sizes): no allocation then.
  std::map<std::string, size_t> index;  // dataset -> position in out
  for (size_t i = 0; i < out.size(); ++i)
    index.emplace(out[i].dataset, i);
  auto tensor = [&](const std::string& dataset, std::vector<int64_t> shape,
                    int64_t numel) -> std::vector<float>& {
    auto [it, inserted] = index.emplace(dataset, out.size());
    if (inserted) out.push_back({dataset, {}, {}});
    NamedTensor& named = out[it->second];
    named.shape = std::move(shape);
    named.values.resize(static_cast<size_t>(numel));
    return named.values;
  };
  // Scratch big enough to gather any bucket (or a stack's second moments), allocated on the first call.
  if (gather_buffer_.bytes() == 0) {
    ArenaAllocator measure(params_.device, params_.dtype);
    take_gather_views(buckets_, world_, measure);
    gather_buffer_ = DeviceBuffer(params_.device, measure.used_bytes());
  }
  ArenaAllocator gather_arena(gather_buffer_, params_.dtype);
  const auto [gathered_all, send_all] = take_gather_views(buckets_, world_, gather_arena);
  std::vector<float>& values = gathered_host_;
  for (Bucket& bucket : buckets_) {
    const int64_t chunk = bucket.plan.padded_elements / world_;
    const TensorView gathered = gathered_all.rows(0, bucket.plan.padded_elements);
    const TensorView send = send_all.rows(0, chunk);
    if (bucket.plan.kind == GradBucket::Kind::kElementwise) {
      for (const char* key : {"exp_avg", "exp_avg_sq"}) {
        ops::fill(send, 0.0);
        for (const Piece& piece : bucket.pieces) {
          ops::copy(send.rows(piece.chunk_offset, piece.end - piece.begin),
                    std::string_view(key) == "exp_avg" ? piece.exp_avg : piece.exp_avg_sq);
        }
        if (absl::Status status = communicator_.all_gather(send, gathered).wait(); !status.ok())
          return status;
        if (rank_ != 0) continue;
        download_into(gathered, values);
        int64_t at = 0;
        for (const ParamInfo* info : bucket.params) {
          std::vector<float>& full = tensor("/state/" + info->name + "/" + key, info->shape, info->numel);
          std::copy(values.begin() + at, values.begin() + at + info->numel, full.begin());
          at += info->numel;
        }
      }
    } else {
      const ParamGroup& group = *bucket.group;
      const int64_t second_size = group.rows >= group.cols ? group.rows : group.cols;
      const std::vector<int64_t> second_shape = group.rows >= group.cols
                                                    ? std::vector<int64_t>{group.rows, 1}
                                                    : std::vector<int64_t>{1, group.cols};
      const bool owner = static_cast<size_t>(rank_) < bucket.params.size();
      for (const char* key : {"momentum_buffer", "second_momentum_buffer"}) {
        const bool momentum = std::string_view(key) == "momentum_buffer";
        const int64_t size = momentum ? group.rows * group.cols : second_size;
        const TensorView slot = send.rows(0, size);
        if (owner) {
          ops::copy(slot, (momentum ? bucket.momentum : bucket.second_moment).reshaped({size}));
        } else {
          ops::fill(slot, 0.0);
        }
        const TensorView all = gathered.rows(0, size * world_);
        if (absl::Status status = communicator_.all_gather(slot, all).wait(); !status.ok()) return status;
        if (rank_ != 0) continue;
        download_into(all, values);
        for (size_t k = 0; k < bucket.params.size(); ++k) {
          const ParamInfo& info = *bucket.params[k];
          std::vector<float>& full =
              tensor("/state/" + info.name + "/" + key, momentum ? info.shape : second_shape, size);
          std::copy(values.begin() + static_cast<int64_t>(k) * size,
                    values.begin() + static_cast<int64_t>(k + 1) * size, full.begin());
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status DataParallelOptimizer::load_state(
    const std::function<absl::StatusOr<std::vector<float>>(const std::string&, int64_t)>& read,
    int64_t steps_taken) {
  for (Bucket& bucket : buckets_) {
    if (bucket.plan.kind == GradBucket::Kind::kElementwise) {
      // Every rank reads every tensor of the bucket (the caller may broadcast them), keeping its own pieces.
      for (const ParamInfo* info : bucket.params) {
        for (const char* key : {"exp_avg", "exp_avg_sq"}) {
          absl::StatusOr<std::vector<float>> full = read("/state/" + info->name + "/" + key, info->numel);
          if (!full.ok()) return full.status();
          for (const Piece& piece : bucket.pieces) {
            if (piece.param != info) continue;
            upload(std::string_view(key) == "exp_avg" ? piece.exp_avg : piece.exp_avg_sq,
                   full->data() + piece.begin);
          }
        }
      }
    } else {
      const ParamGroup& group = *bucket.group;
      const int64_t second_size = group.rows >= group.cols ? group.rows : group.cols;
      for (size_t k = 0; k < bucket.params.size(); ++k) {
        const ParamInfo& info = *bucket.params[k];
        absl::StatusOr<std::vector<float>> momentum =
            read("/state/" + info.name + "/momentum_buffer", info.numel);
        if (!momentum.ok()) return momentum.status();
        absl::StatusOr<std::vector<float>> second =
            read("/state/" + info.name + "/second_momentum_buffer", second_size);
        if (!second.ok()) return second.status();
        if (k != static_cast<size_t>(rank_)) continue;
        upload(bucket.momentum, momentum->data());
        upload(bucket.second_moment, second->data());
      }
    }
  }
  steps_taken_ = steps_taken;
  return absl::OkStatus();
}

}  // namespace nanoforge
