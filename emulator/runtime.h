// What the emulated CUDA runtime keeps, shared by the cuda* functions (runtime_api.cpp), kernel launches
// (launch.cpp) and the cuBLASLt and NCCL stand-ins: device profiles, allocations, streams of queued
// operations and events. Streams are lazy: an operation runs only when something waits for it (a
// synchronising call, an event query, an operation queued after it that depends on it), so work that a
// missing dependency leaves unordered is visibly not done yet. One mutex guards everything; callers of the
// functions below hold it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nanoforge::emulator {

std::mutex& runtime_mutex();

// ---- devices ----

struct DeviceProfile {
  const char* architecture;  // "sm_90"
  const char* name;
  int major, minor;
  int multiprocessors;
  size_t shared_per_block;        // without opting in: 48 KB
  size_t shared_per_block_optin;  // with cudaFuncAttributeMaxDynamicSharedMemorySize
  size_t shared_per_multiprocessor;
  size_t memory_bytes;
  bool integrated;  // shares the host's memory (GB10)
  int l2_bytes;
};
const DeviceProfile& device_profile();  // every emulated device has the profile arch= names
int device_count();
int& current_device();  // of the calling host thread, as in CUDA
bool valid_device(int device);

// ---- allocations ----

struct Allocation {
  char* base = nullptr;
  size_t bytes = 0;
  int device = 0;       // -1: pinned host memory (cudaMallocHost)
  uint64_t serial = 0;  // in allocation order, for messages
};
// The allocation that holds [pointer, pointer + bytes) (bytes = 0: pointer may be one past the end).
const Allocation* find_allocation(const void* pointer, size_t bytes = 0);
void* allocate(size_t bytes, int device);  // 256-byte aligned, exactly `bytes` long, filled with 0xFF
bool release(void* pointer, int device);   // false if not the start of an allocation of that kind
// Allocations of `device` whose address appears among the 8-byte words of [bytes, bytes + size).
std::vector<const Allocation*> allocations_named_in(const void* bytes, size_t size, int device);
size_t allocated_bytes(int device);

// ---- streams, operations and events ----

enum class Progress { kDone, kPending };

struct Stream;
// The stream a handle names on the calling thread's current device (nullptr and cudaStreamLegacy are the
// device's legacy default stream); nullptr if the handle is not a live stream.
Stream* resolve_stream(cudaStream_t handle);
int stream_device(const Stream* stream);
// Queues `run` on `stream` after everything CUDA orders before it; returns its position. run() is called
// (with the lock held) until it returns kDone; kPending means "waiting for something outside" (NCCL).
uint64_t enqueue(Stream* stream, std::string what, std::function<Progress()> run,
                 std::vector<std::pair<Stream*, uint64_t>> after = {});
// Runs `stream` up to `position` as far as possible without blocking; true when done.
bool advance(Stream* stream, uint64_t position);
// Runs `stream` up to `position`, releasing the lock while an operation is pending.
void wait_for(std::unique_lock<std::mutex>& lock, Stream* stream, uint64_t position);
uint64_t last_position(const Stream* stream);
// Every stream of `device` (the legacy one first).
std::vector<Stream*> streams_of(int device);
Stream* create_stream(int device, bool blocking, int priority);
void destroy_stream(std::unique_lock<std::mutex>& lock, Stream* stream);

// ---- counters (emulator.h), updated with the lock held ----

struct Counters;
Counters& mutable_counters();

// ---- errors ----

// The calling thread's last error (cudaGetLastError) and the process's sticky error after a failed kernel.
cudaError_t& last_error();
cudaError_t sticky_error();
void set_sticky_error(cudaError_t error, const std::string& message);
// Records a failed call's error and explains it on stderr (the CUDA error name alone rarely says enough).
cudaError_t fail(cudaError_t error, const std::string& explanation);

}  // namespace nanoforge::emulator
