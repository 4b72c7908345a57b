// NCCL on the emulator, over MPI: a communicator of N ranks is one process per emulated GPU started by
// mpirun, and a collective is an operation on the caller's stream that, when the stream reaches it, reads its
// input, starts a non-blocking MPI exchange of the raw bytes, and writes the reduced result once the exchange
// is done (sums in fp32 for bf16, in rank order). As a GPU runs a queued collective whether or not its host
// waits, a progress thread advances the streams that hold multi-rank collectives, so that no rank waits for
// another rank's host. A world of one needs no MPI.
#include <mpi.h>
#include <nccl.h>

#include <cuda_bf16.h>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "emulator/runtime.h"

struct ncclComm {
  int rank = 0;
  int ranks = 1;
  int device = 0;
  MPI_Comm mpi = MPI_COMM_NULL;
  std::atomic<bool> aborted{false};
  std::string last_error;
};

namespace nanoforge::emulator {
namespace {

constexpr char kIdMagic[] = "nanoforge-emulated-nccl";

std::string& global_last_error() {
  static auto* text = new std::string();
  return *text;
}

ncclResult_t failure(ncclComm* comm, ncclResult_t result, const std::string& why) {
  (comm != nullptr ? comm->last_error : global_last_error()) = why;
  std::fprintf(stderr, "nanoforge CUDA emulator: NCCL: %s\n", why.c_str());
  std::fflush(stderr);
  return result;
}

size_t type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

// One element of `type` at `p`, widened, and stored back rounded.
double load(const unsigned char* p, ncclDataType_t type) {
  switch (type) {
    case ncclFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case ncclFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case ncclBfloat16: {
      __nv_bfloat16 v;
      std::memcpy(&v, p, 2);
      return __bfloat162float(v);
    }
    case ncclInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
  }
}

void store(unsigned char* p, ncclDataType_t type, double value) {
  switch (type) {
    case ncclFloat32: {
      const auto v = static_cast<float>(value);
      std::memcpy(p, &v, 4);
      break;
    }
    case ncclFloat64:
      std::memcpy(p, &value, 8);
      break;
    case ncclBfloat16: {
      const __nv_bfloat16 v = __float2bfloat16_rn(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      break;
    }
    case ncclInt32: {
      const auto v = static_cast<int32_t>(value);
      std::memcpy(p, &v, 4);
      break;
    }
    default: {
      const auto v = static_cast<int64_t>(value);
      std::memcpy(p, &v, 8);
      break;
    }
  }
}

// result[i] = op over ranks r (in rank order) of contributions[r * count + i]. Floating types accumulate in
// fp32 (f64 in f64), as NCCL's kernels do; integer sums are exact in double for the sizes used here.
void reduce(const std::vector<unsigned char>& contributions, int ranks, size_t count, ncclDataType_t type,
            ncclRedOp_t op, unsigned char* result) {
  const size_t bytes = type_bytes(type);
  for (size_t i = 0; i < count; ++i) {
    double total = load(&contributions[i * bytes], type);
    for (int r = 1; r < ranks; ++r) {
      const double value = load(&contributions[(static_cast<size_t>(r) * count + i) * bytes], type);
      switch (op) {
        case ncclProd:
          total *= value;
          break;
        case ncclMax:
          total = std::max(total, value);
          break;
        case ncclMin:
          total = std::min(total, value);
          break;
        default:
          total += value;
          break;
      }
      if (type == ncclFloat32 || type == ncclBfloat16 || type == ncclFloat16)
        total = static_cast<float>(total);
    }
    if (op == ncclAvg) total /= ranks;
    store(result + i * bytes, type, total);
  }
}

enum class Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast };

// What a collective call asked for.
struct Request {
  ncclComm* comm;
  Kind kind;
  const unsigned char* send;
  unsigned char* receive;
  size_t count;  // per rank: the all-reduce's, the reduce-scatter's output, the all-gather's input
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
};

// One collective, advanced by its stream: read and post, then finish when MPI is done.
struct Collective : Request {
  explicit Collective(const Request& request) : Request(request) {}
  bool started = false;
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<unsigned char> outgoing, incoming;

  Progress step() {
    if (comm->aborted.load()) return Progress::kDone;  // an aborted communicator's work is dropped
    const size_t bytes = count * type_bytes(type);
    const int ranks = comm->ranks;
    if (!started) {
      started = true;
      switch (kind) {
        case Kind::kAllReduce:
        case Kind::kAllGather:
          outgoing.assign(send, send + bytes);
          incoming.resize(bytes * static_cast<size_t>(ranks));
          if (ranks > 1) {
            MPI_Iallgather(outgoing.data(), static_cast<int>(bytes), MPI_BYTE, incoming.data(),
                           static_cast<int>(bytes), MPI_BYTE, comm->mpi, &request);
          } else {
            incoming = outgoing;
          }
          break;
        case Kind::kReduceScatter:
          // Chunk j of every rank's input goes to rank j.
          outgoing.assign(send, send + bytes * static_cast<size_t>(ranks));
          incoming.resize(bytes * static_cast<size_t>(ranks));
          if (ranks > 1) {
            MPI_Ialltoall(outgoing.data(), static_cast<int>(bytes), MPI_BYTE, incoming.data(),
                          static_cast<int>(bytes), MPI_BYTE, comm->mpi, &request);
          } else {
            incoming = outgoing;
          }
          break;
        case Kind::kBroadcast:
          incoming.assign(bytes, 0);
          if (comm->rank == root) std::memcpy(incoming.data(), send, bytes);
          if (ranks > 1)
            MPI_Ibcast(incoming.data(), static_cast<int>(bytes), MPI_BYTE, root, comm->mpi, &request);
          break;
      }
    }
    if (request != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (!done) return Progress::kPending;
    }
    switch (kind) {
      case Kind::kAllReduce:
      case Kind::kReduceScatter:
        reduce(incoming, ranks, count, type, op, receive);
        break;
      case Kind::kAllGather:
      case Kind::kBroadcast:
        std::memcpy(receive, incoming.data(), incoming.size());
        break;
    }
    return Progress::kDone;
  }
};

// Streams holding multi-rank collectives that have not finished, for the progress thread.
struct InFlight {
  std::vector<std::pair<Stream*, uint64_t>> positions;
  bool thread_started = false;
};

InFlight& in_flight() {
  static auto* instance = new InFlight();
  return *instance;
}

void progress_main() {
  while (true) {
    {
      std::lock_guard<std::mutex> lock(runtime_mutex());
      auto& positions = in_flight().positions;
      for (size_t i = 0; i < positions.size();) {
        if (advance(positions[i].first, positions[i].second)) {
          positions.erase(positions.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

bool device_range(const void* pointer, size_t bytes, int device) {
  if (bytes == 0) return true;
  const Allocation* a = find_allocation(pointer, bytes);
  return a != nullptr && a->device == device;
}

ncclResult_t enqueue_collective(ncclComm* comm, cudaStream_t handle, const char* name,
                                const Request& collective, size_t send_bytes, size_t receive_bytes) {
  if (comm == nullptr) return failure(nullptr, ncclInvalidArgument, fmt::format("{}: no communicator", name));
  if (comm->aborted.load())
    return failure(comm, ncclInvalidUsage, fmt::format("{} on an aborted communicator", name));
  if (type_bytes(collective.type) == 0 || collective.type == ncclFloat16)
    return failure(comm, ncclInvalidArgument,
                   fmt::format("{}: data type {} is not emulated", name, static_cast<int>(collective.type)));
  if (collective.op < ncclSum || collective.op > ncclAvg)
    return failure(comm, ncclInvalidArgument,
                   fmt::format("{}: reduction {} is not emulated", name, static_cast<int>(collective.op)));
  std::lock_guard<std::mutex> lock(runtime_mutex());
  const bool sends = collective.kind != Kind::kBroadcast || comm->rank == collective.root;
  if ((sends && !device_range(collective.send, send_bytes, comm->device)) ||
      !device_range(collective.receive, receive_bytes, comm->device)) {
    return failure(comm, ncclInvalidArgument,
                   fmt::format("{}: the buffers ({} bytes at {}, {} bytes at {}) must be memory of GPU {}",
                               name, send_bytes, static_cast<const void*>(collective.send), receive_bytes,
                               static_cast<void*>(collective.receive), comm->device));
  }
  Stream* stream = resolve_stream(handle);
  if (stream == nullptr || stream_device(stream) != comm->device)
    return failure(comm, ncclInvalidArgument,
                   fmt::format("{}: the stream is not a stream of GPU {}", name, comm->device));
  auto state = std::make_shared<Collective>(collective);
  const uint64_t position = enqueue(stream, name, [state] { return state->step(); });
  if (comm->ranks > 1) {
    InFlight& f = in_flight();
    f.positions.emplace_back(stream, position);
    if (!f.thread_started) {
      f.thread_started = true;
      std::thread(progress_main).detach();
    }
  }
  return ncclSuccess;
}

}  // namespace
}  // namespace nanoforge::emulator

using namespace nanoforge::emulator;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  return comm != nullptr ? comm->last_error.c_str() : global_last_error().c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, kIdMagic, sizeof(kIdMagic));
  std::random_device entropy;
  for (size_t i = sizeof(kIdMagic); i < sizeof(kIdMagic) + 8; ++i)
    id->internal[i] = static_cast<char>(entropy());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int ranks, ncclUniqueId id, int rank) {
  *out = nullptr;
  if (std::memcmp(id.internal, kIdMagic, sizeof(kIdMagic)) != 0)
    return failure(nullptr, ncclInvalidArgument,
                   "ncclCommInitRank: the unique id was not made by ncclGetUniqueId");
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return failure(nullptr, ncclInvalidArgument, fmt::format("ncclCommInitRank: rank {} of {}", rank, ranks));
  auto comm = std::make_unique<ncclComm>();
  comm->rank = rank;
  comm->ranks = ranks;
  {
    std::lock_guard<std::mutex> lock(runtime_mutex());
    comm->device = current_device();
    if (!valid_device(comm->device))
      return failure(nullptr, ncclInvalidUsage, "ncclCommInitRank: the current GPU does not exist");
  }
  if (ranks > 1) {
    int initialized = 0, level = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      return failure(
          nullptr, ncclInvalidUsage,
          "ncclCommInitRank: the emulated NCCL exchanges data over MPI; start the ranks with mpirun");
    }
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
      return failure(nullptr, ncclSystemError,
                     "ncclCommInitRank: the emulated NCCL needs MPI_THREAD_MULTIPLE");
    uint64_t color = 0;
    std::memcpy(&color, id.internal + sizeof(kIdMagic), sizeof(color));
    if (MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(color & 0x7fffffff), rank, &comm->mpi) != MPI_SUCCESS)
      return failure(nullptr, ncclSystemError, "ncclCommInitRank: MPI_Comm_split failed");
    int size = 0;
    MPI_Comm_size(comm->mpi, &size);
    if (size != ranks) {
      return failure(
          nullptr, ncclInvalidUsage,
          fmt::format("ncclCommInitRank: {} ranks asked for, {} MPI processes joined", ranks, size));
    }
  }
  *out = comm.release();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (comm->mpi != MPI_COMM_NULL) MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  // Queued operations may still name the communicator: it is marked and kept, never freed.
  if (comm != nullptr) comm->aborted.store(true);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  *error = ncclSuccess;
  return comm != nullptr ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclAllReduce(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * type_bytes(type);
  return enqueue_collective(comm, stream, "ncclAllReduce",
                            {comm, Kind::kAllReduce, static_cast<const unsigned char*>(send),
                             static_cast<unsigned char*>(receive), count, type, op, 0},
                            bytes, bytes);
}

ncclResult_t ncclReduceScatter(const void* send, void* receive, size_t receive_count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = receive_count * type_bytes(type);
  const size_t ranks = comm != nullptr ? static_cast<size_t>(comm->ranks) : 1;
  return enqueue_collective(comm, stream, "ncclReduceScatter",
                            {comm, Kind::kReduceScatter, static_cast<const unsigned char*>(send),
                             static_cast<unsigned char*>(receive), receive_count, type, op, 0},
                            bytes * ranks, bytes);
}

ncclResult_t ncclAllGather(const void* send, void* receive, size_t send_count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = send_count * type_bytes(type);
  const size_t ranks = comm != nullptr ? static_cast<size_t>(comm->ranks) : 1;
  return enqueue_collective(comm, stream, "ncclAllGather",
                            {comm, Kind::kAllGather, static_cast<const unsigned char*>(send),
                             static_cast<unsigned char*>(receive), send_count, type, ncclSum, 0},
                            bytes, bytes * ranks);
}

ncclResult_t ncclBroadcast(const void* send, void* receive, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * type_bytes(type);
  if (comm != nullptr && (root < 0 || root >= comm->ranks))
    return failure(comm, ncclInvalidArgument,
                   fmt::format("ncclBroadcast: root {} of {} ranks", root, comm->ranks));
  return enqueue_collective(comm, stream, "ncclBroadcast",
                            {comm, Kind::kBroadcast, static_cast<const unsigned char*>(send),
                             static_cast<unsigned char*>(receive), count, type, ncclSum, root},
                            bytes, bytes);
}

}  // extern "C"
