// The CUDA runtime functions nanoforge calls, on the emulator: devices, memory, copies, streams and events
// (runtime.h has the state). They keep CUDA's contracts where a caller could get them wrong: copies check
// their direction and bounds against the allocations; cudaMemcpy waits, cudaMemcpyAsync waits only for
// pageable host memory (as CUDA does); cudaFree waits for the device; events complete when the work queued
// before them has run. A call that fails explains why on stderr.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "emulator/emulator.h"
#include "emulator/runtime.h"

namespace nanoforge::emulator {
namespace {

using Lock = std::unique_lock<std::mutex>;

struct EventRecord {
  double seconds = 0;
};

struct Event {
  bool timing = true;
  int device = 0;
  Stream* stream = nullptr;  // where it was last recorded (nullptr: never)
  uint64_t position = 0;
  std::shared_ptr<EventRecord> record;
};

std::vector<Event*>& live_events() {
  static auto* events = new std::vector<Event*>();
  return *events;
}

Event* resolve_event(cudaEvent_t handle) {
  for (Event* event : live_events()) {
    if (reinterpret_cast<cudaEvent_t>(event) == handle) return event;
  }
  return nullptr;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A call's result: the sticky error of a failed kernel wins over everything.
cudaError_t result(cudaError_t error = cudaSuccess) {
  if (sticky_error() != cudaSuccess) return last_error() = sticky_error();
  if (error != cudaSuccess) last_error() = error;
  return error;
}

cudaError_t no_device(const char* call) {
  return fail(cudaErrorInvalidDevice, fmt::format("{}: the current device {} does not exist ({} emulated)",
                                                  call, current_device(), device_count()));
}

void wait_for_device(Lock& lock, int device) {
  for (Stream* stream : streams_of(device))
    wait_for(lock, stream, last_position(stream));
}

// Host memory (pageable or pinned) or device memory, for checking a copy.
enum class Side { kPageable, kPinned, kDevice, kInvalid };

Side side_of(const void* pointer, size_t bytes, const char* call, const char* role, std::string* problem) {
  if (const Allocation* a = find_allocation(pointer, bytes))
    return a->device < 0 ? Side::kPinned : Side::kDevice;
  if (const Allocation* a = find_allocation(pointer)) {
    *problem = fmt::format(
        "{}: the {} {} lies in allocation #{} ({} bytes at {}), but {} bytes from there run "
        "past its end",
        call, role, pointer, a->serial, a->bytes, static_cast<void*>(a->base), bytes);
    return Side::kInvalid;
  }
  return Side::kPageable;
}

const char* kind_name(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost:
      return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice:
      return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost:
      return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice:
      return "cudaMemcpyDeviceToDevice";
    default:
      return "cudaMemcpyDefault";
  }
}

// Checks a copy against its kind; returns cudaSuccess or the error (already explained).
cudaError_t check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, const char* call,
                       Side* dst_side, Side* src_side) {
  std::string problem;
  *dst_side = side_of(dst, count, call, "destination", &problem);
  if (*dst_side != Side::kInvalid) *src_side = side_of(src, count, call, "source", &problem);
  if (!problem.empty()) return fail(cudaErrorInvalidValue, problem);
  const bool dst_device = *dst_side == Side::kDevice, src_device = *src_side == Side::kDevice;
  bool fits = true;
  switch (kind) {
    case cudaMemcpyHostToHost:
      fits = !dst_device && !src_device;
      break;
    case cudaMemcpyHostToDevice:
      fits = dst_device && !src_device;
      break;
    case cudaMemcpyDeviceToHost:
      fits = !dst_device && src_device;
      break;
    case cudaMemcpyDeviceToDevice:
      fits = dst_device && src_device;
      break;
    case cudaMemcpyDefault:
      break;
    default:
      return fail(cudaErrorInvalidMemcpyDirection,
                  fmt::format("{}: unknown copy kind {}", call, static_cast<int>(kind)));
  }
  if (!fits) {
    return fail(cudaErrorInvalidValue,
                fmt::format("{} of {} bytes with {}: the destination {} is {} and the source {} is {}", call,
                            count, kind_name(kind), dst, dst_device ? "device memory" : "host memory", src,
                            src_device ? "device memory" : "host memory"));
  }
  return cudaSuccess;
}

// Queues a copy on `stream`; pageable host memory is read now (staged) and written before returning, as CUDA
// does for it.
cudaError_t copy(Lock& lock, void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                 cudaStream_t handle, bool synchronous, const char* call) {
  if (sticky_error() != cudaSuccess) return result();
  Side dst_side = Side::kPageable, src_side = Side::kPageable;
  if (const cudaError_t error = check_copy(dst, src, count, kind, call, &dst_side, &src_side);
      error != cudaSuccess)
    return error;
  Stream* stream = resolve_stream(handle);
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle, fmt::format("{}: no such stream", call));
  if (count == 0) return cudaSuccess;
  uint64_t position = 0;
  if (src_side == Side::kPageable && dst_side != Side::kPageable) {
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + count);
    position = enqueue(stream, call, [dst, staged] {
      std::memcpy(dst, staged->data(), staged->size());
      return Progress::kDone;
    });
  } else {
    position = enqueue(stream, call, [dst, src, count] {
      std::memmove(dst, src, count);
      return Progress::kDone;
    });
  }
  if (synchronous || dst_side == Side::kPageable || settings().launch_blocking)
    wait_for(lock, stream, position);
  return result();
}

cudaError_t memset_on(Lock& lock, void* dst, int value, size_t count, cudaStream_t handle, const char* call) {
  if (sticky_error() != cudaSuccess) return result();
  const Allocation* a = find_allocation(dst, count);
  if (count > 0 && (a == nullptr || a->device < 0)) {
    return fail(cudaErrorInvalidValue,
                fmt::format("{}: {} bytes at {} are not inside one device allocation", call, count, dst));
  }
  Stream* stream = resolve_stream(handle);
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle, fmt::format("{}: no such stream", call));
  if (count == 0) return cudaSuccess;
  const uint64_t position = enqueue(stream, call, [dst, value, count] {
    std::memset(dst, value, count);
    return Progress::kDone;
  });
  if (settings().launch_blocking) wait_for(lock, stream, position);
  return result();
}

size_t host_memory_bytes(const char* field) {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  size_t kilobytes = 0;
  std::string unit;
  while (meminfo >> name >> kilobytes >> unit) {
    if (name == field) return kilobytes * 1024;
  }
  return 0;
}

}  // namespace
}  // namespace nanoforge::emulator

using namespace nanoforge::emulator;

extern "C" {

// ---- devices ----

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  if (*count == 0) return last_error() = cudaErrorNoDevice;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) {
    return fail(cudaErrorInvalidDevice,
                fmt::format("cudaSetDevice({}): {} GPU(s) are emulated (NANOFORGE_EMULATOR=devices=N)",
                            device, device_count()));
  }
  current_device() = device;
  return result();
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device) {
  if (!valid_device(device))
    return fail(cudaErrorInvalidDevice, fmt::format("cudaGetDeviceProperties({})", device));
  const DeviceProfile& p = device_profile();
  *properties = cudaDeviceProp{};
  std::snprintf(properties->name, sizeof(properties->name), "%s", p.name);
  properties->totalGlobalMem = std::min(p.memory_bytes, host_memory_bytes("MemTotal:"));
  properties->sharedMemPerBlock = p.shared_per_block;
  properties->sharedMemPerBlockOptin = p.shared_per_block_optin;
  properties->sharedMemPerMultiprocessor = p.shared_per_multiprocessor;
  properties->regsPerBlock = 65536;
  properties->regsPerMultiprocessor = 65536;
  properties->warpSize = 32;
  properties->maxThreadsPerBlock = 1024;
  properties->maxThreadsDim[0] = 1024;
  properties->maxThreadsDim[1] = 1024;
  properties->maxThreadsDim[2] = 64;
  properties->maxGridSize[0] = 2147483647;
  properties->maxGridSize[1] = 65535;
  properties->maxGridSize[2] = 65535;
  properties->totalConstMem = 65536;
  properties->major = p.major;
  properties->minor = p.minor;
  properties->multiProcessorCount = p.multiprocessors;
  properties->maxThreadsPerMultiProcessor = p.major == 9 ? 2048 : 1536;
  properties->maxBlocksPerMultiProcessor = 32;
  properties->integrated = p.integrated ? 1 : 0;
  properties->l2CacheSize = p.l2_bytes;
  properties->concurrentKernels = 1;
  properties->unifiedAddressing = 1;
  properties->canMapHostMemory = 1;
  properties->streamPrioritiesSupported = 1;
  properties->pciBusID = device + 1;
  return result();
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (!valid_device(device))
    return fail(cudaErrorInvalidDevice, fmt::format("cudaDeviceGetAttribute on device {}", device));
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, device);
  switch (attribute) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = p.maxThreadsPerBlock;
      break;
    case cudaDevAttrMaxBlockDimX:
    case cudaDevAttrMaxBlockDimY:
    case cudaDevAttrMaxBlockDimZ:
      *value = p.maxThreadsDim[attribute - cudaDevAttrMaxBlockDimX];
      break;
    case cudaDevAttrMaxGridDimX:
    case cudaDevAttrMaxGridDimY:
    case cudaDevAttrMaxGridDimZ:
      *value = p.maxGridSize[attribute - cudaDevAttrMaxGridDimX];
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(p.sharedMemPerBlock);
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = static_cast<int>(p.sharedMemPerMultiprocessor);
      break;
    case cudaDevAttrWarpSize:
      *value = p.warpSize;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = p.multiProcessorCount;
      break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = p.maxThreadsPerMultiProcessor;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = p.major;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = p.minor;
      break;
    case cudaDevAttrIntegrated:
      *value = p.integrated;
      break;
    case cudaDevAttrL2CacheSize:
      *value = p.l2CacheSize;
      break;
    case cudaDevAttrConcurrentKernels:
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrCanMapHostMemory:
    case cudaDevAttrStreamPrioritiesSupported:
      *value = 1;
      break;
    default:
      return fail(cudaErrorInvalidValue,
                  fmt::format("cudaDeviceGetAttribute: attribute {} is not emulated; add it "
                              "to emulator/runtime_api.cpp",
                              static_cast<int>(attribute)));
  }
  return result();
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  if (!valid_device(current_device())) return no_device("cudaMemGetInfo");
  const size_t total = std::min(device_profile().memory_bytes, host_memory_bytes("MemTotal:"));
  const size_t used = allocated_bytes(current_device());
  *total_bytes = total;
  *free_bytes = std::min(total > used ? total - used : 0, host_memory_bytes("MemAvailable:"));
  return result();
}

cudaError_t cudaDeviceSynchronize() {
  Lock lock(runtime_mutex());
  if (!valid_device(current_device())) return no_device("cudaDeviceSynchronize");
  wait_for_device(lock, current_device());
  return result();
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  *least = 0;
  *greatest = -5;  // an H200's range
  return result();
}

cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int length, int device) {
  if (!valid_device(device))
    return fail(cudaErrorInvalidDevice, fmt::format("cudaDeviceGetPCIBusId({})", device));
  std::snprintf(bus_id, static_cast<size_t>(length), "0000:%02x:00.0", device + 1);
  return result();
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

// ---- errors ----

cudaError_t cudaGetLastError() {
  const cudaError_t error = sticky_error() != cudaSuccess ? sticky_error() : last_error();
  last_error() = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  return sticky_error() != cudaSuccess ? sticky_error() : last_error();
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorNotSupported:
      return "operation not supported";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    default:
      return "unknown error";
  }
}

// ---- memory ----

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  *pointer = nullptr;
  if (sticky_error() != cudaSuccess) return result();
  if (!valid_device(current_device())) return no_device("cudaMalloc");
  if (bytes == 0) return cudaSuccess;
  size_t free_bytes = host_memory_bytes("MemAvailable:");
  if (bytes > free_bytes) return last_error() = cudaErrorMemoryAllocation;
  *pointer = allocate(bytes, current_device());
  return *pointer != nullptr ? cudaSuccess : (last_error() = cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* pointer) {
  Lock lock(runtime_mutex());
  if (pointer == nullptr) return result();
  const Allocation* a = find_allocation(pointer);
  if (a == nullptr || a->base != pointer || a->device < 0) {
    return fail(cudaErrorInvalidValue,
                fmt::format("cudaFree({}): not the start of a device allocation", pointer));
  }
  wait_for_device(lock, a->device);  // cudaFree waits for the device
  release(pointer, a->device);
  return result();
}

cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  *pointer = allocate(bytes, -1);
  return bytes == 0 || *pointer != nullptr ? result() : (last_error() = cudaErrorMemoryAllocation);
}

cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned int /*flags*/) {
  return cudaMallocHost(pointer, bytes);
}

cudaError_t cudaFreeHost(void* pointer) {
  Lock lock(runtime_mutex());
  if (pointer == nullptr) return result();
  for (int device = 0; device < device_count(); ++device)
    wait_for_device(lock, device);
  if (!release(pointer, -1)) {
    return fail(cudaErrorInvalidValue,
                fmt::format("cudaFreeHost({}): not memory from cudaMallocHost", pointer));
  }
  return result();
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  Lock lock(runtime_mutex());
  return copy(lock, dst, src, count, kind, nullptr, /*synchronous=*/true, "cudaMemcpy");
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  Lock lock(runtime_mutex());
  return copy(lock, dst, src, count, kind, stream, /*synchronous=*/false, "cudaMemcpyAsync");
}

cudaError_t cudaMemset(void* dst, int value, size_t count) {
  Lock lock(runtime_mutex());
  return memset_on(lock, dst, value, count, nullptr, "cudaMemset");
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t stream) {
  Lock lock(runtime_mutex());
  return memset_on(lock, dst, value, count, stream, "cudaMemsetAsync");
}

// ---- streams ----

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* handle, unsigned int flags, int priority) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  if (!valid_device(current_device())) return no_device("cudaStreamCreate");
  const bool blocking = (flags & cudaStreamNonBlocking) == 0;
  *handle = reinterpret_cast<cudaStream_t>(create_stream(current_device(), blocking, priority));
  return result();
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* handle, unsigned int flags) {
  return cudaStreamCreateWithPriority(handle, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t* handle) {
  return cudaStreamCreateWithPriority(handle, cudaStreamDefault, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t handle) {
  Lock lock(runtime_mutex());
  Stream* stream = resolve_stream(handle);
  if (stream == nullptr || handle == nullptr || handle == cudaStreamLegacy)
    return fail(cudaErrorInvalidResourceHandle,
                "cudaStreamDestroy: not a stream created by cudaStreamCreate");
  destroy_stream(lock, stream);
  return result();
}

cudaError_t cudaStreamQuery(cudaStream_t handle) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  Stream* stream = resolve_stream(handle);
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaStreamQuery: no such stream");
  if (!advance(stream, last_position(stream)))
    return sticky_error() != cudaSuccess ? result() : cudaErrorNotReady;
  return result();
}

cudaError_t cudaStreamSynchronize(cudaStream_t handle) {
  Lock lock(runtime_mutex());
  Stream* stream = resolve_stream(handle);
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: no such stream");
  wait_for(lock, stream, last_position(stream));
  return result();
}

cudaError_t cudaStreamWaitEvent(cudaStream_t handle, cudaEvent_t event_handle, unsigned int /*flags*/) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  Stream* stream = resolve_stream(handle);
  Event* event = resolve_event(event_handle);
  if (stream == nullptr || event == nullptr)
    return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: no such stream or event");
  if (event->stream == nullptr) return result();  // never recorded: nothing to wait for
  enqueue(stream, "cudaStreamWaitEvent", [] { return Progress::kDone; }, {{event->stream, event->position}});
  return result();
}

// ---- events ----

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* handle, unsigned int flags) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  auto* event = new Event();
  event->timing = (flags & cudaEventDisableTiming) == 0;
  event->device = current_device();
  live_events().push_back(event);
  *handle = reinterpret_cast<cudaEvent_t>(event);
  return result();
}

cudaError_t cudaEventCreate(cudaEvent_t* handle) {
  return cudaEventCreateWithFlags(handle, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t handle) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  auto& events = live_events();
  const auto found = std::find(events.begin(), events.end(), reinterpret_cast<Event*>(handle));
  if (found == events.end()) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: no such event");
  delete *found;
  events.erase(found);
  return result();
}

cudaError_t cudaEventRecord(cudaEvent_t handle, cudaStream_t stream_handle) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  Event* event = resolve_event(handle);
  Stream* stream = resolve_stream(stream_handle);
  if (event == nullptr || stream == nullptr)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: no such event or stream");
  auto record = std::make_shared<EventRecord>();
  event->stream = stream;
  event->record = record;
  event->position = enqueue(stream, "cudaEventRecord", [record] {
    record->seconds = now_seconds();
    return Progress::kDone;
  });
  return result();
}

cudaError_t cudaEventQuery(cudaEvent_t handle) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  Event* event = resolve_event(handle);
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaEventQuery: no such event");
  if (event->stream != nullptr && !advance(event->stream, event->position))
    return sticky_error() != cudaSuccess ? result() : cudaErrorNotReady;
  return result();
}

cudaError_t cudaEventSynchronize(cudaEvent_t handle) {
  Lock lock(runtime_mutex());
  Event* event = resolve_event(handle);
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: no such event");
  if (event->stream != nullptr) wait_for(lock, event->stream, event->position);
  return result();
}

cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start_handle, cudaEvent_t end_handle) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  Event* start = resolve_event(start_handle);
  Event* end = resolve_event(end_handle);
  if (start == nullptr || end == nullptr || !start->timing || !end->timing || start->stream == nullptr ||
      end->stream == nullptr) {
    return fail(cudaErrorInvalidResourceHandle,
                "cudaEventElapsedTime: both events must exist, time, and have been recorded");
  }
  if (!advance(start->stream, start->position) || !advance(end->stream, end->position))
    return cudaErrorNotReady;
  *milliseconds = static_cast<float>(1e3 * (end->record->seconds - start->record->seconds));
  return result();
}

}  // extern "C"
