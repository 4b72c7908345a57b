// better_arm_blas_coretype (kernels/blas_core.h): on aarch64, which OpenBLAS core type nanoforge restarts
// with when OpenBLAS fell back to its generic kernels, from the CPU's Linux HWCAP words. The rule is plain
// arithmetic on its inputs, so it is tested on every architecture, with the feature words of real CPUs.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/blas_core.h"

namespace nanoforge {
namespace {

// Bits of Linux's arm64 HWCAP and HWCAP2 words (arch/arm64/include/uapi/asm/hwcap.h).
constexpr uint64_t kFp = 1u << 0, kAsimd = 1u << 1, kAtomics = 1u << 8, kFphp = 1u << 9, kAsimdhp = 1u << 10,
                   kAsimdrdm = 1u << 12, kJscvt = 1u << 13, kFcma = 1u << 14, kLrcpc = 1u << 15,
                   kAsimddp = 1u << 20, kSve = 1u << 22;
constexpr uint64_t kHwcap2Sve2 = 1u << 1, kHwcap2Frint = 1u << 8, kHwcap2Svebf16 = 1u << 12,
                   kHwcap2Bf16 = 1u << 14;

// Cortex-A72 (Raspberry Pi 4, Graviton 1): ARMv8.0, NEON only.
constexpr uint64_t kCortexA72 = kFp | kAsimd;
// Neoverse N1 (Graviton 2, Ampere Altra): ARMv8.2 with fp16, RCpc and dot product.
constexpr uint64_t kNeoverseN1 = kFp | kAsimd | kAtomics | kFphp | kAsimdhp | kAsimdrdm | kLrcpc | kAsimddp;
// Neoverse V1 (Graviton 3): N1's and SVE, FCMA, JSCVT; no SVE2.
constexpr uint64_t kNeoverseV1 = kNeoverseN1 | kSve | kFcma | kJscvt;
// Grace (Neoverse V2) and the GB10's Cortex-X925/A725: V1's and SVE2 with BF16.
constexpr uint64_t kArmv9 = kNeoverseV1;
constexpr uint64_t kArmv9Hwcap2 = kHwcap2Sve2 | kHwcap2Frint | kHwcap2Svebf16 | kHwcap2Bf16;

// openblas_get_config() of Debian 12's and Ubuntu 24.04's OpenMP packages (as Debian 12's amd64 one reads,
// "... USE_OPENMP Cooperlake ...", with the core OpenBLAS chose), an older release, and a build for one
// target.
constexpr const char* kDebianOpenblas =
    "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP armv8 MAX_THREADS=64";
constexpr const char* kUbuntuOpenblas =
    "OpenBLAS 0.3.26 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP armv8 MAX_THREADS=64";
constexpr const char* kOldOpenblas = "OpenBLAS 0.3.13 DYNAMIC_ARCH NO_AFFINITY armv8 MAX_THREADS=64";
constexpr const char* kSingleTargetOpenblas = "OpenBLAS 0.3.21 NO_AFFINITY ARMV8 MAX_THREADS=64";

TEST(ArmBlasCoretype, AnArmv9CpuOpenblasDoesNotKnowGetsTheNeoverseN2Kernels) {
  // The DGX Spark: Debian 12's and Ubuntu 24.04's OpenBLAS do not know its cores and fall back to armv8.
  EXPECT_EQ(better_arm_blas_coretype("armv8", kDebianOpenblas, kArmv9, kArmv9Hwcap2), "NEOVERSEN2");
  EXPECT_EQ(better_arm_blas_coretype("armv8", kUbuntuOpenblas, kArmv9, kArmv9Hwcap2), "NEOVERSEN2");
  // Releases that fall back to their generic SVE kernels instead.
  EXPECT_EQ(better_arm_blas_coretype("armv8sve", kUbuntuOpenblas, kArmv9, kArmv9Hwcap2), "NEOVERSEN2");
}

TEST(ArmBlasCoretype, EachCpuGetsTheNewestCoreTypeWhoseInstructionsItHas) {
  EXPECT_EQ(better_arm_blas_coretype("armv8", kDebianOpenblas, kNeoverseV1, 0), "NEOVERSEV1");
  EXPECT_EQ(better_arm_blas_coretype("armv8", kDebianOpenblas, kNeoverseN1, 0), "NEOVERSEN1");
  // SVE2 without the rest of what OpenBLAS compiles NEOVERSEN2 for is not enough.
  EXPECT_EQ(better_arm_blas_coretype("armv8", kDebianOpenblas, kNeoverseV1, kHwcap2Sve2), "NEOVERSEV1");
  // Without dot product (ARMv8.0) no tuned kernels run: OpenBLAS's generic choice stays.
  EXPECT_EQ(better_arm_blas_coretype("armv8", kDebianOpenblas, kCortexA72, 0), "");
  EXPECT_EQ(better_arm_blas_coretype("armv8", kDebianOpenblas, kNeoverseN1 & ~kAsimddp, 0), "");
}

TEST(ArmBlasCoretype, OpenblasOwnChoiceOfATunedCoreIsKept) {
  EXPECT_EQ(better_arm_blas_coretype("neoversen1", kDebianOpenblas, kArmv9, kArmv9Hwcap2), "");
  EXPECT_EQ(better_arm_blas_coretype("neoversev1", kDebianOpenblas, kArmv9, kArmv9Hwcap2), "");
  // Generic SVE kernels are not replaced by NEON ones.
  EXPECT_EQ(better_arm_blas_coretype("armv8sve", kDebianOpenblas, kNeoverseN1 | kSve, 0), "");
}

TEST(ArmBlasCoretype, NoRestartWhereTheCoreTypeWouldBeIgnoredOrUnknown) {
  // A build for one target ignores OPENBLAS_CORETYPE.
  EXPECT_EQ(better_arm_blas_coretype("armv8", kSingleTargetOpenblas, kArmv9, kArmv9Hwcap2), "");
  // Releases before 0.3.21 may not have the V1 and N2 kernels: N1 is the most they are given.
  EXPECT_EQ(better_arm_blas_coretype("armv8", kOldOpenblas, kArmv9, kArmv9Hwcap2), "NEOVERSEN1");
  EXPECT_EQ(
      better_arm_blas_coretype("armv8", "an unreadable configuration DYNAMIC_ARCH", kArmv9, kArmv9Hwcap2),
      "NEOVERSEN1");
}

}  // namespace
}  // namespace nanoforge
