// NCCL on the emulator: one process per emulated GPU, started by mpirun, srun or torchrun-style alike, with
// no MPI underneath. ncclGetUniqueId opens rank 0's bootstrap listener and writes its loopback port into the
// id (as NCCL writes its root's address); ncclCommInitRank gathers every rank's data port through it; the
// first collective connects the ranks to each other (NCCL too connects lazily, inside the first
// collectives). A collective is an operation on the caller's stream that, when the stream reaches it, sends
// its input to every peer, receives theirs and reduces with NCCL's ring numerics (nccl_ring_reduce.h); a
// progress thread advances the streams that hold multi-rank collectives, as a GPU runs them whether or not
// the host waits. Communicators created with blocking = 0 return ncclInProgress while they connect or tear
// down, and report a peer that closed its connection as an asynchronous error; ncclCommAbort works from any
// thread at any time. NANOFORGE_EMULATOR's nccl_fault= injects a rank that dies, stalls or fails
// (emulator.h).
#include <nccl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "emulator/emulator.h"
#include "emulator/nccl_ring_reduce.h"
#include "emulator/nccl_sockets.h"
#include "emulator/runtime.h"

struct ncclComm {
  int rank = 0;
  int ranks = 1;
  int device = 0;
  bool blocking = true;
  uint64_t job = 0;  // from the unique id: what every message of this communicator carries
  std::atomic<bool> aborted{false};
  std::atomic<int> async_error{ncclSuccess};
  std::atomic<int> pending{0};     // background work (init, connection setup, finalize) under way
  std::atomic<int> connection{0};  // 0: not connected yet, 1: connecting, 2: connected
  int bootstrap_listener = -1;     // rank 0's, opened by ncclGetUniqueId
  int data_listener = -1;
  std::vector<uint16_t> data_ports;  // every rank's, gathered at init
  std::vector<int> peers;            // a connected socket per peer (-1 for this rank)
  uint64_t collectives = 0;          // collectives called so far (their sequence numbers)
  bool finalized = false;
  std::mutex mutex;  // guards last_error and workers
  std::string last_error;
  std::vector<std::thread> workers;
};

namespace nanoforge::emulator {
namespace {

constexpr char kIdMagic[] = "nanoforge-emulated-nccl";
constexpr uint64_t kTeardownSequence = ~uint64_t{0};

struct IdContent {
  uint64_t job;
  uint16_t bootstrap_port;
};

// What a rank says when it connects: which job, which rank, and (at bootstrap) its data port.
struct Hello {
  uint64_t job;
  int32_t rank;
  uint16_t data_port;
  uint16_t unused;
};

// What precedes each collective's payload on a connection, so that ranks out of step fail, not mix.
struct Header {
  uint64_t sequence;
  uint64_t bytes;
};

std::string& global_last_error() {
  static auto* text = new std::string();
  return *text;
}

// Rank 0's bootstrap listeners, by job, from ncclGetUniqueId to ncclCommInitRank.
std::map<uint64_t, int>& bootstrap_listeners() {
  static auto* listeners = new std::map<uint64_t, int>();
  return *listeners;
}
std::mutex& bootstrap_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}

void say(const ncclComm* comm, const std::string& what) {
  if (comm != nullptr) {
    std::fprintf(stderr, "nanoforge CUDA emulator: NCCL rank %d: %s\n", comm->rank, what.c_str());
  } else {
    std::fprintf(stderr, "nanoforge CUDA emulator: NCCL: %s\n", what.c_str());
  }
  std::fflush(stderr);
}

ncclResult_t failure(ncclComm* comm, ncclResult_t result, const std::string& why) {
  if (comm != nullptr) {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->last_error = why;
  } else {
    global_last_error() = why;
  }
  say(comm, why);
  return result;
}

// The communicator's first asynchronous error wins; later ones only go to stderr.
ncclResult_t fail_async(ncclComm* comm, ncclResult_t result, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (comm->async_error.load() == ncclSuccess && !comm->aborted.load()) {
      comm->last_error = why;
      comm->async_error.store(result);
    }
  }
  say(comm, why);
  return result;
}

// nccl_fault= for this rank at this point: dies, freezes, or fails its communicator (returns true).
bool inject_fault(ncclComm* comm, NcclFault::Point point, uint64_t collective = 0) {
  const NcclFault& fault = settings().nccl_fault;
  if (fault.action == NcclFault::Action::kNone || fault.rank != comm->rank || fault.point != point ||
      (point == NcclFault::Point::kCollective && static_cast<uint64_t>(fault.collective) != collective))
    return false;
  const char* where = point == NcclFault::Point::kConnect   ? "connection setup"
                      : point == NcclFault::Point::kDestroy ? "teardown"
                                                            : "collective";
  say(comm,
      fmt::format("injected fault: {} at {}{}",
                  fault.action == NcclFault::Action::kDie     ? "dies (SIGKILL)"
                  : fault.action == NcclFault::Action::kStall ? "stalls (SIGSTOP)"
                                                              : "asynchronous error",
                  where, point == NcclFault::Point::kCollective ? fmt::format(" #{}", collective) : ""));
  switch (fault.action) {
    case NcclFault::Action::kDie:
      ::raise(SIGKILL);
      return false;
    case NcclFault::Action::kStall:
      ::raise(SIGSTOP);
      return false;
    default:
      fail_async(comm, ncclSystemError, fmt::format("injected asynchronous error at {}", where));
      return true;
  }
}

// Init: every rank reports its data port to rank 0, which sends the table back to all.
ncclResult_t bootstrap(ncclComm* comm, uint16_t root_port) {
  uint16_t data_port = 0;
  comm->data_listener = listen_on_loopback(&data_port);
  if (comm->data_listener < 0)
    return fail_async(comm, ncclSystemError, "ncclCommInitRank: cannot listen on the loopback interface");
  comm->data_ports.assign(static_cast<size_t>(comm->ranks), 0);
  comm->data_ports[static_cast<size_t>(comm->rank)] = data_port;
  const size_t table_bytes = comm->data_ports.size() * sizeof(uint16_t);
  if (comm->rank == 0) {
    std::vector<int> joined;
    while (static_cast<int>(joined.size()) < comm->ranks - 1) {
      const int fd = accept_until(comm->bootstrap_listener, comm->aborted);
      if (fd < 0) return ncclInvalidUsage;  // aborted
      Hello hello{};
      if (read_exact(fd, &hello, sizeof(hello), comm->aborted) != Transfer::kDone || hello.job != comm->job ||
          hello.rank <= 0 || hello.rank >= comm->ranks ||
          comm->data_ports[static_cast<size_t>(hello.rank)] != 0) {
        ::close(fd);  // not one of this job's ranks, or a rank twice: refused
        continue;
      }
      comm->data_ports[static_cast<size_t>(hello.rank)] = hello.data_port;
      joined.push_back(fd);
    }
    for (const int fd : joined) {
      write_exact(fd, comm->data_ports.data(), table_bytes, comm->aborted);
      ::close(fd);
    }
    return ncclSuccess;
  }
  const int fd = connect_to_loopback(root_port);
  if (fd < 0)
    return fail_async(
        comm, ncclRemoteError,
        fmt::format("ncclCommInitRank: rank 0's bootstrap (port {}) is unreachable", root_port));
  const Hello hello{comm->job, comm->rank, data_port, 0};
  Transfer sent = write_exact(fd, &hello, sizeof(hello), comm->aborted);
  if (sent == Transfer::kDone) sent = read_exact(fd, comm->data_ports.data(), table_bytes, comm->aborted);
  ::close(fd);
  if (sent == Transfer::kClosed)
    return fail_async(comm, ncclRemoteError, "ncclCommInitRank: rank 0 closed the bootstrap connection");
  return sent == Transfer::kDone ? ncclSuccess : ncclInvalidUsage;
}

// The lazy connection setup of the first collective: each rank connects to the lower ranks and accepts the
// higher ones. A peer that never connects keeps this waiting until the communicator is aborted.
ncclResult_t connect_ranks(ncclComm* comm) {
  inject_fault(comm, NcclFault::Point::kConnect);
  if (comm->async_error.load() != ncclSuccess) return static_cast<ncclResult_t>(comm->async_error.load());
  std::vector<int> peers(static_cast<size_t>(comm->ranks), -1);
  const Hello hello{comm->job, comm->rank, 0, 0};
  for (int peer = 0; peer < comm->rank; ++peer) {
    const int fd = connect_to_loopback(comm->data_ports[static_cast<size_t>(peer)]);
    if (fd < 0 || write_exact(fd, &hello, sizeof(hello), comm->aborted) != Transfer::kDone) {
      return fail_async(comm, ncclRemoteError,
                        fmt::format("connection setup: rank {} is unreachable (its process is gone?)", peer));
    }
    peers[static_cast<size_t>(peer)] = fd;
  }
  for (int accepted = comm->rank + 1; accepted < comm->ranks;) {
    const int fd = accept_until(comm->data_listener, comm->aborted);
    if (fd < 0) return ncclInvalidUsage;  // aborted
    Hello from{};
    if (read_exact(fd, &from, sizeof(from), comm->aborted) != Transfer::kDone || from.job != comm->job ||
        from.rank <= comm->rank || from.rank >= comm->ranks || peers[static_cast<size_t>(from.rank)] >= 0) {
      ::close(fd);
      continue;
    }
    peers[static_cast<size_t>(from.rank)] = fd;
    ++accepted;
  }
  comm->peers = std::move(peers);
  comm->connection.store(2);
  return ncclSuccess;
}

// Teardown: every rank tells every peer it is done and waits to hear the same (a rank that stalls here
// keeps its peers waiting; one that died is an error).
ncclResult_t finalize_now(ncclComm* comm) {
  inject_fault(comm, NcclFault::Point::kDestroy);
  if (comm->connection.load() != 2 || comm->async_error.load() != ncclSuccess) return ncclSuccess;
  const Header bye{kTeardownSequence, 0};
  for (int peer = 0; peer < comm->ranks; ++peer) {
    if (peer != comm->rank)
      write_exact(comm->peers[static_cast<size_t>(peer)], &bye, sizeof(bye), comm->aborted);
  }
  for (int peer = 0; peer < comm->ranks; ++peer) {
    if (peer == comm->rank) continue;
    Header heard{};
    const Transfer read =
        read_exact(comm->peers[static_cast<size_t>(peer)], &heard, sizeof(heard), comm->aborted);
    if (read == Transfer::kStopped) return ncclInvalidUsage;
    if (read == Transfer::kClosed || heard.sequence != kTeardownSequence)
      return fail_async(comm, ncclRemoteError,
                        fmt::format("teardown: rank {} closed its connection (its process exited?)", peer));
  }
  return ncclSuccess;
}

// Runs `work` now (blocking communicator) or on a worker thread, the call returning ncclInProgress.
template <class Work>
ncclResult_t run_or_start(ncclComm* comm, Work work) {
  if (comm->blocking) return work();
  comm->pending.fetch_add(1);
  std::lock_guard<std::mutex> lock(comm->mutex);
  comm->workers.emplace_back([comm, work] {
    const ncclResult_t result = work();
    if (result != ncclSuccess && comm->async_error.load() == ncclSuccess && !comm->aborted.load())
      fail_async(comm, result, "background NCCL work failed");
    comm->pending.fetch_sub(1);
  });
  return ncclInProgress;
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

// One collective, advanced by its stream: send this rank's input to every peer and receive theirs, then
// reduce. While the communicator has failed it stays pending, as a kernel waiting for a lost peer does,
// until ncclCommAbort drops it.
struct Collective : Request {
  Collective(const Request& request, uint64_t sequence) : Request(request), sequence(sequence) {}
  uint64_t sequence;
  bool started = false;
  std::vector<unsigned char> outgoing;               // header + this rank's input
  std::vector<std::vector<unsigned char>> incoming;  // header + each peer's input
  std::vector<size_t> sent, received;

  size_t input_bytes() const {
    const size_t bytes = count * nccl_type_bytes(type);
    return kind == Kind::kReduceScatter ? bytes * static_cast<size_t>(comm->ranks) : bytes;
  }
  bool sends(int rank) const { return kind != Kind::kBroadcast || rank == root; }

  void start() {
    const size_t bytes = input_bytes();
    const Header header{sequence, bytes};
    outgoing.resize(sizeof(header) + (sends(comm->rank) ? bytes : 0));
    std::memcpy(outgoing.data(), &header, sizeof(header));
    if (sends(comm->rank)) std::memcpy(outgoing.data() + sizeof(header), send, bytes);
    incoming.assign(static_cast<size_t>(comm->ranks), {});
    for (int peer = 0; peer < comm->ranks; ++peer) {
      if (peer != comm->rank && sends(peer))
        incoming[static_cast<size_t>(peer)].resize(sizeof(Header) + bytes);
    }
    sent.assign(static_cast<size_t>(comm->ranks), 0);
    received.assign(static_cast<size_t>(comm->ranks), 0);
    // This rank's own share needs no transfer.
    sent[static_cast<size_t>(comm->rank)] = outgoing.size();
    started = true;
  }

  // Moves bytes with every peer; false once the communicator has failed.
  bool exchange(bool* complete) {
    *complete = true;
    for (int peer = 0; peer < comm->ranks; ++peer) {
      if (peer == comm->rank) continue;
      const auto p = static_cast<size_t>(peer);
      const int fd = comm->peers[p];
      const size_t to_send = sends(comm->rank) ? outgoing.size() : sizeof(Header);
      bool alive = write_some(fd, outgoing.data(), to_send, &sent[p]);
      std::vector<unsigned char>& in = incoming[p];
      const size_t header_bytes = sizeof(Header);
      const size_t expected = in.empty() ? header_bytes : in.size();
      if (in.empty()) in.resize(header_bytes);
      const size_t before = received[p];
      alive = alive && read_some(fd, in.data(), expected, &received[p]);
      if (!alive) {
        fail_async(comm, ncclRemoteError,
                   fmt::format("rank {} closed its connection during collective #{} (its process exited?)",
                               peer, sequence));
        return false;
      }
      if (before < header_bytes && received[p] >= header_bytes) {
        Header header{};
        std::memcpy(&header, in.data(), sizeof(header));
        if (header.sequence != sequence || (sends(peer) && header.bytes != input_bytes())) {
          fail_async(
              comm, ncclInvalidUsage,
              fmt::format("rank {} sent collective #{} of {} bytes where this rank is at #{} of {} bytes: "
                          "the ranks called different collectives",
                          peer, header.sequence, header.bytes, sequence, input_bytes()));
          return false;
        }
      }
      if (sent[p] < to_send || received[p] < expected) *complete = false;
    }
    return true;
  }

  void finish() {
    std::vector<const unsigned char*> inputs(static_cast<size_t>(comm->ranks));
    for (int r = 0; r < comm->ranks; ++r) {
      inputs[static_cast<size_t>(r)] = r == comm->rank
                                           ? outgoing.data() + sizeof(Header)
                                           : incoming[static_cast<size_t>(r)].data() + sizeof(Header);
    }
    const size_t bytes = count * nccl_type_bytes(type);
    switch (kind) {
      case Kind::kAllReduce:
        ring_reduce(inputs.data(), comm->ranks, 0, count, count, type, op, receive);
        break;
      case Kind::kReduceScatter:
        ring_reduce(inputs.data(), comm->ranks, count * static_cast<size_t>(comm->rank), count,
                    count * static_cast<size_t>(comm->ranks), type, op, receive);
        break;
      case Kind::kAllGather:
        for (int r = 0; r < comm->ranks; ++r)
          std::memcpy(receive + static_cast<size_t>(r) * bytes, inputs[static_cast<size_t>(r)], bytes);
        break;
      case Kind::kBroadcast:
        std::memcpy(receive, inputs[static_cast<size_t>(root)], bytes);
        break;
    }
  }

  Progress step() {
    if (comm->aborted.load()) return Progress::kDone;  // an aborted communicator's work is dropped
    if (comm->async_error.load() != ncclSuccess || comm->connection.load() != 2) return Progress::kPending;
    if (!started) {
      if (inject_fault(comm, NcclFault::Point::kCollective, sequence)) return Progress::kPending;
      start();
    }
    bool complete = false;
    if (comm->ranks > 1 && (!exchange(&complete) || !complete)) return Progress::kPending;
    finish();
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

ncclResult_t enqueue_collective(ncclComm* comm, cudaStream_t handle, const char* name, const Request& request,
                                size_t send_bytes, size_t receive_bytes) {
  if (comm == nullptr) return failure(nullptr, ncclInvalidArgument, fmt::format("{}: no communicator", name));
  if (comm->aborted.load())
    return failure(comm, ncclInvalidUsage, fmt::format("{} on an aborted communicator", name));
  if (const int error = comm->async_error.load(); error != ncclSuccess)
    return static_cast<ncclResult_t>(error);
  if (nccl_type_bytes(request.type) == 0)
    return failure(comm, ncclInvalidArgument,
                   fmt::format("{}: data type {} is not emulated", name, static_cast<int>(request.type)));
  if (request.op < ncclSum || request.op > ncclAvg)
    return failure(comm, ncclInvalidArgument,
                   fmt::format("{}: reduction {} is not emulated", name, static_cast<int>(request.op)));
  {
    std::lock_guard<std::mutex> lock(runtime_mutex());
    const bool sends = request.kind != Kind::kBroadcast || comm->rank == request.root;
    if ((sends && !device_range(request.send, send_bytes, comm->device)) ||
        !device_range(request.receive, receive_bytes, comm->device)) {
      return failure(comm, ncclInvalidArgument,
                     fmt::format("{}: the buffers ({} bytes at {}, {} bytes at {}) must be memory of GPU {}",
                                 name, send_bytes, static_cast<const void*>(request.send), receive_bytes,
                                 static_cast<void*>(request.receive), comm->device));
    }
    Stream* stream = resolve_stream(handle);
    if (stream == nullptr || stream_device(stream) != comm->device)
      return failure(comm, ncclInvalidArgument,
                     fmt::format("{}: the stream is not a stream of GPU {}", name, comm->device));
    auto state = std::make_shared<Collective>(request, comm->collectives++);
    const uint64_t position = enqueue(stream, name, [state] { return state->step(); });
    if (comm->ranks > 1) {
      InFlight& f = in_flight();
      f.positions.emplace_back(stream, position);
      if (!f.thread_started) {
        f.thread_started = true;
        std::thread(progress_main).detach();
      }
    }
  }
  if (comm->ranks == 1 || comm->connection.load() == 2) return ncclSuccess;
  // The first collective connects the ranks: inside the call for a blocking communicator (where a peer that
  // never connects holds the caller forever), in the background otherwise.
  if (comm->connection.exchange(1) == 0) return run_or_start(comm, [comm] { return connect_ranks(comm); });
  return comm->blocking ? ncclSuccess : ncclInProgress;
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
  IdContent content{};
  std::random_device entropy;
  content.job = (static_cast<uint64_t>(entropy()) << 32) | entropy();
  const int listener = listen_on_loopback(&content.bootstrap_port);
  if (listener < 0)
    return failure(nullptr, ncclSystemError, "ncclGetUniqueId: cannot listen on the loopback interface");
  {
    std::lock_guard<std::mutex> lock(bootstrap_mutex());
    bootstrap_listeners()[content.job] = listener;
  }
  std::memcpy(id->internal, kIdMagic, sizeof(kIdMagic));
  std::memcpy(id->internal + sizeof(kIdMagic), &content, sizeof(content));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int ranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  *out = nullptr;
  if (std::memcmp(id.internal, kIdMagic, sizeof(kIdMagic)) != 0)
    return failure(nullptr, ncclInvalidArgument,
                   "ncclCommInitRank: the unique id was not made by ncclGetUniqueId");
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return failure(nullptr, ncclInvalidArgument, fmt::format("ncclCommInitRank: rank {} of {}", rank, ranks));
  IdContent content{};
  std::memcpy(&content, id.internal + sizeof(kIdMagic), sizeof(content));
  auto comm = std::make_unique<ncclComm>();
  comm->rank = rank;
  comm->ranks = ranks;
  comm->job = content.job;
  comm->blocking = config == nullptr || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
  {
    std::lock_guard<std::mutex> lock(runtime_mutex());
    comm->device = current_device();
    if (!valid_device(comm->device))
      return failure(nullptr, ncclInvalidUsage, "ncclCommInitRank: the current GPU does not exist");
  }
  if (ranks == 1) {
    comm->connection.store(2);
    *out = comm.release();
    return ncclSuccess;
  }
  if (rank == 0) {
    std::lock_guard<std::mutex> lock(bootstrap_mutex());
    auto found = bootstrap_listeners().find(content.job);
    if (found == bootstrap_listeners().end())
      return failure(nullptr, ncclInvalidUsage,
                     "ncclCommInitRank: rank 0 must be the process that called ncclGetUniqueId");
    comm->bootstrap_listener = found->second;
    bootstrap_listeners().erase(found);
  }
  ncclComm* made = comm.release();
  *out = made;
  const uint16_t root_port = content.bootstrap_port;
  const ncclResult_t result = run_or_start(made, [made, root_port] { return bootstrap(made, root_port); });
  if (result != ncclSuccess && result != ncclInProgress) {
    *out = nullptr;  // a blocking init that failed leaves no communicator (its sockets are left to exit)
  }
  return result;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int ranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(out, ranks, id, rank, nullptr);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->finalized || comm->ranks == 1) return ncclSuccess;
  comm->finalized = true;
  return run_or_start(comm, [comm] { return finalize_now(comm); });
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!comm->finalized && comm->ranks > 1) {
    comm->finalized = true;
    finalize_now(comm);  // destroy without finalize tears down inside the call
  }
  if (comm->aborted.load()) return ncclSuccess;  // aborted: queued operations may still name it
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    workers.swap(comm->workers);
  }
  for (std::thread& worker : workers)
    worker.join();
  for (const int fd : comm->peers)
    if (fd >= 0) ::close(fd);
  if (comm->data_listener >= 0) ::close(comm->data_listener);
  if (comm->bootstrap_listener >= 0) ::close(comm->bootstrap_listener);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  // From any thread, at any time: wakes every wait on the sockets; queued operations may still name the
  // communicator, so it is marked and kept, never freed.
  if (comm == nullptr) return ncclSuccess;
  comm->aborted.store(true);
  if (comm->connection.load() != 2) return ncclSuccess;  // still connecting: its waits poll `aborted`
  for (const int fd : comm->peers)
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  if (comm == nullptr) return ncclInvalidArgument;
  const int async = comm->async_error.load();
  if (async != ncclSuccess) {
    *error = static_cast<ncclResult_t>(async);
  } else {
    *error = comm->pending.load() > 0 ? ncclInProgress : ncclSuccess;
  }
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * nccl_type_bytes(type);
  return enqueue_collective(comm, stream, "ncclAllReduce",
                            {comm, Kind::kAllReduce, static_cast<const unsigned char*>(send),
                             static_cast<unsigned char*>(receive), count, type, op, 0},
                            bytes, bytes);
}

ncclResult_t ncclReduceScatter(const void* send, void* receive, size_t receive_count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = receive_count * nccl_type_bytes(type);
  const size_t ranks = comm != nullptr ? static_cast<size_t>(comm->ranks) : 1;
  return enqueue_collective(comm, stream, "ncclReduceScatter",
                            {comm, Kind::kReduceScatter, static_cast<const unsigned char*>(send),
                             static_cast<unsigned char*>(receive), receive_count, type, op, 0},
                            bytes * ranks, bytes);
}

ncclResult_t ncclAllGather(const void* send, void* receive, size_t send_count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = send_count * nccl_type_bytes(type);
  const size_t ranks = comm != nullptr ? static_cast<size_t>(comm->ranks) : 1;
  return enqueue_collective(comm, stream, "ncclAllGather",
                            {comm, Kind::kAllGather, static_cast<const unsigned char*>(send),
                             static_cast<unsigned char*>(receive), send_count, type, ncclSum, 0},
                            bytes, bytes * ranks);
}

ncclResult_t ncclBroadcast(const void* send, void* receive, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * nccl_type_bytes(type);
  if (comm != nullptr && (root < 0 || root >= comm->ranks))
    return failure(comm, ncclInvalidArgument,
                   fmt::format("ncclBroadcast: root {} of {} ranks", root, comm->ranks));
  return enqueue_collective(comm, stream, "ncclBroadcast",
                            {comm, Kind::kBroadcast, static_cast<const unsigned char*>(send),
                             static_cast<unsigned char*>(receive), count, type, ncclSum, root},
                            bytes, bytes);
}

}  // extern "C"
