// tcp_rendezvous: rank 0 serves (rendezvous_server.cpp); every other rank joins here, retrying name
// resolution and the connection until rank 0 is up, then answers rank 0's challenge with its hello and
// waits for the payload. Non-blocking sockets driven by poll() against deadlines (rendezvous_io.h).
#include "dist/tcp_rendezvous.h"

#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "dist/rendezvous_io.h"
#include "dist/rendezvous_server.h"
#include "dist/tcp_io.h"
#include "support/json_text.h"
#include "support/status.h"

namespace nanoforge {
namespace {

using Clock = TcpClock;
using rendezvous_io::connect_and_get_challenge;
using rendezvous_io::errno_text;
using rendezvous_io::receive_message;
using rendezvous_io::send_all;
using rendezvous_io::Socket;

constexpr auto kConnectRetry = std::chrono::milliseconds(100);  // while rank 0 is not listening yet

absl::StatusOr<std::vector<uint8_t>> join(const RendezvousOptions& options, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const std::string port = std::to_string(options.master_port);
  const std::string where = fmt::format("rank 0 at {}:{}", options.master_addr, options.master_port);
  // Name resolution can fail for a while when nodes boot together: retry it like the connection.
  int resolved = EAI_AGAIN;
  while ((resolved = ::getaddrinfo(options.master_addr.c_str(), port.c_str(), &hints, &addresses)) ==
             EAI_AGAIN &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(kConnectRetry);
  }
  if (resolved != 0) {
    return absl::InvalidArgumentError(fmt::format("rendezvous: MASTER_ADDR={} does not resolve: {}",
                                                  json_string(options.master_addr),
                                                  ::gai_strerror(resolved)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(addresses, &::freeaddrinfo);
  auto failed = [&](const absl::Status& status) {
    return absl::Status(status.code(), fmt::format("rendezvous: rank {} with {}: {}", options.rank, where,
                                                   std::string(status.message())));
  };
  std::string last_error = "none";
  std::optional<std::pair<Socket, RendezvousNonce>> connected;
  while (!connected) {
    absl::StatusOr<std::pair<Socket, RendezvousNonce>> attempt = connect_and_get_challenge(
        addresses, options.hello_timeout_seconds, deadline, &last_error, "rank 0's challenge", "MASTER_PORT");
    if (attempt.ok()) {
      connected = std::move(*attempt);
      break;
    }
    if (!absl::IsAborted(attempt.status())) return failed(attempt.status());
    if (Clock::now() + kConnectRetry >= deadline) {
      return absl::DeadlineExceededError(fmt::format(
          "rendezvous: rank {} could not connect to {} within {} s (last error: {}); is rank 0 running, and "
          "is MASTER_ADDR an address of its machine that this one can reach?",
          options.rank, where, options.timeout_seconds, last_error));
    }
    std::this_thread::sleep_for(kConnectRetry);
  }
  auto& [socket, challenge] = *connected;
  NANOFORGE_ASSIGN_OR_RETURN(const RendezvousNonce nonce, random_rendezvous_nonce());
  const std::vector<uint8_t> hello =
      encode_hello(options.key, challenge, static_cast<uint32_t>(options.world_size),
                   static_cast<uint32_t>(options.rank), nonce);
  if (absl::Status sent = send_all(socket.fd(), hello, deadline, "the hello"); !sent.ok())
    return failed(sent);
  absl::StatusOr<std::vector<uint8_t>> body =
      receive_message(socket.fd(), RendezvousMessage::kReply, deadline, "rank 0's reply");
  if (!body.ok()) {
    if (absl::IsDataLoss(body.status())) return failed(body.status());
    return failed(absl::Status(body.status().code(),
                               std::string(body.status().message()) +
                                   " (rank 0 waits for every rank before it answers: see its error)"));
  }
  absl::StatusOr<RendezvousReply> reply = parse_reply_body(*body, options.key, challenge, nonce);
  if (!reply.ok()) return failed(reply.status());
  if (!reply->accepted) {
    return failed(absl::FailedPreconditionError(
        fmt::format("rank 0 refused: {}", std::string(reply->data.begin(), reply->data.end()))));
  }
  return std::move(reply->data);
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> tcp_rendezvous(const RendezvousOptions& options,
                                                    std::span<const uint8_t> payload) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        fmt::format("rendezvous: rank {} is not in a world of {}", options.rank, options.world_size));
  }
  if (options.world_size == 1) return std::vector<uint8_t>(payload.begin(), payload.end());
  if (options.key.source.empty())
    return absl::InvalidArgumentError(
        "rendezvous: no key given (rendezvous_key_from_env makes the job's key)");
  if (payload.size() > kRendezvousMaxDataBytes) {
    return absl::InvalidArgumentError(fmt::format("rendezvous payload of {} bytes is too big (at most {})",
                                                  payload.size(), kRendezvousMaxDataBytes));
  }
  const auto deadline = tcp_deadline_after(options.timeout_seconds);
  if (options.rank != 0) return join(options, deadline);
  return serve_rendezvous(options, deadline, payload);
}

}  // namespace nanoforge
