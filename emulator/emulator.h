// The CUDA emulator's settings and counters. Settings come once from the environment variable
// NANOFORGE_EMULATOR, e.g. "schedules=compare mma=truncate arch=sm_121" (docs/kernels.md), and tests may
// change them; counters say what the emulator did. Only in the emulation build (NANOFORGE_CUDA_EMULATION).
#pragma once

#include <cstdint>
#include <string>

#include "emulator/execution.h"

namespace nanoforge::emulator {

// How tensor-core products are accumulated: rounded to nearest (the default), or toward zero after every
// addition: the most a tensor core's accumulation may lose, which the GPU tests' error bounds must cover.
enum class MmaRounding : uint8_t { kNearest, kTruncate };

// Which schedules a launch runs under:
//   kRotate  one per launch, taking in-order, reversed, random and warp-ahead in turn (the default);
//   kCompare all four, each from the same inputs, and their results must agree bit for bit;
//   kFixed   always `fixed`.
enum class ScheduleMode : uint8_t { kRotate, kCompare, kFixed };

// A failure the emulated NCCL injects into one rank, to test what its peers do
// (nccl_fault=RANK:ACTION@POINT): the rank dies (SIGKILL), stalls (SIGSTOP: the whole process freezes, as a
// machine that hangs) or reports an asynchronous error, at its lazy connection setup (first collective), when
// its k-th collective (from 0) runs, or at teardown (ncclCommFinalize / ncclCommDestroy).
struct NcclFault {
  enum class Action : uint8_t { kNone, kDie, kStall, kError };
  enum class Point : uint8_t { kConnect, kCollective, kDestroy };
  Action action = Action::kNone;
  Point point = Point::kConnect;
  int rank = 0;
  int64_t collective = 0;  // for kCollective
};

struct Settings {
  ScheduleMode schedule_mode = ScheduleMode::kRotate;  // schedules=rotate|compare|in-order|reversed|...
  Schedule fixed_schedule = Schedule::kInOrder;
  uint64_t seed = 1;                                 // seed=N
  MmaRounding mma_rounding = MmaRounding::kNearest;  // mma=nearest|truncate
  int device_count = 1;                              // devices=N
  std::string architecture = "sm_90";                // arch=sm_90|sm_121
  bool launch_blocking = false;  // CUDA_LAUNCH_BLOCKING=1 (CUDA's own): launches run at once
  bool report = false;           // report=1: print the counters at exit
  NcclFault nccl_fault;          // nccl_fault=1:die@connect, 1:stall@collective-3, 0:error@collective-2, ...
  bool cublaslt_no_algorithm = false;  // cublaslt=no-algorithm: the heuristic finds no algorithm
  // break=bx,by,bz/tx,ty,tz: nanoforge_emulator_break() is called when that thread of that block starts
  // (break on it in gdb to stop inside one emulated thread).
  bool break_enabled = false;
  uint3 break_block{0, 0, 0};
  uint3 break_thread{0, 0, 0};
};

// The process's settings (read from the environment on first use).
Settings& settings();

struct Counters {
  int64_t launches = 0;           // kernel launches executed
  int64_t blocks = 0;             // blocks run, over every schedule
  int64_t compared_launches = 0;  // launches whose schedules agreed bit for bit
  int64_t atomic_launches = 0;    // launches not compared because they add floats with atomics
  int64_t gemms = 0;              // cuBLASLt matmuls
};
Counters counters();

// Whether this process runs CUDA on the emulator (true in the emulation build).
inline constexpr bool kEmulated = true;

}  // namespace nanoforge::emulator

// Called when the thread that NANOFORGE_EMULATOR's break= names starts: `break nanoforge_emulator_break`.
extern "C" void nanoforge_emulator_break();
