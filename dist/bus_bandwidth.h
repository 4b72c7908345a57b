// nccl-tests' bandwidth definitions (doc/PERFORMANCE.md), so `nanoforge bench allreduce` numbers compare with
// theirs: algorithm bandwidth = S / t for S the whole buffer (all-reduce: the buffer; reduce-scatter: its
// input; all-gather: its output), and bus bandwidth = algbw x a factor that makes it comparable to the
// bottleneck link's unidirectional bandwidth whatever the number of ranks n.
#pragma once

namespace nanoforge {

enum class CollectiveKind { kAllReduce, kReduceScatter, kAllGather, kBroadcast };

// All-reduce 2(n-1)/n (each byte crosses the ring twice: reduce-scatter then all-gather); reduce-scatter
// and all-gather (n-1)/n; broadcast 1.
inline double bus_bandwidth_factor(CollectiveKind kind, int world_size) {
  const double n = world_size;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 2 * (n - 1) / n;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
      return (n - 1) / n;
    case CollectiveKind::kBroadcast:
      return 1;
  }
  return 1;
}

}  // namespace nanoforge
