// version_line / version_report.
#include "cli/build_info.h"

#include <fmt/format.h>

#include <string_view>

#include "kernels/backend_info.h"
#include "kernels/device.h"
#include "support/version.h"

namespace nanoforge {

std::string version_line() {
  return fmt::format("{} (commit {})", version(), git_commit());
}

namespace {

// The CUDA line: which build of the backend this program is (the real one, or the CPU emulator of CUDA,
// said loudly) and whether it sees a GPU.
std::string cuda_description(const BackendInfo& info) {
  if (!info.cuda_built) return "not built (CPU only: configure with nvcc on PATH for the CUDA backend)";
  if (info.cuda_emulated) {
    return "THE CPU EMULATOR OF CUDA: this is nanoforge-emulated, the tests' program, whose GPU kernels run "
           "on the CPU thousands of times slower than a GPU; train with bin/nanoforge, the GPU build";
  }
  const std::string built =
      fmt::format("GPU build for sm {} (CUDA {})", info.cuda_architectures, info.cuda_toolkit);
  if (!info.cuda_usable) return fmt::format("{}; no GPU usable here: {}", built, info.cuda_status);
  GpuMemoryInfo gpu;
  std::string reason;
  if (!gpu_memory_info(&gpu, &reason)) return fmt::format("{}; GPU not usable: {}", built, reason);
  return fmt::format("{}; GPU: {}", built, gpu.name);
}

// What the host code was compiled for (NANOFORGE_NATIVE, CMakeLists.txt).
std::string cpu_target() {
  const std::string_view target = NANOFORGE_CPU_TARGET;
  if (target.empty()) return "the compiler's default CPU";
  if (target == "native") return "the CPU of the machine that built it (-march=native: not portable)";
  return fmt::format("{} (portable; -DNANOFORGE_NATIVE=ON for the building CPU alone)", target);
}

}  // namespace

std::string version_report() {
  const BackendInfo info = backend_info();
  const std::string cuda = cuda_description(info);
  return fmt::format(
      "nanoforge {}\n"
      "  build:   {} with {} {}, host code for {}\n"
      "  cpu:     {} OpenMP threads; BLAS: {}{}, {} kernels\n"
      "  cuda:    {}",
      version_line(), NANOFORGE_BUILD_TYPE, NANOFORGE_COMPILER_ID, NANOFORGE_COMPILER_VERSION, cpu_target(),
      info.cpu_threads, info.blas,
      info.blas_uses_openmp ? " (OpenMP build)" : " (not the OpenMP build: see docs/build.md)",
      info.blas_core, cuda);
}

std::string golden_tokenizer_dir() {
  return NANOFORGE_TOKENIZER_GOLDEN_DIR;
}

}  // namespace nanoforge
