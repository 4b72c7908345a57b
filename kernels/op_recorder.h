// Op recording: while a ScopedOpRecording lives on a thread, every op that thread calls is handed to its
// OpRecorder (one method per op of kernels/op_list.inc, with the op's own arguments) instead of running,
// device memory is reserved address space, never backed, and host transfers do nothing. The performance
// model (perf/op_cost.h) records a training step this way, on any machine, in milliseconds.
#pragma once

#include "kernels/ops.h"

namespace nanoforge::ops {

// Receives the ops recorded on its thread. Abstract: a recorder that leaves out an op does not compile.
class OpRecorder {
 public:
  virtual ~OpRecorder() = default;

#define NANOFORGE_OP(name, Return, params, args) virtual void name params = 0;
#define NANOFORGE_CUDA_VARIANT NANOFORGE_OP
#include "kernels/op_list.inc"
};

// Records this thread's ops into `recorder` for the scope's lifetime (scopes do not nest).
class ScopedOpRecording {
 public:
  explicit ScopedOpRecording(OpRecorder& recorder);
  ~ScopedOpRecording();
  ScopedOpRecording(const ScopedOpRecording&) = delete;
  ScopedOpRecording& operator=(const ScopedOpRecording&) = delete;
};

// This thread's recorder while recording, else nullptr.
OpRecorder* op_recorder();

}  // namespace nanoforge::ops
