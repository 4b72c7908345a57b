// `nanoforge bench allreduce [--sizes 1K..1G] [--op allreduce|reduce_scatter|all_gather] [--iterations N]`,
// run under mpirun (or srun, or torchrun-style for CUDA): per message size, the time per collective on the
// configured engine (MPI for --device cpu, NCCL for --device cuda), algorithm bandwidth and bus bandwidth
// with nccl-tests' definitions (dist/bus_bandwidth.h), and a check of the first result. Rank 0 prints a table
// and, last, one JSON line. Times are averaged over ranks, as nccl-tests does.
#include <absl/flags/flag.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "cli/bench/bench_flags.h"
#include "cli/command.h"
#include "cli/common_flags.h"
#include "cli/flag_limits.h"
#include "dist/bus_bandwidth.h"
#include "dist/create_communicator.h"
#include "doctor/nccl_env_apply.h"
#include "kernels/device_buffer.h"
#include "kernels/host_transfer.h"
#include "kernels/ops.h"
#include "step/memory_plan.h"
#include "support/json_text.h"
#include "support/status.h"

ABSL_FLAG(
    std::string, sizes, "1K..256M",
    "message sizes in bytes (the whole buffer, as nccl-tests counts): a list like 1K,64M,1G and/or ranges "
    "A..B stepping x4");
ABSL_FLAG(std::string, op, "allreduce", "the collective: allreduce, reduce_scatter or all_gather");
ABSL_FLAG(int32_t, iterations, 20,
          "timed collectives per size (fewer when one takes over 0.1 s: ~2 s per size)");
NANOFORGE_FLAG_LIMIT(iterations, 1, 1e6);
ABSL_FLAG(std::string, dtype, "f32", "element type: f32 (cpu, cuda) or bf16 (cuda)");
ABSL_FLAG(double, dist_timeout, 300, "seconds a collective may make no progress before it fails");
NANOFORGE_FLAG_LIMIT(dist_timeout, 1e-3, 1e6);

namespace nanoforge {
namespace {

constexpr double kSecondsPerSize = 2;  // the timed loop's budget per size, so 1 GB sizes stay bearable

absl::StatusOr<int64_t> parse_bytes(absl::string_view text) {
  int64_t unit = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        unit = int64_t{1} << 10;
        break;
      case 'M':
      case 'm':
        unit = int64_t{1} << 20;
        break;
      case 'G':
      case 'g':
        unit = int64_t{1} << 30;
        break;
      default:
        break;
    }
    if (unit != 1) text.remove_suffix(1);
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value <= 0 || value > (int64_t{1} << 40) / unit)
    return absl::InvalidArgumentError(
        fmt::format("--sizes: {} is not a size like 4096, 64K, 1M or 1G", json_string(std::string(text))));
  return value * unit;
}

absl::StatusOr<std::vector<int64_t>> parse_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const size_t dots = item.find("..");
    if (dots == absl::string_view::npos) {
      NANOFORGE_ASSIGN_OR_RETURN(const int64_t bytes, parse_bytes(item));
      sizes.push_back(bytes);
      continue;
    }
    NANOFORGE_ASSIGN_OR_RETURN(const int64_t first, parse_bytes(item.substr(0, dots)));
    NANOFORGE_ASSIGN_OR_RETURN(const int64_t last, parse_bytes(item.substr(dots + 2)));
    if (last < first)
      return absl::InvalidArgumentError(
          fmt::format("--sizes: empty range {}", json_string(std::string(item))));
    for (int64_t bytes = first; bytes <= last; bytes *= 4)
      sizes.push_back(bytes);
  }
  if (sizes.empty()) return absl::InvalidArgumentError("--sizes: no sizes given");
  return sizes;
}

struct OpChoice {
  CollectiveKind kind;
  const char* name;
};

absl::StatusOr<OpChoice> parse_op(const std::string& name) {
  if (name == "allreduce" || name == "all_reduce") return OpChoice{CollectiveKind::kAllReduce, "allreduce"};
  if (name == "reduce_scatter") return OpChoice{CollectiveKind::kReduceScatter, "reduce_scatter"};
  if (name == "all_gather" || name == "allgather") return OpChoice{CollectiveKind::kAllGather, "all_gather"};
  return absl::InvalidArgumentError(
      fmt::format("--op: {} is not one of allreduce, reduce_scatter, all_gather", json_string(name)));
}

// A value summed over ranks, through the communicator itself (its engine serves only its device's buffers).
absl::StatusOr<double> sum_over_ranks(Communicator& comm, Device device, double value) {
  DeviceBuffer buffer(device, 4);
  const TensorView scalar(buffer.data(), {1}, DType::kF32, device);
  const float as_float = static_cast<float>(value);
  upload<float>(scalar, &as_float);
  NANOFORGE_RETURN_IF_ERROR(comm.all_reduce(scalar, ReduceOp::kSum).wait());
  return static_cast<double>(download<float>(scalar)[0]);
}

struct SizeResult {
  int64_t bytes = 0;
  int64_t count = 0;  // elements of the whole buffer
  int iterations = 0;
  double seconds = 0;  // per collective, averaged over ranks
  double algbw_gb_per_s = 0;
  double busbw_gb_per_s = 0;
  int64_t wrong = 0;  // wrong elements after the first (checked) collective, summed over ranks
};

// The buffers of one size: every rank's input holds rank + 1; results are checked against that.
class SizeBench {
 public:
  SizeBench(Communicator& comm, const OpChoice& op, Device device, DType dtype, int64_t count)
      : comm_(comm), op_(op), device_(device), dtype_(dtype), count_(count) {
    const int64_t world = comm.world_size();
    const int64_t input_count = op.kind == CollectiveKind::kAllGather ? count / world : count;
    const int64_t output_count = op.kind == CollectiveKind::kReduceScatter ? count / world : count;
    input_buffer_ = DeviceBuffer(device, input_count * dtype_bytes(dtype));
    input_ = TensorView(input_buffer_.data(), {input_count}, dtype, device);
    if (op.kind == CollectiveKind::kAllReduce) {
      output_ = input_;
    } else {
      output_buffer_ = DeviceBuffer(device, output_count * dtype_bytes(dtype));
      output_ = TensorView(output_buffer_.data(), {output_count}, dtype, device);
    }
    ops::fill(input_, comm.rank() + 1);
  }

  CommWork launch() {
    switch (op_.kind) {
      case CollectiveKind::kAllReduce:
        return comm_.all_reduce(input_, ReduceOp::kAverage);
      case CollectiveKind::kReduceScatter:
        return comm_.reduce_scatter(input_, output_, ReduceOp::kAverage);
      case CollectiveKind::kAllGather:
        return comm_.all_gather(input_, output_);
      case CollectiveKind::kBroadcast:
        break;
    }
    return comm_.broadcast(input_, 0);
  }

  // Elements of the output that are not what every rank's rank + 1 inputs give.
  int64_t count_wrong() const {
    const std::vector<float> values = download<float>(output_);
    const int world = comm_.world_size();
    const int64_t chunk = world > 0 ? static_cast<int64_t>(values.size()) / world : 0;
    int64_t wrong = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) {
      const double expected =
          op_.kind == CollectiveKind::kAllGather ? static_cast<double>(i / chunk + 1) : (world + 1) / 2.0;
      if (values[static_cast<size_t>(i)] != static_cast<float>(expected)) ++wrong;
    }
    return wrong;
  }

 private:
  Communicator& comm_;
  OpChoice op_;
  Device device_;
  DType dtype_;
  int64_t count_;
  DeviceBuffer input_buffer_;
  DeviceBuffer output_buffer_;
  TensorView input_;
  TensorView output_;
};

absl::StatusOr<SizeResult> bench_size(Communicator& comm, const OpChoice& op, Device device, DType dtype,
                                      int64_t bytes, int max_iterations, int warmup) {
  const int world = comm.world_size();
  SizeResult result;
  // Whole elements, and for reduce-scatter / all-gather whole chunks of world_size.
  result.count = std::max<int64_t>(bytes / dtype_bytes(dtype) / world * world, world);
  result.bytes = result.count * dtype_bytes(dtype);
  SizeBench bench(comm, op, device, dtype, result.count);
  // The first collective is checked (and allocates whatever the engine allocates lazily) and timed, to size
  // the loop.
  NANOFORGE_RETURN_IF_ERROR(comm.barrier());
  auto start = std::chrono::steady_clock::now();
  NANOFORGE_RETURN_IF_ERROR(bench.launch().wait());
  const double first_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  NANOFORGE_ASSIGN_OR_RETURN(const double wrong,
                             sum_over_ranks(comm, device, static_cast<double>(bench.count_wrong())));
  result.wrong = std::llround(wrong);
  for (int i = 1; i < warmup; ++i)
    NANOFORGE_RETURN_IF_ERROR(bench.launch().wait());
  // Every rank must run the same number of collectives: size the loop from the time averaged over ranks.
  NANOFORGE_ASSIGN_OR_RETURN(const double first_total, sum_over_ranks(comm, device, first_seconds));
  result.iterations =
      std::clamp(static_cast<int>(kSecondsPerSize / std::max(first_total / world, 1e-9)), 1, max_iterations);
  std::vector<CommWork> works(static_cast<size_t>(result.iterations));
  NANOFORGE_RETURN_IF_ERROR(comm.barrier());
  start = std::chrono::steady_clock::now();
  for (CommWork& work : works)
    work = bench.launch();
  for (const CommWork& work : works)
    NANOFORGE_RETURN_IF_ERROR(work.wait());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  NANOFORGE_ASSIGN_OR_RETURN(const double total_seconds, sum_over_ranks(comm, device, seconds));
  result.seconds = total_seconds / world / result.iterations;
  result.algbw_gb_per_s = static_cast<double>(result.bytes) / result.seconds / 1e9;
  result.busbw_gb_per_s = result.algbw_gb_per_s * bus_bandwidth_factor(op.kind, world);
  return result;
}

std::string human_bytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30) && bytes % (int64_t{1} << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes >= (int64_t{1} << 10) && bytes % (int64_t{1} << 10) == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}", bytes);
}

absl::Status run_bench_allreduce(const std::vector<std::string>& /*arguments*/) {
  NANOFORGE_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, parse_sizes(absl::GetFlag(FLAGS_sizes)));
  NANOFORGE_ASSIGN_OR_RETURN(const OpChoice op, parse_op(absl::GetFlag(FLAGS_op)));
  const std::string device_name_flag = absl::GetFlag(FLAGS_device);
  if (device_name_flag != "cpu" && device_name_flag != "cuda")
    return absl::InvalidArgumentError(
        fmt::format("--device: {} is not cpu or cuda", json_string(device_name_flag)));
  const Device device = device_name_flag == "cuda" ? Device::kCuda : Device::kCpu;
  const std::string dtype_flag = absl::GetFlag(FLAGS_dtype);
  if (dtype_flag != "f32" && !(dtype_flag == "bf16" && device == Device::kCuda))
    return absl::InvalidArgumentError(fmt::format("--dtype: {} on {}: use f32 (cpu, cuda) or bf16 (cuda)",
                                                  json_string(dtype_flag), device_name_flag));
  const DType dtype = dtype_flag == "bf16" ? DType::kBF16 : DType::kF32;
  const int iterations = absl::GetFlag(FLAGS_iterations);
  if (iterations < 1) return absl::InvalidArgumentError("--iterations must be at least 1");
  const int warmup = std::max(1, absl::GetFlag(FLAGS_warmup));
  // The buffers of the largest size (the collective's input and output, and a host copy to check the
  // result) must fit before any is allocated.
  const int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  NANOFORGE_ASSIGN_OR_RETURN(const AvailableMemory available, available_memory(device));
  if (3 * largest > available.bytes) {
    return absl::ResourceExhaustedError(fmt::format(
        "--sizes: the largest, {}, needs about {:.2f} GB of buffers, but {} has {:.2f} GB available",
        human_bytes(largest), 3.0 * static_cast<double>(largest) / 1e9, available.source,
        static_cast<double>(available.bytes) / 1e9));
  }
  if (device == Device::kCuda) apply_advised_nccl_environment_for_run();  // before NCCL initialises
  NANOFORGE_ASSIGN_OR_RETURN(
      std::unique_ptr<Communicator> comm,
      create_communicator(device, {.timeout_seconds = absl::GetFlag(FLAGS_dist_timeout)}));
  const bool printing = comm->rank() == 0;
  if (printing) {
    fmt::print("bench {}: {} engine, {} ranks, {} {} buffers; sizes count the whole buffer (nccl-tests' S)\n",
               op.name, comm->engine_name(), comm->world_size(), device_name(device), dtype_name(dtype));
    fmt::print("{:>10} {:>12} {:>6} {:>12} {:>12} {:>12} {:>7}\n", "size", "count", "iters", "time_us",
               "algbw_GB/s", "busbw_GB/s", "#wrong");
  }
  std::vector<SizeResult> results;
  for (const int64_t bytes : sizes) {
    NANOFORGE_ASSIGN_OR_RETURN(SizeResult result,
                               bench_size(*comm, op, device, dtype, bytes, iterations, warmup));
    if (printing) {
      fmt::print("{:>10} {:>12} {:>6} {:>12.1f} {:>12.3f} {:>12.3f} {:>7}\n", human_bytes(result.bytes),
                 result.count, result.iterations, result.seconds * 1e6, result.algbw_gb_per_s,
                 result.busbw_gb_per_s, result.wrong);
      std::fflush(stdout);
    }
    results.push_back(result);
  }
  if (printing) {
    std::string rows;
    for (const SizeResult& r : results) {
      rows += fmt::format(
          "{}{{\"bytes\": {}, \"count\": {}, \"iterations\": {}, \"time_us\": {:.2f}, \"algbw_gb_per_s\": "
          "{:.4f}, "
          "\"busbw_gb_per_s\": {:.4f}, \"wrong\": {}}}",
          rows.empty() ? "" : ", ", r.bytes, r.count, r.iterations, r.seconds * 1e6, r.algbw_gb_per_s,
          r.busbw_gb_per_s, r.wrong);
    }
    fmt::print(
        "{{\"bench\": \"allreduce\", \"op\": \"{}\", \"engine\": \"{}\", \"world_size\": {}, \"device\": "
        "\"{}\", "
        "\"dtype\": \"{}\", \"results\": [{}]}}\n",
        op.name, comm->engine_name(), comm->world_size(), device_name(device), dtype_name(dtype), rows);
  }
  for (const SizeResult& r : results) {
    if (r.wrong != 0)
      return absl::InternalError(
          fmt::format("{} of {} gave {} wrong elements", op.name, human_bytes(r.bytes), r.wrong));
  }
  return absl::OkStatus();
}

}  // namespace

Command bench_allreduce_command() {
  return {"bench allreduce",
          "collective bandwidth per message size (nccl-tests' algbw and busbw) on the configured engine; run "
          "under mpirun",
          "[--sizes 1K..1G] [--op allreduce|reduce_scatter|all_gather] [--iterations N] [--device cpu|cuda] "
          "[--dtype f32|bf16]",
          {"sizes", "op", "iterations", "warmup", "device", "dtype", "dist_timeout"},
          run_bench_allreduce};
}

}  // namespace nanoforge
