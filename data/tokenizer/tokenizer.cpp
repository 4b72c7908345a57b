// Tokenizer construction (validating the ranks), ordinary encoding (split by regex; a piece that is a token
// maps directly, else it is merged by rank) and decoding.
#include "data/tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <array>
#include <atomic>

#include "data/tokenizer/tokenizer_state.h"
#include "support/check.h"
#include "support/status.h"

namespace nanoforge {
namespace {

std::string printable(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '\\') {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  return out;
}

// The piece cache of this thread for the tokenizer `uid`: a few per thread, replaced round-robin.
PieceCache& thread_piece_cache(uint64_t uid) {
  constexpr size_t kCachesPerThread = 4;
  thread_local std::array<std::pair<uint64_t, std::unique_ptr<PieceCache>>, kCachesPerThread> caches;
  thread_local size_t next_victim = 0;
  for (auto& [cached_uid, cache] : caches) {
    if (cached_uid == uid) return *cache;
  }
  auto& [victim_uid, victim] = caches[next_victim];
  next_victim = (next_victim + 1) % kCachesPerThread;
  victim_uid = uid;
  victim = std::make_unique<PieceCache>();
  return *victim;
}

uint64_t fnv1a64(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ull) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace

const std::vector<std::string>& Tokenizer::special_token_names() {
  static const std::vector<std::string> names = {
      "<|bos|>",          "<|user_start|>", "<|user_end|>",     "<|assistant_start|>", "<|assistant_end|>",
      "<|python_start|>", "<|python_end|>", "<|output_start|>", "<|output_end|>"};
  return names;
}

absl::StatusOr<Tokenizer> Tokenizer::from_ranks(std::vector<std::string> tokens_by_rank,
                                                std::vector<std::string> specials) {
  if (tokens_by_rank.size() > (1u << 30)) {
    return absl::InvalidArgumentError(fmt::format("{} ranks is too many", tokens_by_rank.size()));
  }
  absl::flat_hash_map<std::string_view, int32_t> seen;
  seen.reserve(tokens_by_rank.size());
  for (size_t rank = 0; rank < tokens_by_rank.size(); ++rank) {
    const std::string& token = tokens_by_rank[rank];
    if (token.empty()) return absl::InvalidArgumentError(fmt::format("rank {} is an empty token", rank));
    if (static_cast<int64_t>(token.size()) > kMaxTokenBytes) {
      return absl::InvalidArgumentError(fmt::format("rank {} is a token of {} bytes; tokens hold at most {}",
                                                    rank, token.size(), kMaxTokenBytes));
    }
    const auto [it, inserted] = seen.emplace(token, static_cast<int32_t>(rank));
    if (!inserted) {
      return absl::InvalidArgumentError(
          fmt::format("ranks {} and {} are the same bytes '{}'", it->second, rank, printable(token)));
    }
  }
  for (int byte = 0; byte < 256; ++byte) {
    if (!seen.contains(std::string_view(std::string(1, static_cast<char>(byte))))) {
      return absl::InvalidArgumentError(fmt::format(
          "byte 0x{:02x} has no rank: a byte-level BPE needs all 256 single bytes as tokens", byte));
    }
  }
  absl::flat_hash_map<std::string_view, int> special_seen;
  for (const std::string& name : specials) {
    if (name.empty() || name.find_first_of(" \t\r\n") != std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("special token '{}': names must be non-empty and without whitespace "
                      "(special_tokens.txt is 'NAME ID')",
                      name));
    }
    if (!special_seen.emplace(name, 0).second)
      return absl::InvalidArgumentError(fmt::format("special token {} is given twice", name));
  }
  if (!special_seen.contains("<|bos|>")) {
    return absl::InvalidArgumentError(
        "the special tokens do not include <|bos|>, which every document starts with");
  }

  const int32_t num_ranks = static_cast<int32_t>(tokens_by_rank.size());
  std::string arena;
  std::vector<uint32_t> offsets;
  offsets.reserve(tokens_by_rank.size() + specials.size() + 1);
  size_t arena_bytes = 0;
  for (const std::string& token : tokens_by_rank)
    arena_bytes += token.size();
  for (const std::string& name : specials)
    arena_bytes += name.size();
  if (arena_bytes >= (1ull << 32))
    return absl::InvalidArgumentError("the tokens hold more than 4 GiB of bytes");
  arena.reserve(arena_bytes);
  for (const std::string& token : tokens_by_rank) {
    offsets.push_back(static_cast<uint32_t>(arena.size()));
    arena += token;
  }
  for (const std::string& name : specials) {
    offsets.push_back(static_cast<uint32_t>(arena.size()));
    arena += name;
  }
  offsets.push_back(static_cast<uint32_t>(arena.size()));
  tokens_by_rank.clear();
  tokens_by_rank.shrink_to_fit();

  NANOFORGE_ASSIGN_OR_RETURN(PieceSplitter splitter, PieceSplitter::create(kNanochatSplitPattern));
  Tokenizer tokenizer(std::make_unique<State>(std::move(splitter), std::move(arena), std::move(offsets),
                                              num_ranks, std::move(specials)));
  const uint64_t hash = fnv1a64(format_specials_file(tokenizer), fnv1a64(format_rank_file(tokenizer)));
  tokenizer.state_->hash = fmt::format("{:016x}", fnv1a64(kNanochatSplitPattern, hash));
  return tokenizer;
}

uint64_t Tokenizer::State::next_uid() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

Tokenizer::Tokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  const State& state = *state_;
  PieceCache& cache = thread_piece_cache(state.uid);
  state.splitter.for_each_piece(text, [&](std::string_view piece) {
    if (piece.size() == 1) {
      out.push_back(state.ranks.byte_id(static_cast<unsigned char>(piece[0])));
      return;
    }
    // tiktoken: a piece that is a token maps to it directly; only the others are merged.
    const uint64_t hash = piece_hash(piece);
    if (const int32_t id = state.pieces.find(piece, hash); id >= 0) {
      out.push_back(id);
      return;
    }
    if (cache.append(piece, hash, out)) return;
    const size_t start = out.size();
    state.ranks.merge(piece, out);
    cache.put(piece, hash, out.data() + start, out.size() - start);
  });
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 8);
  encode(text, out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) {
    NANOFORGE_CHECK(id >= 0 && id < vocab_size(), "decode: token id {} is outside the vocabulary [0, {})", id,
                    vocab_size());
    out += state_->token(id);
  }
  return out;
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  NANOFORGE_CHECK(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary [0, {})", id,
                  vocab_size());
  return state_->token(id);
}

int32_t Tokenizer::vocab_size() const {
  return state_->num_ranks + static_cast<int32_t>(state_->specials.size());
}
int32_t Tokenizer::num_ranks() const {
  return state_->num_ranks;
}
int32_t Tokenizer::bos_id() const {
  return special_id("<|bos|>");
}

int32_t Tokenizer::special_id(std::string_view name) const {
  for (size_t i = 0; i < state_->specials.size(); ++i) {
    if (state_->specials[i] == name) return state_->num_ranks + static_cast<int32_t>(i);
  }
  return -1;
}

std::vector<int32_t> Tokenizer::token_byte_lengths() const {
  std::vector<int32_t> lengths(vocab_size(), 0);
  for (int32_t id = 0; id < state_->num_ranks; ++id)
    lengths[id] = static_cast<int32_t>(state_->token(id).size());
  return lengths;
}

std::string Tokenizer::hash() const {
  return state_->hash;
}

}  // namespace nanoforge
