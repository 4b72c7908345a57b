// The emulator's settings from the environment (emulator.h): NANOFORGE_EMULATOR holds them all as
// space-separated key=value pairs (one variable, so that a test or a launcher passes them as one), read once;
// a setting that cannot be read stops the program with what is accepted rather than being ignored.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>

#include "emulator/emulator.h"
#include "emulator/runtime.h"

namespace nanoforge::emulator {
namespace {

constexpr const char* kAccepted =
    "space-separated key=value settings: schedules=rotate|compare|in-order|reversed|random|warp-ahead, "
    "seed=N, "
    "mma=nearest|truncate, arch=sm_90|sm_121, devices=N (0 to 16), break=bx,by,bz/tx,ty,tz, report=0|1, "
    "nccl_fault=RANK:die|stall|error@connect|collective-K|destroy, cublaslt=no-algorithm";

[[noreturn]] void bad_setting(const std::string& setting) {
  std::fprintf(stderr, "nanoforge CUDA emulator: NANOFORGE_EMULATOR: '%s' is not understood; it takes %s\n",
               setting.c_str(), kAccepted);
  std::exit(2);
}

// RANK:ACTION@POINT, e.g. 1:die@connect, 2:stall@collective-3, 0:error@destroy.
bool parse_nccl_fault(const std::string& value, NcclFault* fault) {
  const size_t colon = value.find(':'), at = value.find('@');
  if (colon == std::string::npos || at == std::string::npos || at < colon) return false;
  char* end = nullptr;
  const std::string rank = value.substr(0, colon);
  fault->rank = static_cast<int>(std::strtol(rank.c_str(), &end, 10));
  if (rank.empty() || *end != '\0' || fault->rank < 0) return false;
  const std::string action = value.substr(colon + 1, at - colon - 1), point = value.substr(at + 1);
  if (action == "die") {
    fault->action = NcclFault::Action::kDie;
  } else if (action == "stall") {
    fault->action = NcclFault::Action::kStall;
  } else if (action == "error") {
    fault->action = NcclFault::Action::kError;
  } else {
    return false;
  }
  constexpr std::string_view kCollective = "collective-";
  if (point == "connect") {
    fault->point = NcclFault::Point::kConnect;
  } else if (point == "destroy") {
    fault->point = NcclFault::Point::kDestroy;
  } else if (point.starts_with(kCollective)) {
    fault->point = NcclFault::Point::kCollective;
    const std::string k = point.substr(kCollective.size());
    fault->collective = std::strtoll(k.c_str(), &end, 10);
    if (k.empty() || *end != '\0' || fault->collective < 0) return false;
  } else {
    return false;
  }
  return true;
}

void apply_setting(Settings& s, const std::string& setting) {
  const size_t equals = setting.find('=');
  if (equals == std::string::npos) bad_setting(setting);
  const std::string key = setting.substr(0, equals), value = setting.substr(equals + 1);
  if (key == "schedules") {
    if (value == "rotate") {
      s.schedule_mode = ScheduleMode::kRotate;
      return;
    }
    if (value == "compare") {
      s.schedule_mode = ScheduleMode::kCompare;
      return;
    }
    for (int i = 0; i < kScheduleCount; ++i) {
      if (value == schedule_name(static_cast<Schedule>(i))) {
        s.schedule_mode = ScheduleMode::kFixed;
        s.fixed_schedule = static_cast<Schedule>(i);
        return;
      }
    }
  } else if (key == "seed") {
    char* end = nullptr;
    s.seed = std::strtoull(value.c_str(), &end, 10);
    if (!value.empty() && *end == '\0') return;
  } else if (key == "mma") {
    if (value == "nearest" || value == "truncate") {
      s.mma_rounding = value == "nearest" ? MmaRounding::kNearest : MmaRounding::kTruncate;
      return;
    }
  } else if (key == "devices") {
    char* end = nullptr;
    const long count = std::strtol(value.c_str(), &end, 10);
    if (!value.empty() && *end == '\0' && count >= 0 && count <= 16) {
      s.device_count = static_cast<int>(count);
      return;
    }
  } else if (key == "arch") {
    if (value == "sm_90" || value == "sm_121") {
      s.architecture = value;
      return;
    }
  } else if (key == "report") {
    if (value == "0" || value == "1") {
      s.report = value == "1";
      return;
    }
  } else if (key == "nccl_fault") {
    if (parse_nccl_fault(value, &s.nccl_fault)) return;
  } else if (key == "cublaslt") {
    if (value == "no-algorithm") {
      s.cublaslt_no_algorithm = true;
      return;
    }
  } else if (key == "break") {
    unsigned b[3] = {}, t[3] = {};
    if (std::sscanf(value.c_str(), "%u,%u,%u/%u,%u,%u", &b[0], &b[1], &b[2], &t[0], &t[1], &t[2]) == 6) {
      s.break_enabled = true;
      s.break_block = {b[0], b[1], b[2]};
      s.break_thread = {t[0], t[1], t[2]};
      return;
    }
  }
  bad_setting(setting);
}

Settings read_settings() {
  Settings s;
  if (const char* text = std::getenv("NANOFORGE_EMULATOR")) {
    std::istringstream settings_text(text);
    for (std::string setting; settings_text >> setting;)
      apply_setting(s, setting);
  }
  if (const char* value = std::getenv("CUDA_LAUNCH_BLOCKING"))
    s.launch_blocking = std::strcmp(value, "1") == 0;
  return s;
}

void print_report() {
  const Counters c = counters();
  std::fprintf(
      stderr,
      "nanoforge CUDA emulator: %lld kernel launches (%lld blocks run), %lld compared under the four "
      "schedules, %lld with float atomics not compared, %lld cuBLASLt GEMMs\n",
      static_cast<long long>(c.launches), static_cast<long long>(c.blocks),
      static_cast<long long>(c.compared_launches), static_cast<long long>(c.atomic_launches),
      static_cast<long long>(c.gemms));
}

}  // namespace

Settings& settings() {
  static Settings* instance = [] {
    auto* s = new Settings(read_settings());
    if (s->report) std::atexit(&print_report);
    return s;
  }();
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
