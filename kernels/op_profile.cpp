// The op profiler's registry. GPU calls keep their two events until op_profile() synchronises and reads
// them; the events are recycled from a pool, so a profiled step allocates only while the pool grows.
#include "kernels/op_profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#ifdef NANOFORGE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "support/check.h"

namespace nanoforge::ops {
namespace {

struct PendingGpuCall {
  const char* op;
  void* start;
  void* end;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, OpTime> totals;
  std::vector<const char*> sequence;  // every timed call's op name, in call order
  std::vector<PendingGpuCall> pending;
  std::vector<void*> free_events;
};

std::atomic<bool> profiling{false};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: timers may run during exit
  return *instance;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void add_time(Registry& r, const char* op, double milliseconds) {
  OpTime& total = r.totals[op];
  total.op = op;
  total.calls += 1;
  total.milliseconds += milliseconds;
}

#ifdef NANOFORGE_HAVE_CUDA
void check_cuda(cudaError_t status, const char* what) {
  NANOFORGE_CHECK(status == cudaSuccess, "op profiler: {} failed: {}", what, cudaGetErrorString(status));
}

// An event from the pool (caller holds the registry lock), recorded on the default stream.
void* record_event(Registry& r) {
  cudaEvent_t event = nullptr;
  if (!r.free_events.empty()) {
    event = static_cast<cudaEvent_t>(r.free_events.back());
    r.free_events.pop_back();
  } else {
    check_cuda(cudaEventCreate(&event), "cudaEventCreate");
  }
  check_cuda(cudaEventRecord(event, nullptr), "cudaEventRecord");
  return event;
}
#endif

}  // namespace

void set_op_profiling(bool on) {
  profiling.store(on, std::memory_order_relaxed);
}

bool op_profiling() {
  return profiling.load(std::memory_order_relaxed);
}

ScopedOpTimer::ScopedOpTimer(const char* op, Device device) : op_(op), device_(device) {
  if (!op_profiling()) return;
  active_ = true;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.sequence.push_back(op);
  }
  if (device_ == Device::kCpu) {
    start_seconds_ = now_seconds();
    return;
  }
#ifdef NANOFORGE_HAVE_CUDA
  std::lock_guard<std::mutex> lock(r.mutex);
  start_event_ = record_event(r);
#endif
}

ScopedOpTimer::~ScopedOpTimer() {
  if (!active_) return;
  Registry& r = registry();
  if (device_ == Device::kCpu) {
    const double milliseconds = 1e3 * (now_seconds() - start_seconds_);
    std::lock_guard<std::mutex> lock(r.mutex);
    add_time(r, op_, milliseconds);
    return;
  }
#ifdef NANOFORGE_HAVE_CUDA
  std::lock_guard<std::mutex> lock(r.mutex);
  r.pending.push_back({op_, start_event_, record_event(r)});
#endif
}

std::vector<OpTime> op_profile() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
#ifdef NANOFORGE_HAVE_CUDA
  if (!r.pending.empty()) check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (const PendingGpuCall& call : r.pending) {
    float milliseconds = 0;
    check_cuda(cudaEventElapsedTime(&milliseconds, static_cast<cudaEvent_t>(call.start),
                                    static_cast<cudaEvent_t>(call.end)),
               "cudaEventElapsedTime");
    add_time(r, call.op, milliseconds);
    r.free_events.push_back(call.start);
    r.free_events.push_back(call.end);
  }
#endif
  r.pending.clear();
  std::vector<OpTime> times;
  for (const auto& [name, total] : r.totals)
    times.push_back(total);
  std::sort(times.begin(), times.end(),
            [](const OpTime& a, const OpTime& b) { return a.milliseconds > b.milliseconds; });
  return times;
}

std::vector<std::string> op_call_sequence() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return {r.sequence.begin(), r.sequence.end()};
}

void reset_op_profile() {
  op_profile();  // resolve (and recycle the events of) what is pending
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.totals.clear();
  r.sequence.clear();
}

}  // namespace nanoforge::ops
