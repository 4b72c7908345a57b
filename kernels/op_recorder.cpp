// The thread's recorder (kernels/op_recorder.h): one pointer per thread, read by every op call.
#include "kernels/op_recorder.h"

#include "support/check.h"

namespace nanoforge::ops {
namespace {
thread_local OpRecorder* current_recorder = nullptr;
}  // namespace

ScopedOpRecording::ScopedOpRecording(OpRecorder& recorder) {
  NANOFORGE_CHECK(current_recorder == nullptr, "op recording scopes do not nest");
  current_recorder = &recorder;
}

ScopedOpRecording::~ScopedOpRecording() {
  current_recorder = nullptr;
}

OpRecorder* op_recorder() {
  return current_recorder;
}

}  // namespace nanoforge::ops
