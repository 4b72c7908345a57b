// StepLog: the step line's format is nanochat's base_train's, with the data wait and exposed communication
// in the record only.
#include "train/step_log.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "model/flops.h"
#include "optim/schedules.h"
#include "perf/peak_flops.h"
#include "support/number_format.h"
#include "support/status.h"

namespace nanoforge {
namespace {

std::string minutes(double seconds) {
  return fmt::format("{:.1f}m", seconds / 60.0);
}

}  // namespace

StepLog::StepLog(const RunSetup& setup, const TrainRunOptions& options, int64_t first_step, int64_t last_step,
                 double resumed_training_seconds, std::chrono::steady_clock::time_point run_start,
                 MetricsLog* metrics, MetricsSidecar* sidecar)
    : setup_(setup),
      options_(options),
      first_step_(first_step),
      last_step_(last_step),
      training_seconds_(resumed_training_seconds),
      resumed_training_seconds_(resumed_training_seconds),
      run_start_(run_start),
      metrics_(metrics),
      sidecar_(sidecar) {}

absl::Status StepLog::write(int64_t step, const StepResult& result, const StepSeconds& seconds) {
  const double loss = result.loss;
  const double grad_norm = result.grad_norm;
  if (!std::isfinite(loss)) {
    return absl::InternalError(
        fmt::format("loss is {} at step {}: training diverged (lower the learning rates)", loss, step));
  }
  if (step > first_step_) {  // the first step of a process includes warm-up (page faults, thread start-up)
    training_seconds_ += seconds.whole;
    ++timed_steps_;
  }
  const int64_t num_iterations = setup_.horizon.num_iterations;
  const double tokens_per_second = static_cast<double>(setup_.horizon.total_batch_size) / seconds.whole;
  const std::optional<double> mfu =
      mfu_percent(tokens_per_second, static_cast<double>(flops_per_token(setup_.model)), setup_.device_name,
                  static_cast<int>(setup_.world_size));
  const double mean_step =
      timed_steps_ > 0 ? (training_seconds_ - resumed_training_seconds_) / static_cast<double>(timed_steps_)
                       : seconds.whole;
  const double eta_seconds = mean_step * static_cast<double>(last_step_ - step - 1);
  if (options_.on_step) {
    options_.on_step(
        {step + 1, setup_.horizon.total_batch_size, seconds.whole, seconds.exposed_comm, seconds.data_wait});
  }
  if (metrics_ == nullptr) return absl::OkStatus();
  const double lr_multiplier = schedule_at(setup_.schedule, step).lr_multiplier;
  const double elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_).count();
  fmt::print(
      "step {:05d}/{:05d} ({:5.2f}%) | loss {:.6f} | gnorm {:.4f} | lrm {:.3f} | dt {:.1f}ms | tok/s {} | "
      "mfu {} | elapsed {} | eta {}\n",
      step + 1, num_iterations, 100.0 * static_cast<double>(step + 1) / static_cast<double>(num_iterations),
      loss, grad_norm, lr_multiplier, 1e3 * seconds.whole,
      with_thousands(static_cast<int64_t>(tokens_per_second)),
      mfu ? fmt::format("{:.2f}%", *mfu) : std::string("n/a"), minutes(elapsed_seconds),
      minutes(eta_seconds));
  std::fflush(stdout);
  MetricRecord record = {{"step", step + 1},
                         {"loss", loss},
                         {"grad_norm", grad_norm},
                         {"lr_multiplier", lr_multiplier},
                         {"tokens_per_s", tokens_per_second},
                         {"step_ms", 1e3 * seconds.whole},
                         {"exposed_comm_ms", 1e3 * seconds.exposed_comm},
                         {"data_wait_ms", 1e3 * seconds.data_wait},
                         {"elapsed_s", elapsed_seconds},
                         {"eta_s", eta_seconds}};
  if (mfu) record.push_back({"mfu", *mfu});
  if (setup_.on_cuda_emulator) record.push_back({"emulated_gpu", setup_.device_name});  // never on a GPU
  NANOFORGE_RETURN_IF_ERROR(metrics_->write(record));
  if (sidecar_) sidecar_->check();
  return absl::OkStatus();
}

}  // namespace nanoforge
