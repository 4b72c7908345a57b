// The CUDA execution model on the CPU: a launch runs its blocks one after another, each block's threads as
// fibers in warps of 32. A thread runs until it reaches __syncthreads or a warp-synchronous call (shuffle,
// ballot, __syncwarp, a wmma operation), which completes once every thread (or every lane of its mask) has
// arrived; a barrier that cannot complete, or lanes that meet at different calls or masks, stop the program
// naming the kernel, the block and each thread's position. The schedule picks which ready thread runs next.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

namespace nanoforge::emulator {

// The order in which ready threads (and blocks) run. kWarpAhead lets one warp, drawn at random per block,
// run before all others between barriers.
enum class Schedule : uint8_t { kInOrder, kReversed, kRandom, kWarpAhead };
inline constexpr int kScheduleCount = 4;
const char* schedule_name(Schedule schedule);

// What one launch runs: set up by launch.h, executed by run_launch().
struct LaunchDescription {
  std::string kernel_name;  // e.g. "attention_forward_kernel<64>"
  std::source_location site;
  dim3 grid, block;
  size_t dynamic_shared_bytes = 0;
  void (*invoke)(const void* arguments) = nullptr;  // calls the kernel with `arguments` (a std::tuple)
  const void* arguments = nullptr;
};

struct LaunchOutcome {
  bool trapped = false;
  std::string message;              // what trapped, where
  bool used_float_atomics = false;  // results may then legitimately differ between schedules
};

// Runs every block of `launch` under `schedule`; `seed` draws the random choices (random order, the warp
// that runs ahead, the tensor cores' element-to-lane mapping).
LaunchOutcome run_launch(const LaunchDescription& launch, Schedule schedule, uint64_t seed);

// ---- called from device code (emulator/device_language.h) ----

// The running thread's built-in variables, set by the scheduler each time it resumes a thread.
struct ThreadBuiltins {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  int lane;
};
// constinit: no dynamic initialisation, so no TLS wrapper call on every access (and none of the code GCC 12's
// -fsanitize=null mis-compiles around that call into false "load of null pointer" reports).
extern thread_local constinit const ThreadBuiltins* current_builtins;
inline const uint3& thread_index() {
  return current_builtins->thread_idx;
}
inline const uint3& block_index() {
  return current_builtins->block_idx;
}
inline const dim3& block_dim() {
  return current_builtins->block_dim;
}
inline const dim3& grid_dim() {
  return current_builtins->grid_dim;
}
inline int lane_id() {
  return current_builtins->lane;
}

void sync_block(std::source_location site);

// A warp-synchronous call: lanes of `mask` arrive with their own record; the last to arrive calls
// complete(call) with every lane's record, then all lanes continue. name and site must match across lanes.
struct WarpCall {
  const char* name = nullptr;
  unsigned mask = 0;
  std::source_location site;
  unsigned arrived = 0;
  void* records[32] = {};
  void (*complete)(WarpCall& call) = nullptr;
};
void warp_call(WarpCall& call, void* record);

void sync_warp(unsigned mask, std::source_location site);

// Shuffles of 4- or 8-byte values: kind 0 = __shfl_sync (arg: source lane), 1 = up (delta), 2 = down
// (delta), 3 = xor (lane mask); width is the segment size (a power of two up to 32).
uint64_t shuffle(int kind, unsigned mask, uint64_t bits, int arg, int width, const char* name,
                 std::source_location site);
unsigned ballot(unsigned mask, bool predicate, const char* name, std::source_location site);

// Dynamic shared memory of the running block (filled with 0xFF bytes, a NaN in f32 and bf16, at block start).
void* dynamic_shared_memory();
// Whether [pointer, pointer + bytes) lies inside the running block's dynamic shared memory.
bool in_dynamic_shared_memory(const void* pointer, size_t bytes);

// The running thread's cp.async copies (async_copy.cpp) that have not landed: those issued since its last
// commit, and its committed groups, oldest first. Empty at block start; dropped when the thread exits (the
// block's shared memory, their only destination, ends with the block).
struct PendingAsyncCopy {
  void* destination;
  const void* source;
  uint32_t bytes;         // copied into destination
  uint32_t source_bytes;  // read from source; the rest of `bytes` is zero-filled
};
struct AsyncCopies {
  std::vector<PendingAsyncCopy> uncommitted;
  std::vector<std::vector<PendingAsyncCopy>> groups;
};
AsyncCopies& running_thread_async_copies();

// Stops the running launch: the stream reports cudaErrorLaunchFailure from then on.
[[noreturn]] void trap(std::source_location site);

// Records that the launch adds floats with atomics (their order, hence the bits, depend on the schedule).
void note_float_atomic();

// A fatal error in device code that names the kernel, the block and the thread.
[[noreturn]] void device_error(const std::string& message, std::source_location site);

// The running launch's seed (for the tensor cores' element mapping).
uint64_t launch_seed();

}  // namespace nanoforge::emulator
