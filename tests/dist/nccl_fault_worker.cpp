// A stand-in training loop on the NCCL engine, for the NCCL fault and launch tests (test_nccl_faults.cpp):
// each step all-reduces (average) an f32 device buffer, reduce-scatters (average) and all-gathers another,
// as the data-parallel step does, then the communicator is torn down. The emulator's nccl_fault= setting
// makes one rank die, stall or fail on the way. Rank 0 prints a checksum of the last results, so that two
// launches of the same run can be compared.
//   usage: nccl_fault_worker TIMEOUT_SECONDS STEPS ELEMENTS
//   exit: 0 done; 75 (kCommFailureExitCode) when a communicator failed; 2 on any other error.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dist/comm_watchdog.h"
#include "dist/create_communicator.h"

namespace {

int exit_code() {
  return nanoforge::communication_failed() ? nanoforge::kCommFailureExitCode : 2;
}

uint64_t fnv1a(const std::vector<float>& values) {
  uint64_t hash = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i)
    hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fmt::print(stderr, "usage: nccl_fault_worker TIMEOUT_SECONDS STEPS ELEMENTS\n");
    return 64;
  }
  const double timeout_seconds = std::atof(argv[1]);
  const int steps = std::atoi(argv[2]);
  const int64_t elements = std::atoll(argv[3]);
  int exit_status = 0;
  {
    absl::StatusOr<std::unique_ptr<nanoforge::Communicator>> comm =
        nanoforge::create_communicator(nanoforge::Device::kCuda, {.timeout_seconds = timeout_seconds});
    if (!comm.ok()) {
      fmt::print(stderr, "nccl_fault_worker: {}\n", comm.status().ToString());
      return exit_code();
    }
    const int rank = (*comm)->rank(), world = (*comm)->world_size();
    const int64_t padded = (elements + world - 1) / world * world;
    float *gradients = nullptr, *gathered = nullptr;
    cudaMalloc(reinterpret_cast<void**>(&gradients), static_cast<size_t>(padded) * 4);
    cudaMalloc(reinterpret_cast<void**>(&gathered), static_cast<size_t>(padded) * 4);
    std::vector<float> host(static_cast<size_t>(padded));
    using nanoforge::DType;
    using nanoforge::TensorView;
    const nanoforge::Device cuda = nanoforge::Device::kCuda;
    const TensorView whole(gradients, {padded}, DType::kF32, cuda);
    const TensorView all(gathered, {padded}, DType::kF32, cuda);
    const int64_t chunk = padded / world;
    const TensorView mine(gathered + rank * chunk, {chunk}, DType::kF32, cuda);
    for (int step = 0; step < steps && exit_status == 0; ++step) {
      // Values that do not sum exactly, so that the reduction's order shows in the bits.
      for (int64_t i = 0; i < padded; ++i)
        host[static_cast<size_t>(i)] = 1.0f / static_cast<float>(3 + (i + 7 * rank + 13 * step) % 29);
      cudaMemcpy(gradients, host.data(), host.size() * 4, cudaMemcpyHostToDevice);
      absl::Status status = (*comm)->all_reduce(whole, nanoforge::ReduceOp::kAverage).wait();
      if (status.ok()) status = (*comm)->reduce_scatter(whole, mine, nanoforge::ReduceOp::kAverage).wait();
      if (status.ok()) status = (*comm)->all_gather(mine, all).wait();
      if (!status.ok()) {
        fmt::print(stderr, "nccl_fault_worker: rank {} step {} failed: {}\n", rank, step, status.ToString());
        exit_status = exit_code();
      }
    }
    if (exit_status == 0) {
      cudaMemcpy(host.data(), gathered, host.size() * 4, cudaMemcpyDeviceToHost);
      if (rank == 0) fmt::print("checksum {:016x}\n", fnv1a(host));
      std::fflush(stdout);
    }
    // The communicator's teardown (ncclCommFinalize under the timeout) runs here.
  }
  if (exit_status == 0 && nanoforge::communication_failed()) exit_status = nanoforge::kCommFailureExitCode;
  fmt::print(stderr, "nccl_fault_worker: exits with status {}\n", exit_status);
  return exit_status;
}
