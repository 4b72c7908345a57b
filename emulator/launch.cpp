// Kernel launches on the emulator (launch.h): the checks the driver makes at launch (block and grid limits,
// dynamic shared memory against 48 KB, the kernel's opt-in and the architecture's maximum), a check that
// every pointer argument is memory of the launching GPU, and the execution under one schedule or, in the
// compare mode, under all of them from the same inputs, whose results must agree bit for bit.
#include "emulator/launch.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "emulator/emulator.h"
#include "emulator/execution.h"
#include "emulator/runtime.h"

namespace nanoforge::emulator {
namespace {

std::map<const void*, int>& max_dynamic_shared() {
  static auto* attributes = new std::map<const void*, int>();
  return *attributes;
}

std::string where(const std::source_location& site) {
  const char* path = site.file_name();
  const char* kernels = std::strstr(path, "kernels/");
  return fmt::format("{}:{}", kernels != nullptr ? kernels : path, site.line());
}

std::string describe(const LaunchRequest& r) {
  return fmt::format(
      "kernel {} (launched at {}) with grid ({}, {}, {}), block ({}, {}, {}), {} bytes of dynamic "
      "shared memory",
      r.kernel_name, where(r.site), r.grid.x, r.grid.y, r.grid.z, r.block.x, r.block.y, r.block.z,
      r.dynamic_shared_bytes);
}

[[noreturn]] void fatal(const std::string& message) {
  std::fprintf(stderr, "nanoforge CUDA emulator: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

// The refused launches CUDA reports through cudaGetLastError; "" when the configuration is fine.
std::string configuration_problem(const LaunchRequest& r, cudaError_t* error) {
  const dim3& b = r.block;
  const dim3& g = r.grid;
  *error = cudaErrorInvalidConfiguration;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (threads == 0 || threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64) {
    return fmt::format(
        "a block of ({}, {}, {}) threads: at most 1024 threads, (1024, 1024, 64) per dimension, "
        "none empty",
        b.x, b.y, b.z);
  }
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
    return fmt::format("a grid of ({}, {}, {}) blocks: at most (2^31 - 1, 65535, 65535), none empty", g.x,
                       g.y, g.z);
  }
  *error = cudaErrorInvalidValue;
  const DeviceProfile& profile = device_profile();
  if (r.dynamic_shared_bytes > profile.shared_per_block_optin) {
    return fmt::format("{} bytes of dynamic shared memory: an {} block has at most {}",
                       r.dynamic_shared_bytes, profile.architecture, profile.shared_per_block_optin);
  }
  size_t allowed = profile.shared_per_block;
  const auto attribute = max_dynamic_shared().find(r.kernel);
  if (attribute != max_dynamic_shared().end()) allowed = static_cast<size_t>(attribute->second);
  if (r.dynamic_shared_bytes > allowed) {
    return fmt::format(
        "{} bytes of dynamic shared memory, above the {} this kernel may use: beyond 48 KB, call "
        "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) first",
        r.dynamic_shared_bytes, allowed);
  }
  return "";
}

// Copies of the allocations a launch can reach through its arguments, to run it again from the same inputs.
struct Snapshot {
  std::vector<const Allocation*> allocations;
  std::vector<std::vector<unsigned char>> contents;

  void take() {
    contents.resize(allocations.size());
    for (size_t i = 0; i < allocations.size(); ++i)
      contents[i].assign(allocations[i]->base, allocations[i]->base + allocations[i]->bytes);
  }
  void restore() const {
    for (size_t i = 0; i < allocations.size(); ++i)
      std::memcpy(allocations[i]->base, contents[i].data(), contents[i].size());
  }
};

uint64_t launch_index = 0;

void execute(const LaunchRequest& r, int device) {
  const uint64_t index = launch_index++;
  LaunchDescription description;
  description.kernel_name = r.kernel_name;
  description.site = r.site;
  description.grid = r.grid;
  description.block = r.block;
  description.dynamic_shared_bytes = r.dynamic_shared_bytes;
  description.invoke = r.invoke;
  description.arguments = r.arguments.get();
  const Settings& s = settings();
  const uint64_t seed = s.seed * 0x9E3779B97F4A7C15ull + index;
  const int64_t blocks = int64_t{r.grid.x} * r.grid.y * r.grid.z;
  Counters& count = mutable_counters();
  ++count.launches;

  auto run = [&](Schedule schedule, uint64_t run_seed) {
    count.blocks += blocks;
    const LaunchOutcome outcome = run_launch(description, schedule, run_seed);
    if (outcome.trapped) set_sticky_error(cudaErrorLaunchFailure, outcome.message);
    return outcome;
  };

  if (s.schedule_mode != ScheduleMode::kCompare) {
    const Schedule schedule = s.schedule_mode == ScheduleMode::kFixed
                                  ? s.fixed_schedule
                                  : static_cast<Schedule>(index % kScheduleCount);
    run(schedule, seed);
    return;
  }

  Snapshot before;
  before.allocations = allocations_named_in(r.arguments.get(), r.arguments_size, device);
  before.take();
  const LaunchOutcome first = run(Schedule::kInOrder, seed);
  if (first.trapped) return;
  Snapshot first_result = before;
  first_result.take();
  for (int i = 1; i < kScheduleCount; ++i) {
    const auto schedule = static_cast<Schedule>(i);
    before.restore();
    // Another seed also draws another wmma element-to-lane mapping, which must not change the result either.
    const LaunchOutcome outcome = run(schedule, seed + 0x51ED2701ull * static_cast<uint64_t>(i));
    if (outcome.trapped) return;
    if (first.used_float_atomics || outcome.used_float_atomics) continue;
    for (size_t a = 0; a < before.allocations.size(); ++a) {
      const Allocation& allocation = *before.allocations[a];
      const std::vector<unsigned char>& expected = first_result.contents[a];
      if (std::memcmp(allocation.base, expected.data(), expected.size()) == 0) continue;
      size_t byte = 0;
      while (static_cast<unsigned char>(allocation.base[byte]) == expected[byte])
        ++byte;
      const size_t word = byte / 4 * 4;
      uint32_t got = 0, want = 0;
      std::memcpy(&got, allocation.base + word, std::min<size_t>(4, allocation.bytes - word));
      std::memcpy(&want, expected.data() + word, std::min<size_t>(4, allocation.bytes - word));
      fatal(fmt::format(
          "{} gives different bits under the {} and {} schedules: allocation #{} ({} bytes at {}) "
          "first differs at byte {} (32-bit word {:#010x} against {:#010x}). Threads of a block "
          "race, a __syncthreads or __syncwarp is missing, or the result depends on the order of "
          "blocks or on which lane holds which wmma fragment element.",
          describe(r), schedule_name(Schedule::kInOrder), schedule_name(schedule), allocation.serial,
          allocation.bytes, static_cast<void*>(allocation.base), byte, want, got));
    }
  }
  if (first.used_float_atomics) {
    ++count.atomic_launches;
  } else {
    ++count.compared_launches;
  }
}

}  // namespace

std::string kernel_name_from(const char* pretty_function) {
  std::string text = pretty_function;
  const size_t start = text.find("kKernel = ");
  if (start == std::string::npos) return text;
  size_t end = start + 10;
  int depth = 0;
  while (end < text.size() && !(depth == 0 && (text[end] == ';' || text[end] == ']'))) {
    if (text[end] == '<' || text[end] == '(') ++depth;
    if (text[end] == '>' || text[end] == ')') --depth;
    ++end;
  }
  std::string name = text.substr(start + 10, end - start - 10);
  // Drop the namespaces before the kernel's own name.
  depth = 0;
  size_t last_scope = std::string::npos;
  for (size_t i = 0; i + 1 < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (depth == 0 && name[i] == ':' && name[i + 1] == ':') last_scope = i + 1;
  }
  return last_scope == std::string::npos ? name : name.substr(last_scope + 1);
}

void submit_launch(LaunchRequest request) {
  std::unique_lock<std::mutex> lock(runtime_mutex());
  if (sticky_error() != cudaSuccess) {
    last_error() = sticky_error();
    return;
  }
  cudaError_t error = cudaSuccess;
  if (const std::string problem = configuration_problem(request, &error); !problem.empty()) {
    fail(error, fmt::format("{} is refused: {}", describe(request), problem));
    return;
  }
  Stream* stream = resolve_stream(request.stream);
  if (stream == nullptr) {
    fail(cudaErrorInvalidResourceHandle, fmt::format("{}: no such stream", describe(request)));
    return;
  }
  const int device = stream_device(stream);
  for (const auto& [position, pointer] : request.pointer_arguments) {
    if (pointer == nullptr) continue;
    const Allocation* a = find_allocation(pointer);
    if (a == nullptr) {
      fatal(fmt::format(
          "{}: argument {} is {}, which is not GPU memory (host memory, freed memory or garbage); a "
          "GPU would fault on it",
          describe(request), position, pointer));
    }
    if (a->device >= 0 && a->device != device) {
      fatal(fmt::format("{}: argument {} ({}) is memory of GPU {}, but the kernel runs on GPU {}",
                        describe(request), position, pointer, a->device, device));
    }
  }
  auto shared = std::make_shared<const LaunchRequest>(std::move(request));
  const uint64_t position = enqueue(stream, shared->kernel_name, [shared, device] {
    execute(*shared, device);
    return Progress::kDone;
  });
  if (settings().launch_blocking) wait_for(lock, stream, position);
}

}  // namespace nanoforge::emulator

extern "C" cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attribute, int value) {
  using namespace nanoforge::emulator;
  std::lock_guard<std::mutex> lock(runtime_mutex());
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return last_error() = cudaSuccess;
  const DeviceProfile& profile = device_profile();
  if (value < 0 || static_cast<size_t>(value) > profile.shared_per_block_optin) {
    return fail(
        cudaErrorInvalidValue,
        fmt::format("cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize, {}): an {} block has "
                    "at most {} bytes of shared memory",
                    value, profile.architecture, profile.shared_per_block_optin));
  }
  max_dynamic_shared()[kernel] = value;
  return cudaSuccess;
}
