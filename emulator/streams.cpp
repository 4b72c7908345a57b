// Lazy streams (runtime.h). Each operation records the positions on other streams it must follow: the event
// it waits for, and CUDA's implicit order between the legacy default stream and blocking streams (an
// operation on the legacy stream follows everything queued on the device's blocking streams, and one on a
// blocking stream follows the legacy stream; non-blocking streams follow only their events). Advancing a
// stream to a position first advances what each operation follows, so only ordered work ever runs before it.
#include <chrono>
#include <deque>
#include <thread>

#include "emulator/runtime.h"

namespace nanoforge::emulator {

struct Stream {
  struct Queued {
    uint64_t position;
    std::string what;
    std::function<Progress()> run;
    std::vector<std::pair<Stream*, uint64_t>> after;
  };

  int device = 0;
  bool legacy = false;
  bool blocking = true;  // orders with the legacy stream
  int priority = 0;
  bool destroyed = false;
  std::deque<Queued> queue;
  uint64_t enqueued = 0;   // position of the last queued operation
  uint64_t completed = 0;  // every operation up to this position has run
};

namespace {

struct Streams {
  std::vector<Stream*> all;     // never freed: a destroyed stream may still be named by another's order
  std::vector<Stream*> legacy;  // per device
};

Streams& streams() {
  static Streams* instance = new Streams();
  return *instance;
}

Stream* legacy_stream(int device) {
  Streams& s = streams();
  if (s.legacy.size() <= static_cast<size_t>(device))
    s.legacy.resize(static_cast<size_t>(device) + 1, nullptr);
  Stream*& stream = s.legacy[static_cast<size_t>(device)];
  if (stream == nullptr) {
    stream = new Stream();
    stream->device = device;
    stream->legacy = true;
    s.all.insert(s.all.begin(), stream);
  }
  return stream;
}

bool busy(const Stream* stream) {
  return stream->enqueued > stream->completed;
}

}  // namespace

Stream* resolve_stream(cudaStream_t handle) {
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
    return valid_device(current_device()) ? legacy_stream(current_device()) : nullptr;
  }
  for (Stream* stream : streams().all) {
    if (reinterpret_cast<cudaStream_t>(stream) == handle && !stream->destroyed) return stream;
  }
  return nullptr;
}

int stream_device(const Stream* stream) {
  return stream->device;
}

uint64_t enqueue(Stream* stream, std::string what, std::function<Progress()> run,
                 std::vector<std::pair<Stream*, uint64_t>> after) {
  if (stream->legacy) {
    for (Stream* other : streams().all) {
      if (other != stream && other->device == stream->device && other->blocking && !other->destroyed &&
          busy(other))
        after.emplace_back(other, other->enqueued);
    }
  } else if (stream->blocking) {
    Stream* legacy = legacy_stream(stream->device);
    if (busy(legacy)) after.emplace_back(legacy, legacy->enqueued);
  }
  const uint64_t position = ++stream->enqueued;
  stream->queue.push_back({position, std::move(what), std::move(run), std::move(after)});
  return position;
}

bool advance(Stream* stream, uint64_t position) {
  while (stream->completed < position) {
    Stream::Queued& next = stream->queue.front();
    for (const auto& [other, other_position] : next.after) {
      if (!advance(other, other_position)) return false;
    }
    // After a kernel failed, the device runs nothing more: every call reports the failure.
    if (sticky_error() == cudaSuccess && next.run() == Progress::kPending) return false;
    stream->completed = next.position;
    stream->queue.pop_front();
  }
  return true;
}

void wait_for(std::unique_lock<std::mutex>& lock, Stream* stream, uint64_t position) {
  while (!advance(stream, position)) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    lock.lock();
  }
}

uint64_t last_position(const Stream* stream) {
  return stream->enqueued;
}

std::vector<Stream*> streams_of(int device) {
  std::vector<Stream*> found{legacy_stream(device)};
  for (Stream* stream : streams().all) {
    if (stream->device == device && !stream->legacy && !stream->destroyed) found.push_back(stream);
  }
  return found;
}

Stream* create_stream(int device, bool blocking, int priority) {
  auto* stream = new Stream();
  stream->device = device;
  stream->blocking = blocking;
  stream->priority = priority;
  streams().all.push_back(stream);
  return stream;
}

void destroy_stream(std::unique_lock<std::mutex>& lock, Stream* stream) {
  // CUDA finishes a destroyed stream's work; here it runs now, as nothing will wait for it later.
  wait_for(lock, stream, stream->enqueued);
  stream->destroyed = true;
}

}  // namespace nanoforge::emulator
