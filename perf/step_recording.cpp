// record_training_step: builds the model, the token tensors, the communicator and the optimizer as the
// trainer does (their memory is reserved address space while recording), then runs TrainingStep twice (the
// first step's gathers are what the second's forward waits for).
#include "perf/step_recording.h"

#include <memory>

#include "dist/single_communicator.h"
#include "kernels/device_buffer.h"
#include "kernels/ops.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "optim/param_groups.h"
#include "step/training_step.h"
#include "support/check.h"

namespace nanoforge {
namespace {

class StepRecorder final : public OpCostSink, public CollectiveListener {
 public:
  void set_phase(StepPhase phase) { phase_ = phase; }
  void set_recording(bool on) { recording_ = on; }
  std::vector<StepEvent> take() { return std::move(events_); }

  void record(const char* op, const OpCost& cost) override {
    if (!recording_) return;
    StepEvent event;
    event.kind = StepEvent::Kind::kOp;
    event.phase = phase_;
    event.op = op;
    event.cost = cost;
    events_.push_back(std::move(event));
  }
  void issued(const CollectiveCall& call) override {
    if (!recording_) return;
    StepEvent event;
    event.kind = StepEvent::Kind::kCollectiveIssued;
    event.phase = phase_;
    event.collective = call;
    events_.push_back(std::move(event));
  }
  void waited(int64_t id) override {
    if (!recording_) return;
    StepEvent event;
    event.kind = StepEvent::Kind::kCollectiveWaited;
    event.phase = phase_;
    event.collective.id = id;
    events_.push_back(std::move(event));
  }

 private:
  std::vector<StepEvent> events_;
  StepPhase phase_ = StepPhase::kForward;
  bool recording_ = false;  // off while the model and optimizer are built
};

StepPhase phase_of(StepStage stage) {
  switch (stage) {
    case StepStage::kForward:
      return StepPhase::kForward;
    case StepStage::kBackward:
      return StepPhase::kBackward;
    case StepStage::kOptimizer:
      return StepPhase::kOptimizer;
    case StepStage::kStepEnd:
      return StepPhase::kStepEnd;
  }
  return StepPhase::kForward;
}

}  // namespace

const char* step_phase_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::kForward:
      return "forward";
    case StepPhase::kBackward:
      return "backward";
    case StepPhase::kOptimizer:
      return "optimizer";
    case StepPhase::kPreviousStep:
      return "previous step";
    case StepPhase::kStepEnd:
      return "step end";
  }
  return "?";
}

std::vector<StepEvent> record_training_step(const StepRecordingOptions& options) {
  const absl::Status valid = options.config.validate();
  NANOFORGE_CHECK(valid.ok(), "record_training_step: {}", valid.ToString());
  NANOFORGE_CHECK(options.batch >= 1 && options.world_size >= 1 && options.grad_accum_steps >= 1,
                  "record_training_step: batch {}, world size {}, accumulation {} must be >= 1",
                  options.batch, options.world_size, options.grad_accum_steps);
  const Device device = options.device;
  const int64_t seq = options.config.sequence_len;
  StepRecorder recorder;
  OpCostRecorder priced_ops(recorder);
  const ops::ScopedOpRecording recording(priced_ops);

  // The run's parts, as the trainer makes them.
  GPT model(options.config, device, device == Device::kCuda ? DType::kBF16 : DType::kF32);
  model.set_fp8(options.fp8);
  model.refresh_compute_weights();
  model.plan(options.batch, seq);
  const DeviceBuffer token_buffer(device, 2 * options.batch * seq * static_cast<int64_t>(sizeof(int32_t)));
  const TensorView tokens(token_buffer.data(), {2, options.batch, seq}, DType::kI32, device);
  const MicroBatch batch{tokens.rows(0, 1).reshaped({options.batch, seq}),
                         tokens.rows(1, 1).reshaped({options.batch, seq})};
  std::unique_ptr<Communicator> communicator;
  if (options.world_size == 1) {
    communicator = std::make_unique<SingleCommunicator>(device);
  } else {
    communicator = std::make_unique<RecordingCommunicator>(0, options.world_size, device, recorder);
  }
  const std::vector<ParamGroup> groups =
      nanochat_param_groups(options.config, model.layout(), OptimizerHyperparameters{}, 1.0, 0.0);
  DataParallelOptimizer optimizer(groups, model.layout(), model.params(), model.grads(), *communicator,
                                  options.bucket_bytes,
                                  {model.compute_copy(), model.compute_layout().copy_offset});
  TrainingStep step(model, optimizer, options.world_size);

  // TrainingStep::run twice: the first step (phase kPreviousStep) leaves the all-gathers that the second
  // one's forward waits for, as every step but a run's first does.
  recorder.set_recording(true);
  for (const bool previous : {true, false}) {
    StepRequest request;
    request.grad_accum_steps = options.grad_accum_steps;
    request.next_micro_batch = [&](int64_t) -> absl::StatusOr<MicroBatch> { return batch; };
    request.on_stage = [&](StepStage stage) {
      recorder.set_phase(previous ? StepPhase::kPreviousStep : phase_of(stage));
    };
    const absl::StatusOr<StepResult> result = step.run(request);
    NANOFORGE_CHECK(result.ok(), "record_training_step: {}", result.status().ToString());
  }
  recorder.set_recording(false);
  return recorder.take();
}

}  // namespace nanoforge
