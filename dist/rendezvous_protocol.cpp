// rendezvous_protocol: byte layouts (big-endian words), key derivation and MACs with OpenSSL's libcrypto
// (HMAC-SHA256, RAND_bytes, CRYPTO_memcmp). A MAC covers a label naming the message, the protocol version,
// the nonces and every field of the message, so no message can stand in for another or for an older one.
#include "dist/rendezvous_protocol.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include "support/check.h"

namespace nanoforge {
namespace {

constexpr std::string_view kKeyLabel = "nanoforge tcp rendezvous key v2";
constexpr std::string_view kAgentsKeyLabel = "nanoforge launch agents key";
constexpr std::string_view kHelloLabel = "nanoforge rendezvous hello";
constexpr std::string_view kReplyLabel = "nanoforge rendezvous reply";
constexpr std::string_view kHeartbeatHelloLabel = "nanoforge heartbeat hello";
constexpr std::string_view kHeartbeatWelcomeLabel = "nanoforge heartbeat welcome";
constexpr uint32_t kAccepted = 0;
constexpr uint32_t kRefused = 1;
constexpr size_t kChallengeBodyBytes = kRendezvousNonceBytes;
constexpr size_t kHelloBodyBytes = 4 + 4 + kRendezvousNonceBytes + kRendezvousMacBytes;
constexpr size_t kReplyMinBodyBytes = 4 + kRendezvousMacBytes;
constexpr size_t kHeartbeatHelloBodyBytes = 4 + 4 + 4 + kRendezvousNonceBytes + kRendezvousMacBytes;

class Writer {
 public:
  void word(uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes_.push_back(static_cast<uint8_t>(value >> shift));
  }
  void append(std::span<const uint8_t> data) { bytes_.insert(bytes_.end(), data.begin(), data.end()); }
  void append(std::string_view text) { bytes_.insert(bytes_.end(), text.begin(), text.end()); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

uint32_t read_word(std::span<const uint8_t> bytes, size_t offset) {
  return static_cast<uint32_t>(bytes[offset]) << 24 | static_cast<uint32_t>(bytes[offset + 1]) << 16 |
         static_cast<uint32_t>(bytes[offset + 2]) << 8 | static_cast<uint32_t>(bytes[offset + 3]);
}

template <size_t N>
std::array<uint8_t, N> read_array(std::span<const uint8_t> bytes, size_t offset) {
  std::array<uint8_t, N> out;
  std::memcpy(out.data(), bytes.data() + offset, N);
  return out;
}

RendezvousMac hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> data) {
  RendezvousMac mac{};
  unsigned int length = 0;
  const unsigned char* done = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(),
                                   data.size(), mac.data(), &length);
  NANOFORGE_CHECK(done != nullptr && length == mac.size(), "OpenSSL's HMAC-SHA256 failed");
  return mac;
}

template <class Message>
std::vector<uint8_t> frame(Message type, const std::vector<uint8_t>& body) {
  Writer out;
  out.word(kRendezvousMagic);
  out.word(kRendezvousVersion);
  out.word(static_cast<uint32_t>(type));
  out.word(static_cast<uint32_t>(body.size()));
  out.append(body);
  return std::move(out.bytes());
}

RendezvousMac hello_mac(const RendezvousKey& key, const RendezvousNonce& challenge, uint32_t world_size,
                        uint32_t rank, const RendezvousNonce& nonce) {
  Writer signed_part;
  signed_part.append(kHelloLabel);
  signed_part.word(kRendezvousVersion);
  signed_part.append(challenge);
  signed_part.append(nonce);
  signed_part.word(world_size);
  signed_part.word(rank);
  return hmac_sha256(key.bytes, signed_part.bytes());
}

RendezvousMac reply_mac(const RendezvousKey& key, const RendezvousNonce& challenge,
                        const RendezvousNonce& hello_nonce, uint32_t status, std::span<const uint8_t> data) {
  Writer signed_part;
  signed_part.append(kReplyLabel);
  signed_part.word(kRendezvousVersion);
  signed_part.append(challenge);
  signed_part.append(hello_nonce);
  signed_part.word(status);
  signed_part.word(static_cast<uint32_t>(data.size()));
  signed_part.append(data);
  return hmac_sha256(key.bytes, signed_part.bytes());
}

// The heartbeat hello's MAC (label `kHeartbeatHelloLabel`) and the welcome's (`kHeartbeatWelcomeLabel`) cover
// the same fields: the session and every field of the hello.
RendezvousMac heartbeat_mac(std::string_view label, const RendezvousKey& key, const HeartbeatSession& session,
                            uint32_t world_size, uint32_t rank, uint32_t attempt,
                            const RendezvousNonce& nonce) {
  Writer signed_part;
  signed_part.append(label);
  signed_part.word(kRendezvousVersion);
  signed_part.append(session);
  signed_part.word(world_size);
  signed_part.word(rank);
  signed_part.word(attempt);
  signed_part.append(nonce);
  return hmac_sha256(key.bytes, signed_part.bytes());
}

const char* heartbeat_message_name(HeartbeatMessage type) {
  switch (type) {
    case HeartbeatMessage::kHello:
      return "heartbeat hello";
    case HeartbeatMessage::kWelcome:
      return "heartbeat welcome";
  }
  return "?";
}

bool same_mac(const RendezvousMac& a, const RendezvousMac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;  // constant time: no byte-by-byte oracle
}

// A header checked against the message expected next (parse_rendezvous_header, parse_heartbeat_header).
absl::StatusOr<size_t> check_header(std::span<const uint8_t> header, std::string_view protocol,
                                    uint32_t expected_type, const char* expected_name, size_t min_length,
                                    size_t max_length) {
  if (header.size() != kRendezvousHeaderBytes) {
    return absl::InvalidArgumentError(
        fmt::format("a message header is {} bytes, got {}", kRendezvousHeaderBytes, header.size()));
  }
  const uint32_t magic = read_word(header, 0);
  const uint32_t version = read_word(header, 4);
  const uint32_t type = read_word(header, 8);
  const uint32_t length = read_word(header, 12);
  if (magic != kRendezvousMagic) {
    return absl::InvalidArgumentError(
        fmt::format("it does not speak the nanoforge {} (its first bytes are {:08x}, not {:08x})", protocol,
                    magic, kRendezvousMagic));
  }
  if (version != kRendezvousVersion) {
    return absl::InvalidArgumentError(
        fmt::format("it speaks {} version {}, this nanoforge speaks {} (mixed nanoforge builds?)", protocol,
                    version, kRendezvousVersion));
  }
  if (type != expected_type) {
    return absl::InvalidArgumentError(
        fmt::format("it sent message type {} where a {} was due", type, expected_name));
  }
  if (length < min_length || length > max_length) {
    const std::string allowed = min_length == max_length ? fmt::format("{}", min_length)
                                                         : fmt::format("{} to {}", min_length, max_length);
    return absl::InvalidArgumentError(fmt::format("it announced a {}-byte {} (a {} is {} bytes)", length,
                                                  expected_name, expected_name, allowed));
  }
  return static_cast<size_t>(length);
}

}  // namespace

RendezvousKey rendezvous_key_from_secret(std::string_view secret, std::string source) {
  RendezvousKey key;
  key.bytes = hmac_sha256({reinterpret_cast<const uint8_t*>(secret.data()), secret.size()},
                          {reinterpret_cast<const uint8_t*>(kKeyLabel.data()), kKeyLabel.size()});
  key.source = std::move(source);
  return key;
}

absl::StatusOr<RendezvousKey> rendezvous_key_from_env(const EnvLookup& lookup) {
  if (const std::optional<std::string> secret = lookup("NANOFORGE_RENDEZVOUS_SECRET")) {
    if (secret->size() < kMinRendezvousSecretBytes) {
      return absl::InvalidArgumentError(fmt::format(
          "NANOFORGE_RENDEZVOUS_SECRET holds {} bytes; the rendezvous needs at least {} random ones, e.g. "
          "export NANOFORGE_RENDEZVOUS_SECRET=$(openssl rand -hex 32) once in the launch script",
          secret->size(), kMinRendezvousSecretBytes));
    }
    return rendezvous_key_from_secret(*secret, "NANOFORGE_RENDEZVOUS_SECRET");
  }
  // A job id separates this job's ranks from other jobs' (and from an earlier job's leftover ranks); it is
  // no secret from other users of the cluster, who can list the jobs.
  for (const char* name : {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    const std::optional<std::string> id = lookup(name);
    if (!id || id->empty() || *id == "none")
      continue;  // torchrun's run id is "none" unless --rdzv-id is given
    const std::string source = fmt::format("{}={}", name, *id);
    return rendezvous_key_from_secret(source, source);
  }
  return absl::FailedPreconditionError(
      "the TCP rendezvous admits only ranks that hold this job's secret, and none was found: export "
      "NANOFORGE_RENDEZVOUS_SECRET=$(openssl rand -hex 32) once in the launch script, so that every rank "
      "inherits the same value (under Slurm, SLURM_JOB_ID serves when no secret is set)");
}

RendezvousKey agents_rendezvous_key(const RendezvousKey& job_key) {
  const std::span<const uint8_t> label(reinterpret_cast<const uint8_t*>(kAgentsKeyLabel.data()),
                                       kAgentsKeyLabel.size());
  RendezvousKey key;
  key.bytes = hmac_sha256(job_key.bytes, label);
  key.source = job_key.source;
  return key;
}

const char* rendezvous_message_name(RendezvousMessage type) {
  switch (type) {
    case RendezvousMessage::kChallenge:
      return "challenge";
    case RendezvousMessage::kHello:
      return "hello";
    case RendezvousMessage::kReply:
      return "reply";
  }
  return "?";
}

absl::StatusOr<size_t> parse_rendezvous_header(std::span<const uint8_t> header, RendezvousMessage expected) {
  size_t min_length = 0;
  size_t max_length = 0;
  switch (expected) {
    case RendezvousMessage::kChallenge:
      min_length = max_length = kChallengeBodyBytes;
      break;
    case RendezvousMessage::kHello:
      min_length = max_length = kHelloBodyBytes;
      break;
    case RendezvousMessage::kReply:
      min_length = kReplyMinBodyBytes;
      max_length = kReplyMinBodyBytes + kRendezvousMaxDataBytes;
      break;
  }
  return check_header(header, "rendezvous", static_cast<uint32_t>(expected),
                      rendezvous_message_name(expected), min_length, max_length);
}

std::vector<uint8_t> encode_challenge(const RendezvousChallenge& challenge) {
  return frame(RendezvousMessage::kChallenge, {challenge.nonce.begin(), challenge.nonce.end()});
}

absl::StatusOr<RendezvousChallenge> parse_challenge_body(std::span<const uint8_t> body) {
  if (body.size() != kChallengeBodyBytes)
    return absl::InvalidArgumentError(
        fmt::format("a challenge is {} bytes, got {}", kChallengeBodyBytes, body.size()));
  return RendezvousChallenge{.nonce = read_array<kRendezvousNonceBytes>(body, 0)};
}

std::vector<uint8_t> encode_hello(const RendezvousKey& key, const RendezvousNonce& challenge,
                                  uint32_t world_size, uint32_t rank, const RendezvousNonce& nonce) {
  Writer body;
  body.word(world_size);
  body.word(rank);
  body.append(nonce);
  body.append(hello_mac(key, challenge, world_size, rank, nonce));
  return frame(RendezvousMessage::kHello, body.bytes());
}

absl::StatusOr<RendezvousHello> parse_hello_body(std::span<const uint8_t> body) {
  if (body.size() != kHelloBodyBytes)
    return absl::InvalidArgumentError(
        fmt::format("a hello is {} bytes, got {}", kHelloBodyBytes, body.size()));
  RendezvousHello hello;
  hello.world_size = read_word(body, 0);
  hello.rank = read_word(body, 4);
  hello.nonce = read_array<kRendezvousNonceBytes>(body, 8);
  hello.mac = read_array<kRendezvousMacBytes>(body, 8 + kRendezvousNonceBytes);
  return hello;
}

absl::Status authenticate_hello(const RendezvousHello& hello, const RendezvousKey& key,
                                const RendezvousNonce& challenge) {
  if (same_mac(hello.mac, hello_mac(key, challenge, hello.world_size, hello.rank, hello.nonce)))
    return absl::OkStatus();
  return absl::PermissionDeniedError(fmt::format(
      "its hello (claiming rank {}) does not authenticate: it holds another rendezvous key than rank 0's "
      "(from {}), or it replayed a hello meant for another connection",
      hello.rank, key.source));
}

std::vector<uint8_t> encode_reply(const RendezvousKey& key, const RendezvousNonce& challenge,
                                  const RendezvousNonce& hello_nonce, const RendezvousReply& reply) {
  NANOFORGE_CHECK(reply.data.size() <= kRendezvousMaxDataBytes, "a rendezvous reply of {} bytes",
                  reply.data.size());
  const uint32_t status = reply.accepted ? kAccepted : kRefused;
  Writer body;
  body.word(status);
  body.append(reply.data);
  body.append(reply_mac(key, challenge, hello_nonce, status, reply.data));
  return frame(RendezvousMessage::kReply, body.bytes());
}

absl::StatusOr<RendezvousReply> parse_reply_body(std::span<const uint8_t> body, const RendezvousKey& key,
                                                 const RendezvousNonce& challenge,
                                                 const RendezvousNonce& hello_nonce) {
  if (body.size() < kReplyMinBodyBytes || body.size() > kReplyMinBodyBytes + kRendezvousMaxDataBytes) {
    return absl::InvalidArgumentError(fmt::format("a reply is {} to {} bytes, got {}", kReplyMinBodyBytes,
                                                  kReplyMinBodyBytes + kRendezvousMaxDataBytes, body.size()));
  }
  const uint32_t status = read_word(body, 0);
  const std::span<const uint8_t> data = body.subspan(4, body.size() - kReplyMinBodyBytes);
  const auto mac = read_array<kRendezvousMacBytes>(body, body.size() - kRendezvousMacBytes);
  if (!same_mac(mac, reply_mac(key, challenge, hello_nonce, status, data))) {
    return absl::PermissionDeniedError(fmt::format(
        "its reply does not authenticate: rank 0 holds another rendezvous key than this rank's (from {}), "
        "or something else answers on that port",
        key.source));
  }
  if (status != kAccepted && status != kRefused)
    return absl::InvalidArgumentError(
        fmt::format("its reply has status {}, neither accepted nor refused", status));
  return RendezvousReply{.accepted = status == kAccepted, .data = {data.begin(), data.end()}};
}

absl::StatusOr<RendezvousNonce> random_rendezvous_nonce() {
  RendezvousNonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1)
    return absl::InternalError("OpenSSL's RAND_bytes could not make a rendezvous nonce");
  return nonce;
}

absl::StatusOr<size_t> parse_heartbeat_header(std::span<const uint8_t> header, HeartbeatMessage expected) {
  const size_t length = expected == HeartbeatMessage::kHello ? kHeartbeatHelloBodyBytes : kRendezvousMacBytes;
  return check_header(header, "heartbeat handshake", static_cast<uint32_t>(expected),
                      heartbeat_message_name(expected), length, length);
}

std::vector<uint8_t> encode_heartbeat_hello(const RendezvousKey& key, const HeartbeatSession& session,
                                            uint32_t world_size, uint32_t rank, uint32_t attempt,
                                            const RendezvousNonce& nonce) {
  Writer body;
  body.word(world_size);
  body.word(rank);
  body.word(attempt);
  body.append(nonce);
  body.append(heartbeat_mac(kHeartbeatHelloLabel, key, session, world_size, rank, attempt, nonce));
  return frame(HeartbeatMessage::kHello, body.bytes());
}

absl::StatusOr<HeartbeatHello> parse_heartbeat_hello_body(std::span<const uint8_t> body) {
  if (body.size() != kHeartbeatHelloBodyBytes)
    return absl::InvalidArgumentError(
        fmt::format("a heartbeat hello is {} bytes, got {}", kHeartbeatHelloBodyBytes, body.size()));
  HeartbeatHello hello;
  hello.world_size = read_word(body, 0);
  hello.rank = read_word(body, 4);
  hello.attempt = read_word(body, 8);
  hello.nonce = read_array<kRendezvousNonceBytes>(body, 12);
  hello.mac = read_array<kRendezvousMacBytes>(body, 12 + kRendezvousNonceBytes);
  return hello;
}

absl::Status authenticate_heartbeat_hello(const HeartbeatHello& hello, const RendezvousKey& key,
                                          const HeartbeatSession& session) {
  if (same_mac(hello.mac, heartbeat_mac(kHeartbeatHelloLabel, key, session, hello.world_size, hello.rank,
                                        hello.attempt, hello.nonce)))
    return absl::OkStatus();
  return absl::PermissionDeniedError(fmt::format(
      "its heartbeat hello (claiming rank {}) does not authenticate: it holds another key than rank 0's "
      "(from {}), or was not part of this run's rendezvous",
      hello.rank, key.source));
}

std::vector<uint8_t> encode_heartbeat_welcome(const RendezvousKey& key, const HeartbeatSession& session,
                                              const HeartbeatHello& hello) {
  const RendezvousMac mac = heartbeat_mac(kHeartbeatWelcomeLabel, key, session, hello.world_size, hello.rank,
                                          hello.attempt, hello.nonce);
  return frame(HeartbeatMessage::kWelcome, {mac.begin(), mac.end()});
}

absl::Status check_heartbeat_welcome(std::span<const uint8_t> body, const RendezvousKey& key,
                                     const HeartbeatSession& session, const HeartbeatHello& hello) {
  if (body.size() != kRendezvousMacBytes)
    return absl::InvalidArgumentError(
        fmt::format("a heartbeat welcome is {} bytes, got {}", kRendezvousMacBytes, body.size()));
  const RendezvousMac expected = heartbeat_mac(kHeartbeatWelcomeLabel, key, session, hello.world_size,
                                               hello.rank, hello.attempt, hello.nonce);
  if (same_mac(read_array<kRendezvousMacBytes>(body, 0), expected)) return absl::OkStatus();
  return absl::PermissionDeniedError(fmt::format(
      "its heartbeat welcome does not authenticate: rank 0 holds another key than this rank's (from {}), or "
      "something else answers on that port",
      key.source));
}

}  // namespace nanoforge
