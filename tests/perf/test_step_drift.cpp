// The performance model prices the step that trains, event by event: TrainingStep::run executed on the CPU
// (every op call named by the op profiler, every collective and first wait seen by a communicator that
// forwards to the real engine) and the same function recorded by record_training_step give the same sequence
// of ops, collectives (kind and bytes) and waits, in the same order, for a dense model, one with sliding
// windows, one with grouped-query attention and one with gradient accumulation. Under mpirun -n 2 the same
// cases run ZeRO-1 on two ranks (rank 0's events against the recording of rank 0 of two).
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "dist/comm_work_state.h"
#include "dist/create_communicator.h"
#include "kernels/device_buffer.h"
#include "kernels/host_transfer.h"
#include "kernels/op_profile.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "optim/param_groups.h"
#include "perf/recording_communicator.h"
#include "perf/step_recording.h"
#include "step/training_step.h"

namespace nanoforge {
namespace {

constexpr int64_t kBucketBytes = 64 << 10;  // several buckets for these small models

std::string issued_event(CollectiveKind kind, int64_t bytes) {
  return std::string("issue ") + collective_name(kind) + " " + std::to_string(bytes) + " bytes";
}

std::string waited_event(int64_t id) {
  return "wait #" + std::to_string(id);
}

// Forwards every collective to the real engine and, while tracing, notes each one issued and each first
// wait (or done) on its work, at the position among the op calls the op profiler has seen so far.
class TracingCommunicator final : public Communicator {
 public:
  struct Event {
    size_t after_ops;
    std::string what;
  };

  explicit TracingCommunicator(Communicator& inner) : inner_(inner) {}
  void set_tracing(bool on) { tracing_ = on; }
  const std::vector<Event>& events() const { return events_; }

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  int local_rank() const override { return inner_.local_rank(); }
  std::string engine_name() const override { return inner_.engine_name(); }
  CommWork all_reduce(TensorView buffer, ReduceOp op) override {
    return traced(CollectiveKind::kAllReduce, buffer.bytes(), inner_.all_reduce(buffer, op));
  }
  CommWork reduce_scatter(TensorView input, TensorView output, ReduceOp op) override {
    return traced(CollectiveKind::kReduceScatter, input.bytes(), inner_.reduce_scatter(input, output, op));
  }
  CommWork all_gather(TensorView input, TensorView output) override {
    return traced(CollectiveKind::kAllGather, output.bytes(), inner_.all_gather(input, output));
  }
  CommWork broadcast(TensorView buffer, int root) override {
    return traced(CollectiveKind::kBroadcast, buffer.bytes(), inner_.broadcast(buffer, root));
  }
  absl::Status barrier() override { return inner_.barrier(); }

 private:
  void note(std::string what) {
    if (tracing_) events_.push_back({ops::op_call_sequence().size(), std::move(what)});
  }

  CommWork traced(CollectiveKind kind, int64_t bytes, CommWork work) {
    const int64_t id = next_id_++;
    note(issued_event(kind, bytes));
    auto state = std::make_shared<CommWork::State>(std::string(collective_name(kind)));
    auto reported = std::make_shared<bool>(false);
    state->device_poll = [this, work, id, reported]() -> std::optional<absl::Status> {
      if (!*reported) {
        *reported = true;
        note(waited_event(id));
      }
      if (!work.done()) return std::nullopt;
      return work.wait();
    };
    return CommWork(std::move(state));
  }

  Communicator& inner_;
  bool tracing_ = false;
  int64_t next_id_ = 0;
  std::vector<Event> events_;
};

struct DriftCase {
  std::string name;
  GPTConfig config;
  int64_t batch = 2;
  int64_t grad_accum_steps = 1;
};

std::vector<DriftCase> drift_cases() {
  GPTConfig dense = GPTConfig::from_sizing(
      {.depth = 2, .aspect_ratio = 64, .head_dim = 64, .max_seq_len = 64, .window_pattern = "L"}, 200);
  GPTConfig windows = GPTConfig::from_sizing(
      {.depth = 4, .aspect_ratio = 32, .head_dim = 64, .max_seq_len = 128, .window_pattern = "SSSL"}, 200);
  GPTConfig grouped = GPTConfig::from_sizing(
      {.depth = 2, .aspect_ratio = 128, .head_dim = 64, .max_seq_len = 64, .window_pattern = "SL"}, 200);
  grouped.n_kv_head = 2;  // 4 query heads share 2 key/value heads
  return {{"dense", dense, 2, 1},
          {"windows", windows, 2, 1},
          {"gqa", grouped, 2, 1},
          {"accumulation", dense, 1, 3}};
}

// Rank 0's events of the second of two steps, executed: the first step's gathers are what the second
// forward waits for, as in the recording.
std::vector<std::string> executed_step(const DriftCase& c, Communicator& engine) {
  GPT model(c.config, Device::kCpu, DType::kF32);
  model.init_weights(3);
  model.refresh_compute_weights();
  model.plan(c.batch, c.config.sequence_len);
  const int64_t tokens = c.batch * c.config.sequence_len;
  std::vector<int32_t> ids(static_cast<size_t>(2 * tokens));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int32_t>((i * 37 + 11 * static_cast<size_t>(engine.rank())) % 200);
  DeviceBuffer buffer(Device::kCpu, 2 * tokens * static_cast<int64_t>(sizeof(int32_t)));
  const TensorView all(buffer.data(), {2, c.batch, c.config.sequence_len}, DType::kI32, Device::kCpu);
  upload(all, ids.data());
  const MicroBatch batch{all.rows(0, 1).reshaped({c.batch, c.config.sequence_len}),
                         all.rows(1, 1).reshaped({c.batch, c.config.sequence_len})};

  // One rank's collectives are local copies with no link to price: the recording has none, so neither
  // is traced here.
  TracingCommunicator tracing(engine);
  Communicator& communicator = engine.world_size() > 1 ? static_cast<Communicator&>(tracing) : engine;
  DataParallelOptimizer optimizer(
      nanochat_param_groups(c.config, model.layout(), OptimizerHyperparameters{}, 1.0, 0.0), model.layout(),
      model.params(), model.grads(), communicator, kBucketBytes,
      {model.compute_copy(), model.compute_layout().copy_offset});
  TrainingStep step(model, optimizer, engine.world_size());
  StepRequest request;
  request.grad_accum_steps = c.grad_accum_steps;
  request.next_micro_batch = [&](int64_t) -> absl::StatusOr<MicroBatch> { return batch; };
  EXPECT_TRUE(step.run(request).ok());
  ops::reset_op_profile();
  ops::set_op_profiling(true);
  tracing.set_tracing(true);
  EXPECT_TRUE(step.run(request).ok());
  tracing.set_tracing(false);
  ops::set_op_profiling(false);
  EXPECT_TRUE(optimizer.finish_weights().ok());

  const std::vector<std::string> op_calls = ops::op_call_sequence();
  std::vector<std::string> events;
  size_t next_op = 0;
  for (const TracingCommunicator::Event& event : tracing.events()) {
    while (next_op < event.after_ops)
      events.push_back(op_calls[next_op++]);
    events.push_back(event.what);
  }
  while (next_op < op_calls.size())
    events.push_back(op_calls[next_op++]);
  return events;
}

// The same step as the performance model records it (rank 0 of the engine's world), in the same words.
std::vector<std::string> recorded_step(const DriftCase& c, int world_size) {
  StepRecordingOptions options{
      .config = c.config, .batch = c.batch, .world_size = world_size, .grad_accum_steps = c.grad_accum_steps};
  options.bucket_bytes = kBucketBytes;
  options.device = Device::kCpu;
  std::vector<std::string> events;
  for (const StepEvent& event : record_training_step(options)) {
    if (event.phase == StepPhase::kPreviousStep) continue;
    switch (event.kind) {
      case StepEvent::Kind::kOp:
        events.push_back(event.op);
        break;
      case StepEvent::Kind::kCollectiveIssued:
        events.push_back(issued_event(event.collective.kind, event.collective.bytes));
        break;
      case StepEvent::Kind::kCollectiveWaited:
        events.push_back(waited_event(event.collective.id));
        break;
    }
  }
  return events;
}

// The first event where two sequences part, with a few around it, for the failure message.
std::string first_difference(const std::vector<std::string>& executed,
                             const std::vector<std::string>& recorded) {
  size_t i = 0;
  while (i < executed.size() && i < recorded.size() && executed[i] == recorded[i])
    ++i;
  std::string text = "first difference at event " + std::to_string(i) + " of " +
                     std::to_string(executed.size()) + " executed, " + std::to_string(recorded.size()) +
                     " recorded:\n";
  for (size_t j = i >= 3 ? i - 3 : 0; j < i + 4; ++j) {
    text += "  " + std::to_string(j) + ": " + (j < executed.size() ? executed[j] : "-") + "  |  " +
            (j < recorded.size() ? recorded[j] : "-") + "\n";
  }
  return text;
}

class StepDrift : public testing::TestWithParam<DriftCase> {};

// The process's engine (MPI under mpirun, else a single rank), made once: MPI starts once per process.
Communicator* engine() {
  static absl::StatusOr<std::unique_ptr<Communicator>> made =
      create_communicator(Device::kCpu, {.timeout_seconds = 120});
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? made->get() : nullptr;
}

TEST_P(StepDrift, RecordedStepIsTheExecutedStepEventByEvent) {
  const DriftCase& c = GetParam();
  ASSERT_TRUE(c.config.validate().ok()) << c.config.validate();
  Communicator* communicator = engine();
  ASSERT_NE(communicator, nullptr);
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  ASSERT_EQ(communicator->world_size(), world != nullptr ? std::atoi(world) : 1);
  const std::vector<std::string> executed = executed_step(c, *communicator);
  if (communicator->rank() != 0) return;  // rank 0's events are the ones recorded
  const std::vector<std::string> recorded = recorded_step(c, communicator->world_size());
  ASSERT_GT(executed.size(), 50u);
  EXPECT_EQ(executed, recorded) << first_difference(executed, recorded);
}

INSTANTIATE_TEST_SUITE_P(Recipes, StepDrift, testing::ValuesIn(drift_cases()),
                         [](const testing::TestParamInfo<DriftCase>& info) { return info.param.name; });

}  // namespace
}  // namespace nanoforge
