// The runtimes data parallelism rests on, as this build and machine see them: CUDA devices with the driver
// and runtime versions, the NCCL library version, and the MPI library — read without creating a CUDA context
// on more than a property query, without an NCCL communicator and without MPI_Init (MPI_Get_library_version
// may be called before it). `nanoforge doctor` prints this; benchmarks can record it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nanoforge {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability: 9.0 = H100/H200, 12.1 = DGX Spark GB10
  int64_t memory_bytes = 0;  // on a Spark this is the unified (CPU+GPU) memory CUDA may use
  int multiprocessors = 0;
  std::string pci_bus_id;
};

struct CommRuntimeInfo {
  bool cuda_built = false;
  int cuda_runtime_version = 0;  // 13000 = 13.0
  int cuda_driver_version = 0;   // 0: no CUDA driver
  std::string cuda_status;       // why no GPU is usable (gpu_available's reason); empty when one is
  std::vector<CudaDeviceInfo> gpus;

  bool nccl_built = false;
  std::string nccl_version;  // "2.28.9"

  bool mpi_built = false;
  std::string mpi_library;   // MPI_Get_library_version's first line, e.g. "Open MPI v4.1.4, ..."
  std::string mpi_standard;  // "3.1"
};

CommRuntimeInfo probe_comm_runtimes();

// "13.0" from 13000.
std::string cuda_version_text(int version);

}  // namespace nanoforge
