// agent_rendezvous: the host's thread (accept, authenticate, form rounds, watch them) and the agent's link.
// A connection is handled to its hello before the next is accepted (at most hello_timeout_seconds each): a
// few agents join, and a stranger costs a delay, never a place. After the reply, one byte at a time: the
// agent sends kHeartbeat, kFailed or kDone; the host kHeartbeat, kFinished, or kReform or kJoin followed by
// the reason (a length byte, then the text) in one send. A round's
// survivors keep their connection until they are back in the next round, so the host waits for each of them
// (and closes the round as soon as they are all in) but not for one that vanished.
#include "dist/agent_rendezvous.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "dist/tcp_io.h"
#include "support/status.h"

namespace nanoforge {
namespace {

using Clock = TcpClock;
using rendezvous_io::Socket;

constexpr uint8_t kHeartbeat = 'H';
constexpr uint8_t kFailed = 'F';
constexpr uint8_t kDone = 'D';
constexpr uint8_t kReform = 'S';
constexpr uint8_t kFinished = 'E';
constexpr uint8_t kJoin = 'J';  // a machine waits to join: stop the ranks with a checkpoint, then re-form
constexpr uint32_t kNoPreviousRank = 0xFFFFFFFF;
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr auto kConnectRetry = std::chrono::milliseconds(200);  // while no host listens (yet, or again)
constexpr double kRefusalReportSeconds = 10;

double seconds_since(Clock::time_point then) {
  return std::chrono::duration<double>(Clock::now() - then).count();
}

// "10.0.0.7" of "10.0.0.7:41234", "fe80::1" of "[fe80::1]:41234".
std::string address_without_port(const std::string& peer) {
  std::string address = peer.substr(0, peer.rfind(':'));
  if (address.size() >= 2 && address.front() == '[') address = address.substr(1, address.size() - 2);
  return address;
}

// Whether `host` names an address of this machine: a socket can be bound to it.
bool is_local_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  if (::getaddrinfo(host.c_str(), "0", &hints, &addresses) != 0) return false;
  bool local = false;
  for (const addrinfo* a = addresses; a != nullptr && !local; a = a->ai_next) {
    Socket probe(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    local = probe.valid() && ::bind(probe.fd(), a->ai_addr, a->ai_addrlen) == 0;
  }
  ::freeaddrinfo(addresses);
  return local;
}

bool send_byte_now(int fd, uint8_t byte) {
  return ::send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

// Reads every byte that is there; false when the peer closed the connection (or it broke).
bool read_bytes(int fd, std::vector<uint8_t>* bytes) {
  uint8_t buffer[64];
  while (true) {
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got > 0) {
      bytes->insert(bytes->end(), buffer, buffer + got);
      continue;
    }
    if (got == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

// An agent that authenticated: waiting for a round (pending) or in one (member).
struct Agent {
  Socket socket;
  RendezvousNonce challenge{}, hello_nonce{};
  int nproc_per_node = 0;
  int previous_node_rank = -1;
  std::string address;
  Clock::time_point heard{};
  bool done = false;
};

std::string encode_membership(const AgentMembership& m) {
  return fmt::format("round {} nnodes {} node_rank {} nproc {} master {} {} previous {}", m.round, m.nnodes,
                     m.node_rank, m.nproc_per_node, m.master_addr, m.master_port,
                     absl::StrJoin(m.previous_node_ranks, ","));
}

absl::StatusOr<AgentMembership> parse_membership(const std::string& text) {
  const std::vector<std::string> words = absl::StrSplit(text, ' ');
  AgentMembership m;
  bool ok = words.size() == 13 && absl::SimpleAtoi(words[1], &m.round) &&
            absl::SimpleAtoi(words[3], &m.nnodes) && absl::SimpleAtoi(words[5], &m.node_rank) &&
            absl::SimpleAtoi(words[7], &m.nproc_per_node) && absl::SimpleAtoi(words[10], &m.master_port);
  if (ok) {
    m.master_addr = words[9];
    for (const absl::string_view previous : absl::StrSplit(words[12], ',')) {
      int value = -1;
      ok = ok && absl::SimpleAtoi(previous, &value);
      m.previous_node_ranks.push_back(value);
    }
  }
  if (!ok || m.nnodes < 1 || m.node_rank < 0 || m.node_rank >= m.nnodes ||
      static_cast<int>(m.previous_node_ranks.size()) != m.nnodes) {
    return absl::DataLossError(fmt::format("the host's membership does not parse: \"{}\"", text));
  }
  return m;
}

class Host final : public AgentRendezvousHost {
 public:
  Host(const AgentRendezvousOptions& options, Socket listener)
      : options_(options), listener_(std::move(listener)), thread_([this] { serve(); }) {}
  ~Host() override {
    stop_ = true;
    thread_.join();
  }
  std::optional<absl::Status> job_outcome() const override {
    std::lock_guard<std::mutex> lock(outcome_mutex_);
    return outcome_;
  }

 private:
  void serve() {
    collecting_since_ = last_join_ = Clock::now();
    Clock::time_point last_heartbeat{};
    while (!stop_) {
      std::vector<pollfd> fds = {{listener_.fd(), POLLIN, 0}};
      ::poll(fds.data(), fds.size(), static_cast<int>(kTick.count()));
      if (fds[0].revents & POLLIN) {
        if (admit()) last_join_ = Clock::now();
      }
      // An agent that left before its round is forgotten (it joins again if it comes back).
      std::erase_if(pending_, [](Agent& agent) {
        std::vector<uint8_t> ignored;
        return !read_bytes(agent.socket.fd(), &ignored);
      });
      if (seconds_since(last_heartbeat) >= options_.silence_seconds / 10) {
        for (Agent& member : members_)
          send_byte_now(member.socket.fd(), kHeartbeat);
        for (auto& [node, survivor] : awaited_)
          send_byte_now(survivor.socket.fd(), kHeartbeat);
        last_heartbeat = Clock::now();
      }
      watch_awaited();
      if (collecting_) {
        collect();
      } else {
        watch_round();
      }
    }
  }

  // While a round forms: close it when it can, or give up on MIN at the join timeout.
  void collect() {
    const int joined = static_cast<int>(pending_.size());
    if (joined >= options_.max_nodes) {
      form_round();
    } else if (joined >= options_.min_nodes && !awaiting_a_live_survivor() &&
               (reforming_ || seconds_since(last_join_) >= options_.last_call_seconds)) {
      form_round();  // after a round: every survivor that still beats is back
    } else if (seconds_since(collecting_since_) > options_.join_timeout_seconds) {
      if (joined >= options_.min_nodes) {
        form_round();  // survivors still stopping their ranks join the next round
        return;
      }
      const std::string why = fmt::format("only {} of at least {} agents joined within --join-timeout {} s",
                                          joined, options_.min_nodes, options_.join_timeout_seconds);
      refuse_pending(why);
      set_outcome(absl::FailedPreconditionError(why));
      collecting_since_ = Clock::now();
    }
  }

  // While a round runs: its end, by a failure, a vanished agent, the job's end or a machine waiting to join.
  void watch_round() {
    std::string lost;
    int lost_node = -1;
    for (size_t node = 0; node < members_.size(); ++node) {
      Agent& member = members_[node];
      std::vector<uint8_t> bytes;
      const bool open = read_bytes(member.socket.fd(), &bytes);
      if (!bytes.empty()) member.heard = Clock::now();
      for (const uint8_t byte : bytes) {
        if (byte == kFailed && lost.empty()) lost = fmt::format("node {} reported its ranks failed", node);
        if (byte == kDone) member.done = true;
      }
      if (!lost.empty()) continue;
      if (!open) {
        lost = fmt::format("node {} ({}) closed its connection", node, member.address);
      } else if (seconds_since(member.heard) > options_.silence_seconds) {
        lost = fmt::format("node {} ({}) silent for {:.1f} s", node, member.address,
                           seconds_since(member.heard));
      }
      if (!lost.empty()) lost_node = static_cast<int>(node);
    }
    if (std::all_of(members_.begin(), members_.end(), [](const Agent& a) { return a.done; })) {
      for (Agent& member : members_)
        send_byte_now(member.socket.fd(), kFinished);
      members_.clear();
      set_outcome(absl::OkStatus());
      return;  // serves on (late joiners wait) until its own agent ends
    }
    if (!lost.empty()) {
      end_round(kReform, lost, lost_node);
    } else if (!pending_.empty() && static_cast<int>(members_.size()) < options_.max_nodes) {
      end_round(kJoin, fmt::format("a machine ({}) asks to join", pending_.front().address), -1);
    }
  }

  // Tells every member how the round ends; those still connected are awaited in the next one.
  void end_round(uint8_t verdict, const std::string& why, int lost_node) {
    std::fprintf(stderr, "nanoforge launch: rendezvous host: round %d ends: %s\n", round_, why.c_str());
    std::string message(1, static_cast<char>(verdict));
    const std::string reason = why.substr(0, std::min<size_t>(why.size(), 255));
    message += static_cast<char>(reason.size());
    message += reason;
    for (size_t node = 0; node < members_.size(); ++node) {
      Agent& member = members_[node];
      if (static_cast<int>(node) == lost_node) continue;
      (void)::send(member.socket.fd(), message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      awaited_.emplace(static_cast<int>(node), std::move(member));
    }
    members_.clear();
    collecting_ = reforming_ = true;
    collecting_since_ = last_join_ = Clock::now();
  }

  // The last round's survivors, on their old connections until they join again: one that closes it or
  // falls silent is not waited for.
  void watch_awaited() {
    for (auto it = awaited_.begin(); it != awaited_.end();) {
      Agent& survivor = it->second;
      std::vector<uint8_t> bytes;
      const bool open = read_bytes(survivor.socket.fd(), &bytes);
      if (!bytes.empty()) survivor.heard = Clock::now();
      if (open && seconds_since(survivor.heard) <= options_.silence_seconds) {
        ++it;
        continue;
      }
      std::fprintf(stderr, "nanoforge launch: rendezvous host: node %d (%s) %s before joining again\n",
                   it->first, survivor.address.c_str(), open ? "fell silent" : "left");
      it = awaited_.erase(it);
    }
  }

  // Whether a survivor of the last round is still on its way: it beats (a stopping machine's agent keeps
  // its heartbeat). One silent for three beats is frozen, or stopped: the round does not wait for it.
  bool awaiting_a_live_survivor() const {
    return std::any_of(awaited_.begin(), awaited_.end(), [this](const auto& entry) {
      return seconds_since(entry.second.heard) <= 3 * options_.silence_seconds / 10;
    });
  }

  // Accepts one connection and takes it through its hello; true when an agent was admitted.
  bool admit() {
    Socket socket(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!socket.valid()) return false;
    tcp_set_no_delay(socket.fd());
    const std::string peer = tcp_peer_address(socket.fd());
    absl::StatusOr<RendezvousNonce> challenge = random_rendezvous_nonce();
    if (!challenge.ok()) return false;
    const auto deadline = tcp_deadline_after(options_.hello_timeout_seconds);
    absl::Status sent =
        rendezvous_io::send_all(socket.fd(), encode_challenge({*challenge}), deadline, "challenge");
    absl::StatusOr<std::vector<uint8_t>> body =
        sent.ok()
            ? rendezvous_io::receive_message(socket.fd(), RendezvousMessage::kHello, deadline, "a hello")
            : absl::StatusOr<std::vector<uint8_t>>(sent);
    absl::StatusOr<RendezvousHello> hello = body.ok() ? parse_hello_body(*body) : body.status();
    absl::Status valid = hello.ok() ? authenticate_hello(*hello, options_.key, *challenge) : hello.status();
    if (!valid.ok()) {
      report_refusal(address_without_port(peer), valid.message());
      return false;
    }
    Agent agent;
    agent.socket = std::move(socket);
    agent.challenge = *challenge;
    agent.hello_nonce = hello->nonce;
    agent.nproc_per_node = static_cast<int>(hello->world_size);
    agent.previous_node_rank = hello->rank == kNoPreviousRank ? -1 : static_cast<int>(hello->rank);
    agent.address = address_without_port(peer);
    awaited_.erase(agent.previous_node_rank);  // a survivor is back: its old connection is done
    pending_.push_back(std::move(agent));
    return true;
  }

  // A refused agent retries every 200 ms until its join timeout: the first refusal from an address is
  // reported, then one line per kRefusalReportSeconds with the number refused meanwhile.
  void report_refusal(const std::string& address, absl::string_view why) {
    Refusals& refusals = refusals_[address];
    ++refusals.count;
    if (refusals.reported != Clock::time_point{} && seconds_since(refusals.reported) < kRefusalReportSeconds)
      return;
    std::fprintf(stderr, "nanoforge launch: rendezvous host: refused %d connection(s) from %s: %s\n",
                 refusals.count, address.c_str(), std::string(why).c_str());
    refusals = {.count = 0, .reported = Clock::now()};
  }

  void reply(Agent& agent, bool accepted, const std::string& text) {
    RendezvousReply answer{.accepted = accepted, .data = {text.begin(), text.end()}};
    (void)rendezvous_io::send_all(agent.socket.fd(),
                                  encode_reply(options_.key, agent.challenge, agent.hello_nonce, answer),
                                  tcp_deadline_after(1), "the membership");
  }

  void refuse_pending(const std::string& why) {
    for (Agent& agent : pending_)
      reply(agent, false, why);
    pending_.clear();
  }

  void set_outcome(absl::Status status) {
    std::lock_guard<std::mutex> lock(outcome_mutex_);
    outcome_ = std::move(status);
  }

  // The survivors first, in their previous order, then the agents new to the job, in the order they came,
  // MAX at most: the others wait for the next round.
  void form_round() {
    std::stable_sort(pending_.begin(), pending_.end(), [](const Agent& a, const Agent& b) {
      const int x = a.previous_node_rank < 0 ? INT32_MAX : a.previous_node_rank;
      const int y = b.previous_node_rank < 0 ? INT32_MAX : b.previous_node_rank;
      return x < y;
    });
    const size_t nnodes = std::min(pending_.size(), static_cast<size_t>(options_.max_nodes));
    for (size_t node = 0; node < nnodes; ++node) {
      const Agent& agent = pending_[node];
      if (agent.nproc_per_node != pending_.front().nproc_per_node) {
        const std::string why = fmt::format(
            "the agents disagree on --nproc-per-node ({} at {}, {} at {}): give every machine the same",
            pending_.front().nproc_per_node, pending_.front().address, agent.nproc_per_node, agent.address);
        refuse_pending(why);
        set_outcome(absl::InvalidArgumentError(why));
        return;
      }
    }
    ++round_;
    AgentMembership membership{.round = round_,
                               .nnodes = static_cast<int>(nnodes),
                               .nproc_per_node = pending_.front().nproc_per_node,
                               .master_addr = pending_.front().address,
                               .master_port = options_.port + 1,
                               .previous_node_ranks = {}};
    for (size_t node = 0; node < nnodes; ++node)
      membership.previous_node_ranks.push_back(pending_[node].previous_node_rank);
    for (size_t node = 0; node < nnodes; ++node) {
      membership.node_rank = static_cast<int>(node);
      reply(pending_[node], true, encode_membership(membership));
      pending_[node].heard = Clock::now();
      members_.push_back(std::move(pending_[node]));
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(nnodes));
    awaited_.clear();  // not back within the join timeout: they come as newcomers
    collecting_ = reforming_ = false;
  }

  const AgentRendezvousOptions options_;
  Socket listener_;
  std::vector<Agent> pending_, members_;
  std::map<int, Agent> awaited_;  // by their node rank in the round that ended
  struct Refusals {
    int count = 0;  // since the last report
    Clock::time_point reported{};
  };
  std::map<std::string, Refusals> refusals_;  // by address
  int round_ = 0;
  bool collecting_ = true;
  bool reforming_ = false;  // collecting after a round, whose survivors are awaited_
  Clock::time_point collecting_since_{}, last_join_{};
  mutable std::mutex outcome_mutex_;
  std::optional<absl::Status> outcome_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts once everything it reads is built
};

}  // namespace

absl::StatusOr<std::unique_ptr<AgentRendezvousHost>> AgentRendezvousHost::start_if_here(
    const AgentRendezvousOptions& options) {
  if (!is_local_address(options.host)) return nullptr;
  absl::StatusOr<Socket> listener =
      rendezvous_io::listen_on(options.port, "the launch agents' rendezvous", "--rdzv-endpoint port");
  if (!listener.ok()) return nullptr;  // another agent of this machine hosts it
  return std::unique_ptr<AgentRendezvousHost>(new Host(options, std::move(*listener)));
}

AgentLink::AgentLink(Socket socket, AgentMembership membership, const AgentRendezvousOptions& options)
    : socket_(std::move(socket)),
      membership_(std::move(membership)),
      silence_seconds_(options.silence_seconds),
      heard_(Clock::now()),
      sent_(Clock::now()) {}

absl::StatusOr<AgentLink> AgentLink::join(const AgentRendezvousOptions& options, int nproc_per_node,
                                          int previous_node_rank) {
  const auto deadline = tcp_deadline_after(options.join_timeout_seconds);
  const std::string where = fmt::format("the rendezvous host at {}:{}", options.host, options.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  if (const int resolved =
          ::getaddrinfo(options.host.c_str(), std::to_string(options.port).c_str(), &hints, &addresses);
      resolved != 0) {
    return absl::InvalidArgumentError(
        fmt::format("--rdzv-endpoint {} does not resolve: {}", options.host, ::gai_strerror(resolved)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(addresses, &::freeaddrinfo);
  std::string last_error = "none";
  const auto no_membership = [&] {
    return absl::DeadlineExceededError(
        fmt::format("no membership from {} within --join-timeout {} s (last error: {})", where,
                    options.join_timeout_seconds, last_error));
  };
  while (true) {
    absl::StatusOr<std::pair<Socket, RendezvousNonce>> connected =
        rendezvous_io::connect_and_get_challenge(addresses, options.hello_timeout_seconds, deadline,
                                                 &last_error, "the host's challenge", "--rdzv-endpoint");
    if (!connected.ok()) {
      if (!absl::IsAborted(connected.status())) return connected.status();
      if (Clock::now() + kConnectRetry >= deadline) return no_membership();
      std::this_thread::sleep_for(kConnectRetry);
      continue;
    }
    auto& [socket, challenge] = *connected;
    NANOFORGE_ASSIGN_OR_RETURN(const RendezvousNonce nonce, random_rendezvous_nonce());
    const uint32_t previous =
        previous_node_rank < 0 ? kNoPreviousRank : static_cast<uint32_t>(previous_node_rank);
    NANOFORGE_RETURN_IF_ERROR(rendezvous_io::send_all(
        socket.fd(),
        encode_hello(options.key, challenge, static_cast<uint32_t>(nproc_per_node), previous, nonce),
        deadline, "the hello"));
    // The host answers when the round forms: up to the join timeout, plus the last call.
    absl::StatusOr<std::vector<uint8_t>> body = rendezvous_io::receive_message(
        socket.fd(), RendezvousMessage::kReply, deadline + std::chrono::seconds(5), "the host's membership");
    if (!body.ok()) {
      if (!absl::IsAborted(body.status())) {
        return absl::Status(body.status().code(),
                            fmt::format("{}: {}", where, std::string(body.status().message())));
      }
      // The host closed the connection on the hello: it refused the key, or it went away before the
      // round (a new one may come).
      last_error =
          "the host closed the connection after this agent's hello: its key is not the host's (give every "
          "machine the same NANOFORGE_RENDEZVOUS_SECRET), or the host stopped";
      if (Clock::now() + kConnectRetry >= deadline) return no_membership();
      std::this_thread::sleep_for(kConnectRetry);
      continue;
    }
    NANOFORGE_ASSIGN_OR_RETURN(const RendezvousReply reply,
                               parse_reply_body(*body, options.key, challenge, nonce));
    const std::string text(reply.data.begin(), reply.data.end());
    if (!reply.accepted) return absl::FailedPreconditionError(fmt::format("{} refused: {}", where, text));
    NANOFORGE_ASSIGN_OR_RETURN(AgentMembership membership, parse_membership(text));
    return AgentLink(std::move(socket), std::move(membership), options);
  }
}

void AgentLink::send_byte(uint8_t byte) {
  send_byte_now(socket_.fd(), byte);
  sent_ = Clock::now();
}

void AgentLink::report_failed() {
  send_byte(kFailed);
}

void AgentLink::report_done() {
  send_byte(kDone);
}

AgentVerdict AgentLink::poll(double wait_seconds) {
  if (seconds_since(sent_) >= silence_seconds_ / 10) send_byte(kHeartbeat);
  pollfd fd{socket_.fd(), POLLIN, 0};
  ::poll(&fd, 1, static_cast<int>(wait_seconds * 1000));
  const size_t before = inbox_.size();
  const bool open = read_bytes(socket_.fd(), &inbox_);
  if (inbox_.size() > before) heard_ = Clock::now();
  for (size_t at = 0; at < inbox_.size(); ++at) {
    const uint8_t byte = inbox_[at];
    if (byte == kFinished) return AgentVerdict::kFinished;
    if (byte != kReform && byte != kJoin) continue;
    // The reason follows in the same send; wait for all of it (a connection that closed has none).
    if (at + 1 < inbox_.size() && at + 2 + inbox_[at + 1] <= inbox_.size()) {
      verdict_reason_.assign(inbox_.begin() + static_cast<std::ptrdiff_t>(at) + 2,
                             inbox_.begin() + static_cast<std::ptrdiff_t>(at) + 2 + inbox_[at + 1]);
    } else if (open) {
      inbox_.erase(inbox_.begin(), inbox_.begin() + static_cast<std::ptrdiff_t>(at));
      return AgentVerdict::kNone;
    }
    inbox_.clear();
    return byte == kReform ? AgentVerdict::kReform : AgentVerdict::kJoin;
  }
  inbox_.clear();
  if (!open || seconds_since(heard_) > silence_seconds_) return AgentVerdict::kHostLost;
  return AgentVerdict::kNone;
}

}  // namespace nanoforge
