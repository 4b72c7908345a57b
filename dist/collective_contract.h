// The contract every engine enforces on a collective's arguments (internal to dist/): one device, equal
// dtypes, sizes that divide by the world size, a root in range. Breaking it is a programming error, so these
// abort with the call and the tensors (support/check.h), as ops do; failures of the job itself (a lost rank)
// come back as a Status from CommWork::wait instead.
#pragma once

#include <string>

#include "dist/communicator.h"
#include "kernels/tensor.h"

namespace nanoforge::dist {

const char* reduce_op_name(ReduceOp op);

// "all_reduce #3 of f32[1000] on cpu", naming a collective in errors and watchdog reports.
std::string describe_collective(const char* name, uint64_t sequence, const TensorView& tensor);

void check_all_reduce(const TensorView& buffer, Device device, const char* engine);
void check_reduce_scatter(const TensorView& input, const TensorView& output, int world_size, Device device,
                          const char* engine);
void check_all_gather(const TensorView& input, const TensorView& output, int world_size, Device device,
                      const char* engine);
void check_broadcast(const TensorView& buffer, int root, int world_size, Device device, const char* engine);

// Whether [a, a + a_bytes) and [b, b + b_bytes) share any byte.
bool overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes);

}  // namespace nanoforge::dist
