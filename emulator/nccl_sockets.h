// Loopback TCP for the emulated NCCL's ranks (one process each, on one machine): a listener on an ephemeral
// port, connecting to one, and exact reads and writes that give up when `stop` is set (ncclCommAbort from
// another thread) instead of blocking forever. Every wait polls in short slices so that an abort is seen
// within 50 ms.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace nanoforge::emulator {

// A listening socket on 127.0.0.1 and its port; -1 on failure.
int listen_on_loopback(uint16_t* port);
// A connected socket to 127.0.0.1:port; -1 when nobody listens there (the peer's process is gone).
int connect_to_loopback(uint16_t port);
// The next connection to `listener`, or -1 once `stop` is set.
int accept_until(int listener, const std::atomic<bool>& stop);

enum class Transfer { kDone, kClosed, kStopped };
Transfer write_exact(int fd, const void* data, size_t bytes, const std::atomic<bool>& stop);
Transfer read_exact(int fd, void* data, size_t bytes, const std::atomic<bool>& stop);

// Non-blocking progress: moves what the socket takes now; returns false when the peer closed or failed.
bool write_some(int fd, const unsigned char* data, size_t bytes, size_t* done);
bool read_some(int fd, unsigned char* data, size_t bytes, size_t* done);

}  // namespace nanoforge::emulator
