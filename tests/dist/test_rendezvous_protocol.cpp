// The rendezvous's messages without sockets: where the key comes from (and the refusal when there is none),
// headers that announce the wrong magic, version, type or length, and MACs that reject another key, a
// replayed hello, a tampered field and a reply meant for another connection. The heartbeat port's hello and
// welcome likewise: another key, another run's session, a tampered field, a rendezvous message in their
// place.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "dist/rendezvous_protocol.h"

namespace nanoforge {
namespace {

using Environment = std::map<std::string, std::string>;

absl::StatusOr<RendezvousKey> key_from(const Environment& environment) {
  return rendezvous_key_from_env([&](std::string_view name) -> std::optional<std::string> {
    auto it = environment.find(std::string(name));
    if (it == environment.end()) return std::nullopt;
    return it->second;
  });
}

RendezvousNonce nonce_of(uint8_t seed) {
  RendezvousNonce nonce;
  for (size_t i = 0; i < nonce.size(); ++i)
    nonce[i] = static_cast<uint8_t>(seed + 7 * i);
  return nonce;
}

std::span<const uint8_t> header_of(const std::vector<uint8_t>& message) {
  return std::span<const uint8_t>(message).first(kRendezvousHeaderBytes);
}
std::span<const uint8_t> body_of(const std::vector<uint8_t>& message) {
  return std::span<const uint8_t>(message).subspan(kRendezvousHeaderBytes);
}

void set_word(std::vector<uint8_t>& bytes, size_t offset, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    bytes[offset + i] = static_cast<uint8_t>(value >> (24 - 8 * i));
}

const RendezvousKey kKey = rendezvous_key_from_secret("0123456789abcdef0123", "test secret");
const RendezvousKey kOtherKey = rendezvous_key_from_secret("another job's secret!", "other secret");

TEST(RendezvousKey, TheUsersSecretComesFirst) {
  absl::StatusOr<RendezvousKey> key =
      key_from({{"NANOFORGE_RENDEZVOUS_SECRET", "0123456789abcdef0123"}, {"SLURM_JOB_ID", "4711"}});
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->source, "NANOFORGE_RENDEZVOUS_SECRET");
  EXPECT_EQ(key->bytes, kKey.bytes);
}

TEST(RendezvousKey, AShortSecretIsRefused) {
  absl::StatusOr<RendezvousKey> key = key_from({{"NANOFORGE_RENDEZVOUS_SECRET", "hunter2"}});
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("NANOFORGE_RENDEZVOUS_SECRET holds 7 bytes"), std::string::npos)
      << key.status();
  EXPECT_NE(key.status().message().find("openssl rand -hex 32"), std::string::npos) << key.status();
}

TEST(RendezvousKey, DerivedFromTheJobIdOtherwise) {
  absl::StatusOr<RendezvousKey> slurm =
      key_from({{"SLURM_JOB_ID", "4711"}, {"TORCHELASTIC_RUN_ID", "run-9"}});
  ASSERT_TRUE(slurm.ok()) << slurm.status();
  EXPECT_EQ(slurm->source, "SLURM_JOB_ID=4711");
  absl::StatusOr<RendezvousKey> other_job = key_from({{"SLURM_JOB_ID", "4712"}});
  ASSERT_TRUE(other_job.ok()) << other_job.status();
  EXPECT_NE(slurm->bytes, other_job->bytes);
  absl::StatusOr<RendezvousKey> torchrun = key_from({{"TORCHELASTIC_RUN_ID", "run-9"}});
  ASSERT_TRUE(torchrun.ok()) << torchrun.status();
  EXPECT_EQ(torchrun->source, "TORCHELASTIC_RUN_ID=run-9");
}

TEST(RendezvousKey, NoSecretAndNoJobIdIsRefused) {
  // torchrun's run id is "none" unless --rdzv-id is given: it names no job.
  absl::StatusOr<RendezvousKey> key = key_from({{"RANK", "1"}, {"TORCHELASTIC_RUN_ID", "none"}});
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(key.status().message().find("export NANOFORGE_RENDEZVOUS_SECRET="), std::string::npos)
      << key.status();
}

TEST(RendezvousProtocol, HelloRoundTrip) {
  const RendezvousNonce challenge = nonce_of(1);
  const std::vector<uint8_t> message = encode_hello(kKey, challenge, 4, 3, nonce_of(2));
  absl::StatusOr<size_t> length = parse_rendezvous_header(header_of(message), RendezvousMessage::kHello);
  ASSERT_TRUE(length.ok()) << length.status();
  EXPECT_EQ(*length, message.size() - kRendezvousHeaderBytes);
  absl::StatusOr<RendezvousHello> hello = parse_hello_body(body_of(message));
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_EQ(hello->world_size, 4u);
  EXPECT_EQ(hello->rank, 3u);
  EXPECT_EQ(hello->nonce, nonce_of(2));
  EXPECT_TRUE(authenticate_hello(*hello, kKey, challenge).ok());
}

TEST(RendezvousProtocol, HelloFromAnotherKeyIsRefused) {
  const std::vector<uint8_t> message = encode_hello(kOtherKey, nonce_of(1), 4, 3, nonce_of(2));
  absl::StatusOr<RendezvousHello> hello = parse_hello_body(body_of(message));
  ASSERT_TRUE(hello.ok()) << hello.status();
  const absl::Status authentic = authenticate_hello(*hello, kKey, nonce_of(1));
  EXPECT_EQ(authentic.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(authentic.message().find("claiming rank 3) does not authenticate"), std::string::npos)
      << authentic;
  EXPECT_NE(authentic.message().find("from test secret"), std::string::npos) << authentic;
}

TEST(RendezvousProtocol, ReplayedHelloIsRefused) {
  // A hello answered one challenge; another connection's challenge differs.
  const std::vector<uint8_t> message = encode_hello(kKey, nonce_of(1), 4, 3, nonce_of(2));
  absl::StatusOr<RendezvousHello> hello = parse_hello_body(body_of(message));
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_FALSE(authenticate_hello(*hello, kKey, nonce_of(9)).ok());
}

TEST(RendezvousProtocol, TamperedHelloIsRefused) {
  std::vector<uint8_t> message = encode_hello(kKey, nonce_of(1), 4, 3, nonce_of(2));
  set_word(message, kRendezvousHeaderBytes + 4, 2);  // the rank
  absl::StatusOr<RendezvousHello> hello = parse_hello_body(body_of(message));
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_EQ(hello->rank, 2u);
  EXPECT_FALSE(authenticate_hello(*hello, kKey, nonce_of(1)).ok());
}

void expect_header_error(const std::vector<uint8_t>& message, RendezvousMessage expected,
                         const std::string& fragment) {
  absl::StatusOr<size_t> length = parse_rendezvous_header(header_of(message), expected);
  ASSERT_FALSE(length.ok()) << "accepted a body of " << *length << " bytes";
  EXPECT_NE(length.status().message().find(fragment), std::string::npos) << length.status();
}

TEST(RendezvousProtocol, HeadersAreCheckedBeforeAnyBody) {
  const std::vector<uint8_t> hello = encode_hello(kKey, nonce_of(1), 2, 1, nonce_of(2));
  std::vector<uint8_t> bad = hello;
  set_word(bad, 0, 0x47455420);  // "GET "
  expect_header_error(bad, RendezvousMessage::kHello, "does not speak the nanoforge rendezvous");
  bad = hello;
  set_word(bad, 4, 1);
  expect_header_error(bad, RendezvousMessage::kHello, "speaks rendezvous version 1");
  expect_header_error(hello, RendezvousMessage::kReply, "sent message type 2 where a reply was due");
  bad = hello;
  set_word(bad, 12, 0xFFFFFFFF);
  expect_header_error(bad, RendezvousMessage::kHello,
                      "announced a 4294967295-byte hello (a hello is 56 bytes)");
  const std::vector<uint8_t> reply =
      encode_reply(kKey, nonce_of(1), nonce_of(2), {.accepted = true, .data = {}});
  bad = reply;
  set_word(bad, 12, 0x7FFFFFFF);
  expect_header_error(bad, RendezvousMessage::kReply, "(a reply is 36 to 4132 bytes)");
}

TEST(RendezvousProtocol, ReplyRoundTrip) {
  const std::vector<uint8_t> payload = {1, 2, 3, 250};
  const std::vector<uint8_t> message =
      encode_reply(kKey, nonce_of(1), nonce_of(2), {.accepted = true, .data = payload});
  ASSERT_TRUE(parse_rendezvous_header(header_of(message), RendezvousMessage::kReply).ok());
  absl::StatusOr<RendezvousReply> reply = parse_reply_body(body_of(message), kKey, nonce_of(1), nonce_of(2));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->accepted);
  EXPECT_EQ(reply->data, payload);
}

TEST(RendezvousProtocol, ForgedOrMisdirectedReplyIsRefused) {
  const std::vector<uint8_t> payload(128, 7);
  std::vector<uint8_t> message =
      encode_reply(kKey, nonce_of(1), nonce_of(2), {.accepted = true, .data = payload});
  // Meant for another connection (another hello nonce), or signed with another key.
  EXPECT_FALSE(parse_reply_body(body_of(message), kKey, nonce_of(1), nonce_of(3)).ok());
  absl::StatusOr<RendezvousReply> other =
      parse_reply_body(body_of(message), kOtherKey, nonce_of(1), nonce_of(2));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("its reply does not authenticate"), std::string::npos)
      << other.status();
  // One payload byte changed on the way.
  message[kRendezvousHeaderBytes + 4 + 10] ^= 1;
  EXPECT_FALSE(parse_reply_body(body_of(message), kKey, nonce_of(1), nonce_of(2)).ok());
}

TEST(RendezvousProtocol, BodiesOfTheWrongSizeAreRefused) {
  const std::vector<uint8_t> short_body(10, 0);
  EXPECT_FALSE(parse_challenge_body(short_body).ok());
  EXPECT_FALSE(parse_hello_body(short_body).ok());
  EXPECT_FALSE(parse_reply_body(short_body, kKey, nonce_of(1), nonce_of(2)).ok());
  const std::vector<uint8_t> huge_body(kRendezvousMaxDataBytes + 100, 0);
  absl::StatusOr<RendezvousReply> reply = parse_reply_body(huge_body, kKey, nonce_of(1), nonce_of(2));
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.status().message().find("a reply is 36 to 4132 bytes"), std::string::npos)
      << reply.status();
}

HeartbeatSession session_of(uint8_t seed) {
  HeartbeatSession session;
  for (size_t i = 0; i < session.size(); ++i)
    session[i] = static_cast<uint8_t>(seed + 3 * i);
  return session;
}

HeartbeatHello parsed_heartbeat_hello(const std::vector<uint8_t>& message) {
  absl::StatusOr<size_t> length = parse_heartbeat_header(header_of(message), HeartbeatMessage::kHello);
  EXPECT_TRUE(length.ok()) << length.status();
  EXPECT_EQ(length.value_or(0), message.size() - kRendezvousHeaderBytes);
  absl::StatusOr<HeartbeatHello> hello = parse_heartbeat_hello_body(body_of(message));
  EXPECT_TRUE(hello.ok()) << hello.status();
  return hello.value_or(HeartbeatHello{});
}

TEST(HeartbeatProtocol, HelloAndWelcomeRoundTrip) {
  const HeartbeatHello hello =
      parsed_heartbeat_hello(encode_heartbeat_hello(kKey, session_of(1), 4, 3, 2, nonce_of(5)));
  EXPECT_EQ(hello.world_size, 4u);
  EXPECT_EQ(hello.rank, 3u);
  EXPECT_EQ(hello.attempt, 2u);
  EXPECT_EQ(hello.nonce, nonce_of(5));
  EXPECT_TRUE(authenticate_heartbeat_hello(hello, kKey, session_of(1)).ok());
  const std::vector<uint8_t> welcome = encode_heartbeat_welcome(kKey, session_of(1), hello);
  absl::StatusOr<size_t> length = parse_heartbeat_header(header_of(welcome), HeartbeatMessage::kWelcome);
  ASSERT_TRUE(length.ok()) << length.status();
  EXPECT_EQ(*length, welcome.size() - kRendezvousHeaderBytes);
  EXPECT_TRUE(check_heartbeat_welcome(body_of(welcome), kKey, session_of(1), hello).ok());
}

TEST(HeartbeatProtocol, HelloWithoutTheKeyIsRefused) {
  const HeartbeatHello hello =
      parsed_heartbeat_hello(encode_heartbeat_hello(kOtherKey, session_of(1), 2, 1, 1, nonce_of(5)));
  const absl::Status authentic = authenticate_heartbeat_hello(hello, kKey, session_of(1));
  EXPECT_EQ(authentic.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(authentic.message().find("its heartbeat hello (claiming rank 1) does not authenticate"),
            std::string::npos)
      << authentic;
  EXPECT_NE(authentic.message().find("from test secret"), std::string::npos) << authentic;
  // No proof at all: the MAC's bytes zeroed.
  HeartbeatHello unsigned_hello = hello;
  unsigned_hello.mac.fill(0);
  EXPECT_FALSE(authenticate_heartbeat_hello(unsigned_hello, kKey, session_of(1)).ok());
}

TEST(HeartbeatProtocol, HelloOfAnotherRunIsRefused) {
  // The key is the job's, but the session is another run's rendezvous (a leftover rank of an earlier run).
  const HeartbeatHello hello =
      parsed_heartbeat_hello(encode_heartbeat_hello(kKey, session_of(1), 2, 1, 1, nonce_of(5)));
  EXPECT_FALSE(authenticate_heartbeat_hello(hello, kKey, session_of(2)).ok());
}

TEST(HeartbeatProtocol, TamperedHelloIsRefused) {
  // The rank, then the attempt (what keeps a replay out) changed on the way.
  for (const size_t offset : {size_t{4}, size_t{8}}) {
    std::vector<uint8_t> message = encode_heartbeat_hello(kKey, session_of(1), 4, 3, 1, nonce_of(5));
    set_word(message, kRendezvousHeaderBytes + offset, 2);
    const HeartbeatHello hello = parsed_heartbeat_hello(message);
    EXPECT_FALSE(authenticate_heartbeat_hello(hello, kKey, session_of(1)).ok()) << "field at " << offset;
  }
}

TEST(HeartbeatProtocol, ForgedOrMisdirectedWelcomeIsRefused) {
  const HeartbeatHello hello =
      parsed_heartbeat_hello(encode_heartbeat_hello(kKey, session_of(1), 2, 1, 1, nonce_of(5)));
  const std::vector<uint8_t> welcome = encode_heartbeat_welcome(kKey, session_of(1), hello);
  // Another key, another run, a welcome meant for another hello (another attempt).
  const absl::Status other_key = check_heartbeat_welcome(body_of(welcome), kOtherKey, session_of(1), hello);
  EXPECT_EQ(other_key.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(other_key.message().find("its heartbeat welcome does not authenticate"), std::string::npos)
      << other_key;
  EXPECT_FALSE(check_heartbeat_welcome(body_of(welcome), kKey, session_of(2), hello).ok());
  HeartbeatHello another = hello;
  another.attempt = 2;
  EXPECT_FALSE(check_heartbeat_welcome(body_of(welcome), kKey, session_of(1), another).ok());
  // The hello's own MAC sent back as the welcome: the labels differ.
  EXPECT_FALSE(check_heartbeat_welcome(hello.mac, kKey, session_of(1), hello).ok());
}

TEST(HeartbeatProtocol, HeadersAreCheckedBeforeAnyBody) {
  const std::vector<uint8_t> hello = encode_heartbeat_hello(kKey, session_of(1), 2, 1, 1, nonce_of(5));
  std::vector<uint8_t> bad = hello;
  set_word(bad, 0, 0x47455420);  // "GET "
  absl::StatusOr<size_t> length = parse_heartbeat_header(header_of(bad), HeartbeatMessage::kHello);
  ASSERT_FALSE(length.ok());
  EXPECT_NE(length.status().message().find("does not speak the nanoforge heartbeat handshake"),
            std::string::npos)
      << length.status();
  bad = hello;
  set_word(bad, 12, 0xFFFFFFFF);
  length = parse_heartbeat_header(header_of(bad), HeartbeatMessage::kHello);
  ASSERT_FALSE(length.ok());
  EXPECT_NE(length.status().message().find(
                "announced a 4294967295-byte heartbeat hello (a heartbeat hello is 60 bytes)"),
            std::string::npos)
      << length.status();
  // A rendezvous hello on the heartbeat port, and a heartbeat hello on the rendezvous port.
  const std::vector<uint8_t> rendezvous_hello = encode_hello(kKey, nonce_of(1), 2, 1, nonce_of(5));
  length = parse_heartbeat_header(header_of(rendezvous_hello), HeartbeatMessage::kHello);
  ASSERT_FALSE(length.ok());
  EXPECT_NE(length.status().message().find("sent message type 2 where a heartbeat hello was due"),
            std::string::npos)
      << length.status();
  EXPECT_FALSE(parse_rendezvous_header(header_of(hello), RendezvousMessage::kHello).ok());
  EXPECT_FALSE(parse_heartbeat_hello_body(body_of(rendezvous_hello)).ok());
}

}  // namespace
}  // namespace nanoforge
