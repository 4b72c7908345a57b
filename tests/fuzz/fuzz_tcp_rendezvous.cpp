// Fuzz target: the TCP rendezvous's messages (dist/rendezvous_protocol.h), as a peer or a fake rank 0 would
// send them. The first byte picks what the rest is read as (challenge, hello or reply, the order a rank reads
// them in); the header is checked, a body of the announced length taken from what follows, then parsed and
// authenticated under a fixed key and fixed nonces. Whatever authenticates must encode back to the same
// bytes. Seeds (corpus/tcp_rendezvous/): one genuine message of each kind under that key and those nonces.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "dist/rendezvous_protocol.h"

using namespace nanoforge;

namespace {

const RendezvousKey& fuzz_key() {
  static const RendezvousKey key = rendezvous_key_from_secret("fuzzing key: not a secret", "the fuzz key");
  return key;
}

RendezvousNonce fixed_nonce(uint8_t value) {
  RendezvousNonce nonce;
  nonce.fill(value);
  return nonce;
}

void require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_tcp_rendezvous: broken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto expected = static_cast<RendezvousMessage>(1 + data[0] % 3);
  const std::span<const uint8_t> stream(data + 1, size - 1);
  if (stream.size() < kRendezvousHeaderBytes) return 0;
  const absl::StatusOr<size_t> length =
      parse_rendezvous_header(stream.first(kRendezvousHeaderBytes), expected);
  if (!length.ok()) return 0;
  require(*length <= kRendezvousMaxDataBytes + 4 + kRendezvousMacBytes, "a header admits a bounded body");
  if (stream.size() < kRendezvousHeaderBytes + *length) return 0;  // the peer would still be sending
  const std::span<const uint8_t> message = stream.first(kRendezvousHeaderBytes + *length);
  const std::span<const uint8_t> body = message.subspan(kRendezvousHeaderBytes);
  const RendezvousNonce challenge = fixed_nonce(0xC1);
  const RendezvousNonce hello_nonce = fixed_nonce(0x4E);
  std::vector<uint8_t> encoded;
  switch (expected) {
    case RendezvousMessage::kChallenge: {
      const absl::StatusOr<RendezvousChallenge> parsed = parse_challenge_body(body);
      require(parsed.ok(), "a challenge of the announced length parses");
      encoded = encode_challenge(*parsed);
      break;
    }
    case RendezvousMessage::kHello: {
      const absl::StatusOr<RendezvousHello> parsed = parse_hello_body(body);
      require(parsed.ok(), "a hello of the announced length parses");
      if (!authenticate_hello(*parsed, fuzz_key(), challenge).ok()) return 0;
      encoded = encode_hello(fuzz_key(), challenge, parsed->world_size, parsed->rank, parsed->nonce);
      break;
    }
    case RendezvousMessage::kReply: {
      const absl::StatusOr<RendezvousReply> parsed =
          parse_reply_body(body, fuzz_key(), challenge, hello_nonce);
      if (!parsed.ok()) return 0;
      encoded = encode_reply(fuzz_key(), challenge, hello_nonce, *parsed);
      break;
    }
  }
  require(std::equal(message.begin(), message.end(), encoded.begin(), encoded.end()),
          "an accepted message encodes back to its own bytes");
  return 0;
}
