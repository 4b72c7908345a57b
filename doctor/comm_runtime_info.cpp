// probe_comm_runtimes: the CUDA runtime's device queries, ncclGetVersion and MPI_Get_library_version, each
// compiled in only when the build has that library (NANOFORGE_HAVE_CUDA, NANOFORGE_HAVE_NCCL,
// NANOFORGE_HAVE_MPI).
#include "doctor/comm_runtime_info.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "kernels/device.h"

#ifdef NANOFORGE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef NANOFORGE_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef NANOFORGE_HAVE_MPI
#include <mpi.h>
#endif

namespace nanoforge {
namespace {

void probe_cuda(CommRuntimeInfo& info) {
  std::string reason;
  const bool usable = gpu_available(&reason);
  if (!usable) info.cuda_status = reason;
#ifdef NANOFORGE_HAVE_CUDA
  info.cuda_built = true;
  cudaRuntimeGetVersion(&info.cuda_runtime_version);
  cudaDriverGetVersion(&info.cuda_driver_version);
  if (!usable) return;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return;
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, index) != cudaSuccess) continue;
    CudaDeviceInfo gpu;
    gpu.index = index;
    gpu.name = properties.name;
    gpu.major = properties.major;
    gpu.minor = properties.minor;
    gpu.memory_bytes = static_cast<int64_t>(properties.totalGlobalMem);
    gpu.multiprocessors = properties.multiProcessorCount;
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, index) == cudaSuccess) gpu.pci_bus_id = bus_id;
    info.gpus.push_back(gpu);
  }
  cudaGetLastError();  // leave no sticky error for later launch checks
#endif
}

void probe_nccl([[maybe_unused]] CommRuntimeInfo& info) {
#ifdef NANOFORGE_HAVE_NCCL
  info.nccl_built = true;
  int code = 0;
  if (ncclGetVersion(&code) == ncclSuccess) {
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older ones major*1000 + minor*100 + patch.
    info.nccl_version = code >= 10000 ? fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100)
                                      : fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
  }
#endif
}

void probe_mpi([[maybe_unused]] CommRuntimeInfo& info) {
#ifdef NANOFORGE_HAVE_MPI
  info.mpi_built = true;
  char library[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(library, &length) == MPI_SUCCESS) {
    // Open MPI counts the terminating NUL in `length`; keep the first line only.
    std::string text(library, static_cast<size_t>(std::max(length, 0)));
    text = text.substr(0, text.find_first_of(std::string("\n\0", 2)));
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
      text.pop_back();
    info.mpi_library = text;
  }
  int version = 0, subversion = 0;
  if (MPI_Get_version(&version, &subversion) == MPI_SUCCESS)
    info.mpi_standard = fmt::format("{}.{}", version, subversion);
#endif
}

}  // namespace

std::string cuda_version_text(int version) {
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

CommRuntimeInfo probe_comm_runtimes() {
  CommRuntimeInfo info;
  probe_cuda(info);
  probe_nccl(info);
  probe_mpi(info);
  return info;
}

}  // namespace nanoforge
