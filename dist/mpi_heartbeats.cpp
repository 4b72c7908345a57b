// MpiHeartbeats: persistent receives from every peer, fire-and-forget sends, and the report of who is
// missing. Latest sequences are stored as sequence + 1 so that 0 means "never heard from".
#include "dist/mpi_heartbeats.h"

#include <fmt/format.h>

#include "dist/mpi_runtime.h"

namespace nanoforge {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

MpiHeartbeats::MpiHeartbeats(MPI_Comm comm, int rank, int world_size)
    : comm_(comm), rank_(rank), world_size_(world_size), peers_(new Peer[static_cast<size_t>(world_size)]) {
  for (int peer = 0; peer < world_size_; ++peer)
    if (peer != rank_) post_receive(peer);
}

MpiHeartbeats::~MpiHeartbeats() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (abandoned_ || finalized) return;
  auto lock = MpiRuntime::call_lock();
  for (int peer = 0; peer < world_size_; ++peer) {
    MPI_Request& request = peers_[peer].receive;
    if (request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);  // a cancelled receive completes locally
  }
  for (auto& send : sends_)
    if (send->request != MPI_REQUEST_NULL) MPI_Request_free(&send->request);
}

void MpiHeartbeats::post_receive(int peer) {
  Peer& p = peers_[peer];
  if (MPI_Irecv(&p.received, 1, MPI_UINT64_T, peer, kTag, comm_, &p.receive) != MPI_SUCCESS)
    p.receive = MPI_REQUEST_NULL;  // the peer is gone; it stays "last heard" where it was
}

void MpiHeartbeats::announce(uint64_t sequence) {
  if (sends_.size() >= kMaxPendingSendsPerPeer * static_cast<size_t>(world_size_)) return;
  for (int peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_) continue;
    auto send = std::make_unique<PendingSend>(PendingSend{sequence, MPI_REQUEST_NULL});
    if (MPI_Isend(&send->value, 1, MPI_UINT64_T, peer, kTag, comm_, &send->request) == MPI_SUCCESS)
      sends_.push_back(std::move(send));
  }
}

int MpiHeartbeats::poll(uint64_t sequence) {
  int arrived = 0;
  for (int peer = 0; peer < world_size_; ++peer) {
    Peer& p = peers_[peer];
    // Several heartbeats may be queued: take them all.
    while (p.receive != MPI_REQUEST_NULL) {
      int done = 0;
      if (MPI_Test(&p.receive, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        p.receive = MPI_REQUEST_NULL;
        break;
      }
      if (!done) break;
      const uint64_t before = p.latest.load(std::memory_order_relaxed);
      const uint64_t heard = p.received + 1;
      if (heard > before) {
        p.latest.store(heard, std::memory_order_relaxed);
        if (before < sequence + 1 && heard >= sequence + 1) ++arrived;
      }
      p.heard_at_ns.store(now_ns(), std::memory_order_relaxed);
      post_receive(peer);
    }
  }
  while (!sends_.empty()) {
    int done = 0;
    if (MPI_Test(&sends_.front()->request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;
    if (!done) break;
    sends_.pop_front();
  }
  return arrived;
}

std::string MpiHeartbeats::describe_missing(uint64_t sequence, double silent_after_seconds) const {
  const int64_t now = now_ns();
  std::vector<PeerHeard> heard;
  for (int peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_) continue;
    const Peer& p = peers_[peer];
    heard.push_back(
        {.rank = peer,
         .latest = p.latest.load(std::memory_order_relaxed),
         .seconds_ago = static_cast<double>(now - p.heard_at_ns.load(std::memory_order_relaxed)) * 1e-9});
  }
  return describe_missing_ranks(heard, sequence, silent_after_seconds);
}

}  // namespace nanoforge
