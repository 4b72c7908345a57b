// record_training_step: builds the model, the token tensors, the communicator and the optimizer as the
// trainer does (their memory is reserved address space while recording), then replays Trainer::train_step
// (twice with the optimizer: the first step's gathers are what the second's forward waits for).
#include "train/step_model/step_recording.h"

#include <memory>

#include "dist/single_communicator.h"
#include "kernels/device_buffer.h"
#include "kernels/ops.h"
#include "model/gpt.h"
#include "optim/data_parallel_optimizer.h"
#include "optim/param_groups.h"
#include "support/check.h"

namespace nanoforge {
namespace {

class StepRecorder final : public ops::OpCostSink, public CollectiveListener {
 public:
  void set_phase(StepPhase phase) { phase_ = phase; }
  void set_recording(bool on) { recording_ = on; }
  std::vector<StepEvent> take() { return std::move(events_); }

  void record(const char* op, const ops::OpCost& cost) override {
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
  const ops::ScopedCostRecording recording(recorder);

  // The run's parts, as Trainer's constructor makes them.
  GPT model(options.config, device, device == Device::kCuda ? DType::kBF16 : DType::kF32);
  model.refresh_compute_weights();
  model.plan(options.batch, seq);
  const DeviceBuffer token_buffer(device, 2 * options.batch * seq * static_cast<int64_t>(sizeof(int32_t)));
  const TensorView tokens(token_buffer.data(), {2, options.batch, seq}, DType::kI32, device);
  const TensorView ids = tokens.rows(0, 1).reshaped({options.batch, seq});
  const TensorView targets = tokens.rows(1, 1).reshaped({options.batch, seq});
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
  model.set_weights_needed_callback([&](int64_t from) { optimizer.weights_needed(from); });
  // Trainer's step scalars: gradient squares, loss sum, two stop votes.
  constexpr int64_t kStepSums = 4;
  const DeviceBuffer step_sums_buffer(device, kStepSums * static_cast<int64_t>(sizeof(double)));
  const TensorView sums(step_sums_buffer.data(), {kStepSums}, DType::kF64, device);

  // Trainer::train_step, call for call. With the optimizer, twice: the first step (phase kPreviousStep)
  // leaves the all-gathers that the second one's forward waits for, as every step but a run's first does.
  recorder.set_recording(true);
  const int steps = options.optimizer ? 2 : 1;
  for (int step = 0; step < steps; ++step) {
    const bool previous = step + 1 < steps;
    const auto set_phase = [&](StepPhase phase) {
      recorder.set_phase(previous ? StepPhase::kPreviousStep : phase);
    };
    set_phase(StepPhase::kForward);
    model.zero_grad();
    if (options.optimizer) ops::fill(sums, 0.0);
    for (int64_t micro = 0; micro < options.grad_accum_steps; ++micro) {
      set_phase(StepPhase::kForward);
      const double loss_scale = 1.0 / static_cast<double>(options.grad_accum_steps);
      if (options.optimizer) {
        model.forward_for_backward_without_readback(ids, targets, loss_scale);
        ops::add_mean_loss(sums.rows(1, 1), model.token_losses(), targets);
      } else {
        model.forward_for_backward(ids, targets, loss_scale);  // bench step's timed pass reads the loss
      }
      set_phase(StepPhase::kBackward);
      const bool last = micro + 1 == options.grad_accum_steps;
      if (last && options.optimizer)
        model.set_gradient_ready_callback([&](int64_t ready) { optimizer.gradients_ready(ready); });
      model.backward();
      model.set_gradient_ready_callback({});
    }
    if (!options.optimizer) break;
    // The stop votes, the update and the scalars' all-reduce, whose wait precedes the step's one read-back,
    // then the all-gathers (waited for by the next forward).
    set_phase(StepPhase::kOptimizer);
    ops::fill(sums.rows(2, 1), 0.0);
    ops::fill(sums.rows(3, 1), 0.0);
    const absl::StatusOr<CommWork> summed = optimizer.start_step(ScheduleValues{}, sums);
    NANOFORGE_CHECK(summed.ok(), "record_training_step: {}", summed.status().ToString());
    set_phase(StepPhase::kStepEnd);
    const absl::Status waited = summed->wait();
    NANOFORGE_CHECK(waited.ok(), "record_training_step: {}", waited.ToString());
  }
  recorder.set_recording(false);
  return recorder.take();
}

}  // namespace nanoforge
