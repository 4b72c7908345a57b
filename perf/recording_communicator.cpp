// RecordingCommunicator: each collective checks its arguments as every engine does, is reported as issued,
// and returns work whose first wait reports it as waited (through CommWork::State's device poll).
#include "perf/recording_communicator.h"

#include <fmt/format.h>

#include "dist/collective_contract.h"
#include "dist/comm_work_state.h"
#include "support/check.h"

namespace nanoforge {
namespace {
constexpr const char* kEngine = "recording";
}  // namespace

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kBroadcast:
      return "broadcast";
  }
  return "?";
}

RecordingCommunicator::RecordingCommunicator(int rank, int world_size, Device device,
                                             CollectiveListener& listener)
    : rank_(rank), world_size_(world_size), device_(device), listener_(listener) {
  NANOFORGE_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "RecordingCommunicator: rank {} of {}",
                  rank, world_size);
}

CommWork RecordingCommunicator::issue(CollectiveKind kind, int64_t bytes) {
  const int64_t id = next_id_++;
  listener_.issued({id, kind, bytes, world_size_});
  auto state =
      std::make_shared<CommWork::State>(fmt::format("{} #{} of {} bytes", collective_name(kind), id, bytes));
  CollectiveListener* listener = &listener_;
  state->device_poll = [listener, id]() -> std::optional<absl::Status> {
    listener->waited(id);
    return absl::OkStatus();
  };
  return CommWork(std::move(state));
}

CommWork RecordingCommunicator::all_reduce(TensorView buffer, ReduceOp /*op*/) {
  dist::check_all_reduce(buffer, device_, kEngine);
  return issue(CollectiveKind::kAllReduce, buffer.bytes());
}

CommWork RecordingCommunicator::reduce_scatter(TensorView input, TensorView output, ReduceOp /*op*/) {
  dist::check_reduce_scatter(input, output, world_size_, device_, kEngine);
  return issue(CollectiveKind::kReduceScatter, input.bytes());
}

CommWork RecordingCommunicator::all_gather(TensorView input, TensorView output) {
  dist::check_all_gather(input, output, world_size_, device_, kEngine);
  return issue(CollectiveKind::kAllGather, output.bytes());
}

CommWork RecordingCommunicator::broadcast(TensorView buffer, int root) {
  dist::check_broadcast(buffer, root, world_size_, device_, kEngine);
  return issue(CollectiveKind::kBroadcast, buffer.bytes());
}

}  // namespace nanoforge
