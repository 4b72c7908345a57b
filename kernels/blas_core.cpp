// better_blas_coretype: compares OpenBLAS's kernel choice with what the CPU supports. x86-64 asks the
// compiler's CPU-feature builtins; aarch64 reads the kernel's HWCAP words, as OpenBLAS itself does.
#include "kernels/blas_core.h"

#include <cblas.h>

#include <fmt/format.h>
#include <unistd.h>

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include <cstdio>
#include <cstdlib>

namespace nanoforge {
namespace {

// The Linux arm64 HWCAP bits the choice reads (arch/arm64/include/uapi/asm/hwcap.h, a stable ABI), spelled
// out so that the rule compiles and is tested on every architecture.
namespace arm_hwcap {
constexpr uint64_t kAsimd = 1u << 1;
constexpr uint64_t kAtomics = 1u << 8;  // LSE (ARMv8.1)
constexpr uint64_t kFphp = 1u << 9;     // half-precision scalar (ARMv8.2)
constexpr uint64_t kAsimdhp = 1u << 10;
constexpr uint64_t kAsimdrdm = 1u << 12;  // ARMv8.1
constexpr uint64_t kJscvt = 1u << 13;     // ARMv8.3
constexpr uint64_t kFcma = 1u << 14;      // ARMv8.3
constexpr uint64_t kLrcpc = 1u << 15;     // ARMv8.3, in -mcpu=neoverse-n1
constexpr uint64_t kAsimddp = 1u << 20;   // dot product (ARMv8.2 option, ARMv8.4)
constexpr uint64_t kSve = 1u << 22;
}  // namespace arm_hwcap
namespace arm_hwcap2 {
constexpr uint64_t kSve2 = 1u << 1;
constexpr uint64_t kFrint = 1u << 8;  // ARMv8.5
constexpr uint64_t kSvebf16 = 1u << 12;
constexpr uint64_t kBf16 = 1u << 14;
}  // namespace arm_hwcap2
#if defined(__aarch64__)
static_assert(arm_hwcap::kAsimd == HWCAP_ASIMD && arm_hwcap::kLrcpc == HWCAP_LRCPC &&
              arm_hwcap::kAsimddp == HWCAP_ASIMDDP && arm_hwcap::kSve == HWCAP_SVE &&
              arm_hwcap2::kSve2 == HWCAP2_SVE2 && arm_hwcap2::kBf16 == HWCAP2_BF16);
#endif

// What each OpenBLAS core type's C code was compiled for, so what the CPU must have to run it: OpenBLAS
// builds NEOVERSEN1 with -mcpu=neoverse-n1 (ARMv8.2 with fp16, RCpc and dot product), NEOVERSEV1 for ARMv8.4
// with SVE, NEOVERSEN2 for ARMv8.5 with SVE2 and BF16. The compiler may emit any instruction of those: Debian
// 12's 0.3.21 has FCMA (fcadd) in its V1 and N2 code and SVE in its N2 code. Every core that passes a test
// here runs that core type's instructions; a CPU that fails them all keeps OpenBLAS's own generic choice.
constexpr uint64_t kNeoverseN1Hwcap = arm_hwcap::kAsimd | arm_hwcap::kAtomics | arm_hwcap::kFphp |
                                      arm_hwcap::kAsimdhp | arm_hwcap::kAsimdrdm | arm_hwcap::kLrcpc |
                                      arm_hwcap::kAsimddp;
constexpr uint64_t kNeoverseV1Hwcap =
    kNeoverseN1Hwcap | arm_hwcap::kSve | arm_hwcap::kFcma | arm_hwcap::kJscvt;
constexpr uint64_t kNeoverseN2Hwcap2 =
    arm_hwcap2::kSve2 | arm_hwcap2::kBf16 | arm_hwcap2::kSvebf16 | arm_hwcap2::kFrint;

// OpenBLAS's release as 10000 * major + 100 * minor + patch, from "OpenBLAS 0.3.21 ..."; 0 if unreadable.
int openblas_release(std::string_view config) {
  int major = 0, minor = 0, patch = 0;
  if (std::sscanf(std::string(config).c_str(), "OpenBLAS %d.%d.%d", &major, &minor, &patch) != 3) return 0;
  return 10000 * major + 100 * minor + patch;
}

#if defined(__x86_64__) || defined(__i386__)
std::string better_x86_blas_coretype(std::string_view chosen) {
  if (chosen != "Prescott" && chosen != "prescott") return "";  // only OpenBLAS's unknown-CPU fallback
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}
#endif

}  // namespace

std::string better_arm_blas_coretype(std::string_view chosen, std::string_view config, uint64_t hwcap,
                                     uint64_t hwcap2) {
  // Only OpenBLAS's unknown-CPU fallbacks: generic ARMv8 (NEON), or generic SVE in releases that have it.
  if (chosen != "armv8" && chosen != "armv8sve") return "";
  // A build for one target ignores OPENBLAS_CORETYPE: restarting would change nothing.
  if (config.find("DYNAMIC_ARCH") == std::string_view::npos) return "";
  const auto has = [](uint64_t word, uint64_t bits) { return (word & bits) == bits; };
  // NEOVERSEV1 and NEOVERSEN2 are in the DYNAMIC_ARCH list of 0.3.21 (Debian 12's, checked with
  // openblas_get_corename() under each OPENBLAS_CORETYPE); an older release given a name it lacks would
  // quietly run armv8 after the restart. N2's kernels are tuned for 128-bit SVE2, the GB10's vector width.
  const bool knows_v1_and_n2 = openblas_release(config) >= 321;
  if (knows_v1_and_n2 && has(hwcap, kNeoverseV1Hwcap) && has(hwcap2, kNeoverseN2Hwcap2)) return "NEOVERSEN2";
  if (knows_v1_and_n2 && has(hwcap, kNeoverseV1Hwcap)) return "NEOVERSEV1";
  // NEON kernels, better than generic SVE ones only where generic was NEON too.
  if (chosen == "armv8" && has(hwcap, kNeoverseN1Hwcap)) return "NEOVERSEN1";
  return "";
}

std::string better_blas_coretype() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  const std::string_view chosen = openblas_get_corename();
#if defined(__x86_64__) || defined(__i386__)
  return better_x86_blas_coretype(chosen);
#elif defined(__aarch64__)
  return better_arm_blas_coretype(chosen, openblas_get_config(), getauxval(AT_HWCAP), getauxval(AT_HWCAP2));
#else
  return "";  // no rule for this architecture: OpenBLAS's own choice
#endif
}

void restart_with_best_blas_kernels(char** argv) {
  const std::string coretype = better_blas_coretype();
  if (coretype.empty()) return;
  setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1);
  execv("/proc/self/exe", argv);
  fmt::print(
      stderr,
      "nanoforge: warning: could not restart with OPENBLAS_CORETYPE={}; set it yourself for faster CPU "
      "matrix products\n",
      coretype);
}

}  // namespace nanoforge
