// The TCP rendezvous's messages and their authentication, apart from the sockets so that every byte a peer
// sends is parsed by pure functions (fuzzed by tests/fuzz/fuzz_tcp_rendezvous.cpp). Each rank holds a per-job
// key; rank 0 challenges every connection with a fresh nonce, a peer answers with an HMAC-SHA256 over that
// nonce, its own nonce and what it claims (rank, world size), and rank 0's reply carries an HMAC over both
// nonces and its content: neither side accepts a message from a process without the key, nor a replayed one.
// The heartbeat channel's handshake (tcp_heartbeats.h) uses the same framing, key and MACs.
#pragma once

#include <absl/status/statusor.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dist/launch_env.h"

namespace nanoforge {

// Every message: a 16-byte header of big-endian words {magic, version, type, body length}, then the body.
// Version 1 (no authentication) sent {magic, 1, world size, rank} as its hello: rank 0 recognises it.
constexpr uint32_t kRendezvousMagic = 0x4E46525A;  // "NFRZ"
constexpr uint32_t kRendezvousVersion = 2;
constexpr size_t kRendezvousHeaderBytes = 16;
constexpr size_t kRendezvousNonceBytes = 16;
constexpr size_t kRendezvousMacBytes = 32;  // HMAC-SHA256
// The most a reply may carry: the NCCL unique id is 128 bytes, a refusal's reason a few hundred.
constexpr size_t kRendezvousMaxDataBytes = 4096;

using RendezvousNonce = std::array<uint8_t, kRendezvousNonceBytes>;
using RendezvousMac = std::array<uint8_t, kRendezvousMacBytes>;

// The job's key and where it came from (named in errors; the secret itself never is).
struct RendezvousKey {
  std::array<uint8_t, 32> bytes{};
  std::string source;  // "NANOFORGE_RENDEZVOUS_SECRET", "SLURM_JOB_ID=4711", ...
};

// The secret at least this long, in bytes: 128 bits if each character carried only one.
constexpr size_t kMinRendezvousSecretBytes = 16;

// The key from the environment: NANOFORGE_RENDEZVOUS_SECRET when set (at least 16 bytes), else derived from
// the job's id (SLURM_JOB_ID, then TORCHELASTIC_RUN_ID unless "none"). Neither: an error that says what to
// export. docs/distributed.md says what each source protects against.
absl::StatusOr<RendezvousKey> rendezvous_key_from_env(const EnvLookup& lookup);
// The key for a given secret (what rendezvous_key_from_env derives from the variable it picked).
RendezvousKey rendezvous_key_from_secret(std::string_view secret, std::string source);

// The launch agents' key (dist/agent_rendezvous.h): derived from the job's key under a label of its own, so
// that the agents' rendezvous and the ranks' (which share the job's secret) never admit each other's hellos.
RendezvousKey agents_rendezvous_key(const RendezvousKey& job_key);

enum class RendezvousMessage : uint32_t { kChallenge = 1, kHello = 2, kReply = 3 };
const char* rendezvous_message_name(RendezvousMessage type);  // "challenge", "hello", "reply"

// A header checked against the message expected next: magic, version, type and a body length within that
// message's bounds, so that no body is read (or allocated) before its length is known to be sane.
absl::StatusOr<size_t> parse_rendezvous_header(std::span<const uint8_t> header, RendezvousMessage expected);

// Rank 0 -> peer, on connection: a fresh nonce.
struct RendezvousChallenge {
  RendezvousNonce nonce{};
};
std::vector<uint8_t> encode_challenge(const RendezvousChallenge& challenge);
absl::StatusOr<RendezvousChallenge> parse_challenge_body(std::span<const uint8_t> body);

// Peer -> rank 0: who it is, authenticated against rank 0's challenge.
struct RendezvousHello {
  uint32_t world_size = 0;
  uint32_t rank = 0;
  RendezvousNonce nonce{};  // the peer's, which rank 0's reply must cover
  RendezvousMac mac{};
};
std::vector<uint8_t> encode_hello(const RendezvousKey& key, const RendezvousNonce& challenge,
                                  uint32_t world_size, uint32_t rank, const RendezvousNonce& nonce);
absl::StatusOr<RendezvousHello> parse_hello_body(std::span<const uint8_t> body);
// PERMISSION_DENIED unless the hello's MAC proves that its sender holds `key` and answered `challenge`.
absl::Status authenticate_hello(const RendezvousHello& hello, const RendezvousKey& key,
                                const RendezvousNonce& challenge);

// Rank 0 -> peer: the payload (accepted) or why rank 0 refused, authenticated over both nonces.
struct RendezvousReply {
  bool accepted = false;
  std::vector<uint8_t> data;
};
std::vector<uint8_t> encode_reply(const RendezvousKey& key, const RendezvousNonce& challenge,
                                  const RendezvousNonce& hello_nonce, const RendezvousReply& reply);
absl::StatusOr<RendezvousReply> parse_reply_body(std::span<const uint8_t> body, const RendezvousKey& key,
                                                 const RendezvousNonce& challenge,
                                                 const RendezvousNonce& hello_nonce);

// A fresh random nonce (OpenSSL's RAND_bytes).
absl::StatusOr<RendezvousNonce> random_rendezvous_nonce();

// The heartbeat port's handshake (tcp_heartbeats.h), in the rendezvous's framing (magic, version) with types
// of its own. A rank sends its hello as soon as it connects — rank 0 reads it with the connection, so a rank
// never waits in the queue of unauthenticated connections that a flood fills — with an HMAC over what it
// claims (world size, rank), the number of this connection attempt, a nonce, and the session: rank 0's random
// id of this run, sent in the rendezvous's authenticated payload, so that a process that holds the key but
// was not part of this run's rendezvous cannot be admitted. Without a challenge, freshness comes from the
// attempt: rank 0 admits a rank only with a higher attempt than any it admitted before, so a recorded hello
// replayed later is refused. Rank 0's welcome carries an HMAC over the hello's fields: the rank knows it
// reached this run's rank 0. Labels differ from the rendezvous's, so no message of one stands in for the
// other's.
enum class HeartbeatMessage : uint32_t { kHello = 0x101, kWelcome = 0x102 };
using HeartbeatSession = std::array<uint8_t, 16>;

struct HeartbeatHello {
  uint32_t world_size = 0;
  uint32_t rank = 0;
  uint32_t attempt = 0;  // 1 for a rank's first connection, one more for each after
  RendezvousNonce nonce{};
  RendezvousMac mac{};
};

// As parse_rendezvous_header, for the heartbeat port's messages (each of one fixed size).
absl::StatusOr<size_t> parse_heartbeat_header(std::span<const uint8_t> header, HeartbeatMessage expected);
// Rank -> rank 0, on connecting.
std::vector<uint8_t> encode_heartbeat_hello(const RendezvousKey& key, const HeartbeatSession& session,
                                            uint32_t world_size, uint32_t rank, uint32_t attempt,
                                            const RendezvousNonce& nonce);
absl::StatusOr<HeartbeatHello> parse_heartbeat_hello_body(std::span<const uint8_t> body);
// PERMISSION_DENIED unless the hello proves that its sender holds `key` and knows `session`.
absl::Status authenticate_heartbeat_hello(const HeartbeatHello& hello, const RendezvousKey& key,
                                          const HeartbeatSession& session);
// Rank 0 -> rank, once its hello authenticated: proves rank 0 holds the key too, for this hello.
std::vector<uint8_t> encode_heartbeat_welcome(const RendezvousKey& key, const HeartbeatSession& session,
                                              const HeartbeatHello& hello);
// The rank's check of the welcome's body against the hello it sent.
absl::Status check_heartbeat_welcome(std::span<const uint8_t> body, const RendezvousKey& key,
                                     const HeartbeatSession& session, const HeartbeatHello& hello);

}  // namespace nanoforge
