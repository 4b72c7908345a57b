// Per-op timing for `nanoforge bench step --profile`: when profiling is on, kernels/ops.cpp times every op
// call — wall clock around the call on the CPU, a pair of CUDA events around it on the GPU (the call only
// queues kernels, the events measure when they ran) — and sums the time per op name. Off by default and
// then free: one relaxed atomic load per op call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace nanoforge::ops {

void set_op_profiling(bool on);
bool op_profiling();

struct OpTime {
  std::string op;  // "matmul", "attention_backward", ...
  int64_t calls = 0;
  double milliseconds = 0;  // summed over the calls
};

// Waits for the GPU, resolves every timed call so far and returns the totals per op, longest first.
std::vector<OpTime> op_profile();
// The ops timed since the last reset, by name in the order they were called (what a recorded step is held
// against, op by op: tests/perf/).
std::vector<std::string> op_call_sequence();
void reset_op_profile();

// Times one op call on `device` while profiling is on (constructed around the call by kernels/ops.cpp).
class ScopedOpTimer {
 public:
  ScopedOpTimer(const char* op, Device device);
  ~ScopedOpTimer();
  ScopedOpTimer(const ScopedOpTimer&) = delete;
  ScopedOpTimer& operator=(const ScopedOpTimer&) = delete;

 private:
  const char* op_;
  Device device_;
  bool active_ = false;
  double start_seconds_ = 0;
  void* start_event_ = nullptr;
};

}  // namespace nanoforge::ops
