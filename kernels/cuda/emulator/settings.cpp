// The emulator's settings from the environment (emulator.h), read once; a value that cannot be read stops
// the program with the accepted values rather than being ignored.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cuda/emulator/emulator.h"
#include "kernels/cuda/emulator/runtime.h"

namespace nanoforge::emulator {
namespace {

[[noreturn]] void bad_value(const char* variable, const char* value, const char* accepted) {
  std::fprintf(stderr, "nanoforge CUDA emulator: %s=%s is not understood; use %s\n", variable, value,
               accepted);
  std::exit(2);
}

Settings read_settings() {
  Settings s;
  if (const char* value = std::getenv("NANOFORGE_EMULATOR_SCHEDULES")) {
    const std::string text = value;
    if (text == "rotate") {
      s.schedule_mode = ScheduleMode::kRotate;
    } else if (text == "compare") {
      s.schedule_mode = ScheduleMode::kCompare;
    } else {
      s.schedule_mode = ScheduleMode::kFixed;
      bool found = false;
      for (int i = 0; i < kScheduleCount; ++i) {
        if (text == schedule_name(static_cast<Schedule>(i))) {
          s.fixed_schedule = static_cast<Schedule>(i);
          found = true;
        }
      }
      if (!found)
        bad_value("NANOFORGE_EMULATOR_SCHEDULES", value,
                  "rotate, compare, in-order, reversed, random or warp-ahead");
    }
  }
  if (const char* value = std::getenv("NANOFORGE_EMULATOR_SEED")) {
    char* end = nullptr;
    s.seed = std::strtoull(value, &end, 10);
    if (end == value || *end != '\0') bad_value("NANOFORGE_EMULATOR_SEED", value, "a non-negative integer");
  }
  if (const char* value = std::getenv("NANOFORGE_EMULATOR_MMA")) {
    if (std::strcmp(value, "nearest") == 0) {
      s.mma_rounding = MmaRounding::kNearest;
    } else if (std::strcmp(value, "truncate") == 0) {
      s.mma_rounding = MmaRounding::kTruncate;
    } else {
      bad_value("NANOFORGE_EMULATOR_MMA", value, "nearest or truncate");
    }
  }
  if (const char* value = std::getenv("NANOFORGE_EMULATOR_DEVICES")) {
    char* end = nullptr;
    const long count = std::strtol(value, &end, 10);
    if (end == value || *end != '\0' || count < 0 || count > 16)
      bad_value("NANOFORGE_EMULATOR_DEVICES", value, "a GPU count from 0 to 16");
    s.device_count = static_cast<int>(count);
  }
  if (const char* value = std::getenv("NANOFORGE_EMULATOR_ARCH")) {
    const std::string text = value;
    if (text == "sm_90" || text == "90") {
      s.architecture = "sm_90";
    } else if (text == "sm_121" || text == "121") {
      s.architecture = "sm_121";
    } else {
      bad_value("NANOFORGE_EMULATOR_ARCH", value, "sm_90 (H200) or sm_121 (GB10)");
    }
  }
  if (const char* value = std::getenv("CUDA_LAUNCH_BLOCKING"))
    s.launch_blocking = std::strcmp(value, "1") == 0;
  if (const char* value = std::getenv("NANOFORGE_EMULATOR_BREAK")) {
    unsigned b[3] = {}, t[3] = {};
    if (std::sscanf(value, "%u,%u,%u/%u,%u,%u", &b[0], &b[1], &b[2], &t[0], &t[1], &t[2]) != 6)
      bad_value("NANOFORGE_EMULATOR_BREAK", value, "bx,by,bz/tx,ty,tz (a block index, a thread index)");
    s.break_enabled = true;
    s.break_block = {b[0], b[1], b[2]};
    s.break_thread = {t[0], t[1], t[2]};
  }
  return s;
}

}  // namespace

Settings& settings() {
  static Settings* instance = new Settings(read_settings());
  return *instance;
}

Counters& mutable_counters() {
  static Counters* instance = new Counters();
  return *instance;
}

Counters counters() {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  return mutable_counters();
}

}  // namespace nanoforge::emulator

extern "C" __attribute__((noinline)) void nanoforge_emulator_break() {
  asm volatile("");  // a place for a breakpoint that the optimiser keeps
}
