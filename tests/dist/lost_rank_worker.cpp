// A stand-in for a training loop, for the lost-rank tests: every rank all-reduces a gradient buffer step
// after step; rank `victim` kills itself with SIGKILL before step `steps_before_kill` — or, with `during`, 10
// ms into that step's all-reduce of 64 MB (after it has arrived at it). The survivors must then exit non-zero
// within the timeout, with a message naming the victim.
//   usage: lost_rank_worker TIMEOUT_SECONDS VICTIM STEPS_BEFORE_KILL [during]
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dist/create_communicator.h"

int main(int argc, char** argv) {
  if (argc != 4 && !(argc == 5 && std::string(argv[4]) == "during")) {
    fmt::print(stderr, "usage: lost_rank_worker TIMEOUT_SECONDS VICTIM STEPS_BEFORE_KILL [during]\n");
    return 64;
  }
  const double timeout_seconds = std::atof(argv[1]);
  const int victim = std::atoi(argv[2]);
  const int steps_before_kill = std::atoi(argv[3]);
  const bool during = argc == 5;
  absl::StatusOr<std::unique_ptr<nanoforge::Communicator>> comm =
      nanoforge::create_communicator(nanoforge::Device::kCpu, {.timeout_seconds = timeout_seconds});
  if (!comm.ok()) {
    fmt::print(stderr, "lost_rank_worker: {}\n", comm.status().ToString());
    return 1;
  }
  const int rank = (*comm)->rank();
  std::vector<float> gradients(during ? (16 << 20) : 4096, 1.0f);
  const nanoforge::TensorView view(gradients.data(), {static_cast<int64_t>(gradients.size())},
                                   nanoforge::DType::kF32, nanoforge::Device::kCpu);
  for (int step = 0; step < 100000; ++step) {
    if (rank == victim && step == steps_before_kill) {
      fmt::print(stderr, "lost_rank_worker: rank {} kills itself {} step {}\n", rank,
                 during ? "during" : "before", step);
      std::fflush(stderr);
      if (!during) std::raise(SIGKILL);
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::raise(SIGKILL);
      }).detach();
    }
    const absl::Status status = (*comm)->all_reduce(view, nanoforge::ReduceOp::kAverage).wait();
    if (!status.ok()) {
      fmt::print(stderr, "lost_rank_worker: rank {} step {} failed: {}\n", rank, step, status.ToString());
      return 2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // "compute"
  }
  return 0;
}
