// SingleCommunicator: the collectives of a world of one. Copies go through ops::copy on CUDA (the kernels'
// default stream, so later kernels see them) and memcpy on the CPU (any dtype).
#include "dist/single_communicator.h"

#include <cstring>

#include "dist/collective_contract.h"
#include "kernels/op_recorder.h"
#include "kernels/ops.h"

namespace nanoforge {
namespace {

constexpr const char* kEngine = "single";

// output <- input, as flat views; nothing to do when they are the same memory.
void copy_flat(const TensorView& output, const TensorView& input) {
  if (output.data == input.data || input.numel() == 0) return;
  if (input.device == Device::kCpu) {
    // A recorded step's buffers are reserved address space, never backed: a host copy is no op to record.
    if (ops::op_recorder() == nullptr)
      std::memmove(output.data, input.data, static_cast<size_t>(input.bytes()));
    return;
  }
  ops::copy(output.reshaped({output.numel()}), input.reshaped({input.numel()}));
}

}  // namespace

CommWork SingleCommunicator::all_reduce(TensorView buffer, ReduceOp /*op*/) {
  dist::check_all_reduce(buffer, device_, kEngine);
  return CommWork();
}

CommWork SingleCommunicator::reduce_scatter(TensorView input, TensorView output, ReduceOp /*op*/) {
  dist::check_reduce_scatter(input, output, 1, device_, kEngine);
  copy_flat(output, input);
  return CommWork();
}

CommWork SingleCommunicator::all_gather(TensorView input, TensorView output) {
  dist::check_all_gather(input, output, 1, device_, kEngine);
  copy_flat(output, input);
  return CommWork();
}

CommWork SingleCommunicator::broadcast(TensorView buffer, int root) {
  dist::check_broadcast(buffer, root, 1, device_, kEngine);
  return CommWork();
}

}  // namespace nanoforge
