// The data-parallel step under mpirun with 2 ranks (CPU: the MPI engine; GPU: NCCL, on two emulated GPUs
// where there is none) must give, bit for bit, what one rank gives stepping with the ranks' averaged
// gradient: the loss of every next forward and the weights (docs/distributed.md says why it can).
// A forward layer that reads its weights without waiting for their gather is caught with a communicator
// that issues each all-gather only when it is waited for: through it the run must still match, and with
// its waits dropped it must not — the proof that the comparison sees a missing wait.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dist/comm_work_state.h"
#include "dist/create_communicator.h"
#include "dist/single_communicator.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/device_buffer.h"
#include "kernels/host_transfer.h"
#include "kernels/ops.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "optim/param_groups.h"

namespace nanoforge {
namespace {

constexpr int64_t kBatch = 2, kSeq = 32, kVocab = 300, kSteps = 3;
constexpr int64_t kBucketBytes = 16 << 10;  // several buckets for this small model

GPTConfig small_model() {
  // Four layers: Muon stacks of two matrices (one per rank) and per-layer waits that matter.
  return GPTConfig::from_sizing(
      {.depth = 4, .aspect_ratio = 32, .head_dim = 64, .max_seq_len = 64, .window_pattern = "SL"}, kVocab);
}

std::vector<ParamGroup> groups_of(const GPTConfig& config, const ParamLayout& layout) {
  return nanochat_param_groups(config, layout, OptimizerHyperparameters{}, 1.0, 0.1);
}

// Issues each all-gather only when it is waited for or when another collective is queued (keeping the
// order every rank issues collectives in), so a gather's output is stale until someone has waited for it.
// honour_device_waits = false: wait_on_device returns at once — a caller that relies on it reads stale data.
class DeferredGathers final : public Communicator {
 public:
  DeferredGathers(Communicator& inner, bool honour_device_waits)
      : inner_(inner), honour_device_waits_(honour_device_waits) {}

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  int local_rank() const override { return inner_.local_rank(); }
  std::string engine_name() const override { return "deferred " + inner_.engine_name(); }

  CommWork all_reduce(TensorView buffer, ReduceOp op) override {
    flush();
    return inner_.all_reduce(buffer, op);
  }
  CommWork reduce_scatter(TensorView input, TensorView output, ReduceOp op) override {
    flush();
    return inner_.reduce_scatter(input, output, op);
  }
  CommWork broadcast(TensorView buffer, int root) override {
    flush();
    return inner_.broadcast(buffer, root);
  }
  absl::Status barrier() override {
    flush();
    return inner_.barrier();
  }
  CommWork all_gather(TensorView input, TensorView output) override {
    auto gather = std::make_shared<Deferred>(Deferred{input, output, {}});
    pending_.push_back(gather);
    auto state = std::make_shared<CommWork::State>("deferred all_gather");
    state->device_poll = [this, gather]() -> std::optional<absl::Status> {
      flush();
      return gather->work.wait();
    };
    state->device_wait = [this, gather]() -> absl::Status {
      if (!honour_device_waits_) return absl::OkStatus();
      flush();
      return gather->work.wait_on_device();
    };
    return CommWork(state);
  }

 private:
  struct Deferred {
    TensorView input, output;
    CommWork work;
  };
  void flush() {
    for (const std::shared_ptr<Deferred>& gather : pending_)
      gather->work = inner_.all_gather(gather->input, gather->output);
    pending_.clear();
  }

  Communicator& inner_;
  const bool honour_device_waits_;
  std::vector<std::shared_ptr<Deferred>> pending_;
};

// Rank r's micro-batch of step s (one target ignored, so the loss kernel's count of valid targets is not
// B*T).
struct MicroBatch {
  DeviceBuffer ids, targets;
};

MicroBatch micro_batch(int rank, int64_t step, Device device) {
  std::vector<int32_t> ids(kBatch * kSeq), targets(kBatch * kSeq);
  for (int64_t i = 0; i < kBatch * kSeq; ++i) {
    ids[static_cast<size_t>(i)] = static_cast<int32_t>((17 * (rank + 1) + 7 * i + 13 * step) % kVocab);
    targets[static_cast<size_t>(i)] = static_cast<int32_t>((5 * (rank + 2) + 11 * i + 3 * step) % kVocab);
  }
  targets[3] = -1;
  MicroBatch batch{DeviceBuffer(device, kBatch * kSeq * 4), DeviceBuffer(device, kBatch * kSeq * 4)};
  upload<int32_t>(TensorView(batch.ids.data(), {kBatch, kSeq}, DType::kI32, device), ids.data());
  upload<int32_t>(TensorView(batch.targets.data(), {kBatch, kSeq}, DType::kI32, device), targets.data());
  return batch;
}

TensorView ids_of(const MicroBatch& batch, Device device) {
  return TensorView(batch.ids.data(), {kBatch, kSeq}, DType::kI32, device);
}
TensorView targets_of(const MicroBatch& batch, Device device) {
  return TensorView(batch.targets.data(), {kBatch, kSeq}, DType::kI32, device);
}

enum class Transport { kPlain, kDeferred, kDeferredWithoutWaits };

struct Case {
  Device device;
  Transport transport;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const char* transport = info.param.transport == Transport::kPlain      ? "Plain"
                          : info.param.transport == Transport::kDeferred ? "DeferredGathers"
                                                                         : "DeferredGathersWaitsDropped";
  return std::string(info.param.device == Device::kCpu ? "Cpu" : "Cuda") + transport;
}

// What a run ends with: the loss of every forward after the first, and the weights the forward reads.
struct Outcome {
  std::vector<double> losses;
  std::vector<float> masters;
  std::vector<float> compute;  // the GPU's bf16 copy, widened (empty on the CPU)
};

// Why a case cannot run here, if it cannot.
std::optional<std::string> reason_to_skip(const Case& c) {
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (world == nullptr || std::string(world) != "2") return "run under mpirun -n 2";
  if (c.device == Device::kCuda && (!cuda::available() || cuda::device_count() < 2)) return "two GPUs needed";
#if defined(__SANITIZE_THREAD__)
  // Without its waits the last step's gathers are still writing while the next backward packs gradients into
  // the same memory: the race this case exists to show, which ThreadSanitizer rightly reports.
  if (c.transport == Transport::kDeferredWithoutWaits) return "races on purpose";
#endif
  return std::nullopt;
}

void prepare(GPT& model) {
  model.set_kernel_settings({.deterministic = true});  // the same gradient bits in both (no atomics' order)
  model.init_weights(7);
  model.refresh_compute_weights();
  model.plan(kBatch, kSeq);
}

// The weights a run ends with: its fp32 masters and (GPU) its bf16 compute copy, widened.
void record_weights(GPT& model, Device device, Outcome& outcome) {
  outcome.masters = download<float>(model.params());
  if (device != Device::kCuda) return;
  DeviceBuffer wide(device, model.compute_copy().numel() * 4);
  const TensorView widened(wide.data(), {model.compute_copy().numel()}, DType::kF32, device);
  ops::convert(widened, model.compute_copy());
  outcome.compute = download<float>(widened);
}

// The run under test: optimizer state sharded over the ranks, the forward waiting for each layer's gathers.
class ShardedRun {
 public:
  ShardedRun(const GPTConfig& config, Device device, DType dtype, Communicator& comm)
      : device_(device),
        model_(config, device, dtype),
        sums_buffer_(device, 2 * sizeof(double)),
        sums_(sums_buffer_.data(), {2}, DType::kF64, device) {
    prepare(model_);
    optimizer_.emplace(
        groups_of(config, model_.layout()), model_.layout(), model_.params(), model_.grads(), comm,
        kBucketBytes,
        DataParallelOptimizer::ComputeCopy{model_.compute_copy(), model_.compute_layout().copy_offset});
    model_.set_weights_needed_callback([this](int64_t from) { optimizer_->weights_needed(from); });
  }

  // The forward waits for the last step's gathers as it goes; its mean loss is added to the step's sums.
  void forward(const MicroBatch& batch) {
    model_.zero_grad();
    ops::fill(sums_, 0.0);
    model_.forward_for_backward_without_readback(ids_of(batch, device_), targets_of(batch, device_));
    ops::add_mean_loss(sums_.rows(1, 1), model_.token_losses(), targets_of(batch, device_));
  }
  double forward_loss() const { return download<double>(sums_)[1]; }

  // Backward and the sharded step: the step's sums over the ranks (squared gradient norm, loss).
  absl::StatusOr<std::vector<double>> step(const ScheduleValues& schedule) {
    model_.set_gradient_ready_callback([this](int64_t ready) { optimizer_->gradients_ready(ready); });
    model_.backward();
    model_.set_gradient_ready_callback({});
    absl::StatusOr<CommWork> summed = optimizer_->start_step(schedule, sums_);
    if (!summed.ok()) return summed.status();
    if (absl::Status waited = summed->wait(); !waited.ok()) return waited;
    return download<double>(sums_);
  }

  absl::StatusOr<Outcome> finish(Outcome outcome) {
    if (absl::Status synced = optimizer_->sync_masters(); !synced.ok()) return synced;
    record_weights(model_, device_, outcome);
    return outcome;
  }

 private:
  Device device_;
  GPT model_;
  std::optional<DataParallelOptimizer> optimizer_;  // made once the model is prepared
  DeviceBuffer sums_buffer_;
  TensorView sums_;
};

// The reference on the same rank: the same model and kernels, its gradient averaged over the ranks with one
// all-reduce, and a one-rank MuonAdamW step whose whole weights are then refreshed.
class ReferenceRun {
 public:
  ReferenceRun(const GPTConfig& config, Device device, DType dtype, Communicator& engine)
      : device_(device), engine_(engine), model_(config, device, dtype), single_(device) {
    prepare(model_);
    optimizer_.emplace(groups_of(config, model_.layout()), model_.layout(), model_.params(), model_.grads(),
                       single_, kBucketBytes);
  }

  double forward(const MicroBatch& batch) {
    model_.zero_grad();
    return model_.forward_for_backward(ids_of(batch, device_), targets_of(batch, device_));
  }

  // Backward, the all-reduced gradient and the one-rank step: the loss averaged over the ranks.
  absl::StatusOr<double> step(double rank_loss, const ScheduleValues& schedule) {
    model_.backward();
    if (absl::Status reduced = engine_.all_reduce(model_.grads(), ReduceOp::kAverage).wait(); !reduced.ok())
      return reduced;
    std::array<double, 1> loss{rank_loss};
    DeviceBuffer loss_buffer(device_, sizeof(double));
    const TensorView loss_view(loss_buffer.data(), {1}, DType::kF64, device_);
    upload<double>(loss_view, loss.data());
    if (absl::Status reduced = engine_.all_reduce(loss_view, ReduceOp::kSum).wait(); !reduced.ok())
      return reduced;
    const double averaged_loss = download<double>(loss_view)[0] / 2;
    if (absl::Status stepped = optimizer_->step(schedule); !stepped.ok()) return stepped;
    model_.refresh_compute_weights();
    return averaged_loss;
  }

  double squared_gradient_norm() const { return ops::squared_norm(model_.grads()); }

  Outcome finish(Outcome outcome) {
    record_weights(model_, device_, outcome);
    return outcome;
  }

 private:
  Device device_;
  Communicator& engine_;
  GPT model_;
  SingleCommunicator single_;
  std::optional<DataParallelOptimizer> optimizer_;  // made once the model is prepared
};

// One engine per device for the whole process (engines are made once per run), closed after the suite.
class DataParallelStep : public testing::TestWithParam<Case> {
 protected:
  static void TearDownTestSuite() {
    for (std::unique_ptr<Communicator>& engine : engines_)
      engine.reset();
  }
  static Communicator* engine_for(Device device) {
    std::unique_ptr<Communicator>& engine = engines_[device == Device::kCpu ? 0 : 1];
    if (!engine) {
      absl::StatusOr<std::unique_ptr<Communicator>> made =
          create_communicator(device, {.timeout_seconds = 120});
      if (!made.ok()) return nullptr;
      engine = std::move(made).value();
    }
    return engine.get();
  }
  static std::unique_ptr<Communicator> engines_[2];
};

std::unique_ptr<Communicator> DataParallelStep::engines_[2];

TEST_P(DataParallelStep, MatchesOneRankOnTheAveragedGradient) {
  const Case c = GetParam();
  if (const std::optional<std::string> reason = reason_to_skip(c)) GTEST_SKIP() << *reason;
  Communicator* engine = engine_for(c.device);
  ASSERT_NE(engine, nullptr);
  std::unique_ptr<DeferredGathers> deferred;
  if (c.transport != Transport::kPlain)
    deferred = std::make_unique<DeferredGathers>(*engine, c.transport == Transport::kDeferred);
  const GPTConfig config = small_model();
  const DType dtype = c.device == Device::kCuda ? DType::kBF16 : DType::kF32;
  ShardedRun sharded(config, c.device, dtype, deferred ? *deferred : *engine);
  ReferenceRun reference(config, c.device, dtype, *engine);

  Outcome sharded_outcome, reference_outcome;
  for (int64_t step = 0; step <= kSteps; ++step) {
    const MicroBatch batch = micro_batch(engine->rank(), step, c.device);
    sharded.forward(batch);
    const double reference_loss = reference.forward(batch);
    if (step == kSteps) {  // the last forward: its loss, not another step
      sharded_outcome.losses.push_back(sharded.forward_loss());
      reference_outcome.losses.push_back(reference_loss);
      break;
    }
    const ScheduleValues schedule{1.0 - 0.1 * static_cast<double>(step), 0.9, 0.01};
    const absl::StatusOr<std::vector<double>> totals = sharded.step(schedule);
    ASSERT_TRUE(totals.ok()) << totals.status();
    sharded_outcome.losses.push_back((*totals)[1] / 2);  // the mean over both ranks' micro-batches
    const absl::StatusOr<double> averaged_loss = reference.step(reference_loss, schedule);
    ASSERT_TRUE(averaged_loss.ok()) << averaged_loss.status();
    reference_outcome.losses.push_back(*averaged_loss);
    // The squared gradient norm: the same squares summed in another grouping (per owned chunk, then over
    // ranks). The CPU sums in double over fewer than 2^20 fp32 terms: within 2^20 * 2^-53 ~ 1e-10 relative.
    // The GPU adds each block's squares in fp32 before the double fold (8 squares per thread, then a tree
    // over 256 threads: 16 roundings of positive terms, <= 16 * 2^-24 ~ 1e-6 relative per partial), and the
    // chunks cut the blocks differently: 1e-5 relative.
    const double reference_squares = reference.squared_gradient_norm();
    if (c.transport != Transport::kDeferredWithoutWaits) {
      EXPECT_NEAR((*totals)[0], reference_squares,
                  (c.device == Device::kCpu ? 1e-10 : 1e-5) * reference_squares)
          << "step " << step;
    }
  }
  const absl::StatusOr<Outcome> sharded_final = sharded.finish(std::move(sharded_outcome));
  ASSERT_TRUE(sharded_final.ok()) << sharded_final.status();
  const Outcome reference_final = reference.finish(std::move(reference_outcome));

  if (c.transport != Transport::kDeferredWithoutWaits) {
    EXPECT_EQ(sharded_final->losses, reference_final.losses);
    EXPECT_EQ(sharded_final->masters, reference_final.masters);
    EXPECT_EQ(sharded_final->compute, reference_final.compute);
  } else {
    // Without its waits the second forward already reads stale weights.
    EXPECT_NE(sharded_final->losses, reference_final.losses);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DataParallelStep,
                         testing::Values(Case{Device::kCpu, Transport::kPlain},
                                         Case{Device::kCpu, Transport::kDeferred},
                                         Case{Device::kCpu, Transport::kDeferredWithoutWaits},
                                         Case{Device::kCuda, Transport::kPlain},
                                         Case{Device::kCuda, Transport::kDeferred},
                                         Case{Device::kCuda, Transport::kDeferredWithoutWaits}),
                         case_name);

}  // namespace
}  // namespace nanoforge
