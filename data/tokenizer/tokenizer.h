// Tokenizer: nanochat's GPT-4-style byte-level BPE — ids 0..255 are the raw bytes (in byte order for the
// tokenizers nanoforge trains), merges follow in the order they were learned, then nanochat's special tokens
// (<|bos|> first). Text is split by nanochat's regex (PCRE2, JIT) and each piece is merged by rank, exactly
// as tiktoken does. Saved as a tiktoken rank file plus the special tokens, so tokenizers move between
// nanoforge and tiktoken in both directions. docs/tokenizer.md describes the format.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nanoforge {

class Tokenizer {
 public:
  // nanochat's special tokens, in id order after the merges (nanochat/tokenizer.py SPECIAL_TOKENS).
  static const std::vector<std::string>& special_token_names();
  // The files of a tokenizer directory.
  static constexpr const char* kRanksFile = "tokenizer.tiktoken";
  static constexpr const char* kSpecialsFile = "special_tokens.txt";
  // Limits on what a tokenizer may hold, far above real ones (the longest token of OpenAI's o200k_base is
  // 128 bytes; its rank file is 3.6 MB): loading costs at most kMaxTokenBytes hash lookups per token byte,
  // so a file within them loads in seconds at worst. `tokenizer train` never makes a longer token.
  static constexpr int64_t kMaxTokenBytes = 1024;
  static constexpr int64_t kMaxRankFileBytes = int64_t{64} << 20;
  static constexpr int64_t kMaxSpecialsFileBytes = int64_t{1} << 20;

  // tokens_by_rank[r] is the byte string of rank (= id) r; it must hold each of the 256 single bytes and no
  // byte string twice. Specials get ids after the ranks, in order; "<|bos|>" must be one of them.
  static absl::StatusOr<Tokenizer> from_ranks(std::vector<std::string> tokens_by_rank,
                                              std::vector<std::string> specials = special_token_names());
  // Reads DIR/tokenizer.tiktoken (base64 token, space, rank per line) and DIR/special_tokens.txt (name,
  // space, id per line). Errors name the file and line.
  static absl::StatusOr<Tokenizer> load(const std::string& dir);
  // A rank file alone (for example one written by tiktoken), with nanochat's specials after its ranks.
  static absl::StatusOr<Tokenizer> load_rank_file(const std::string& path);
  // Writes the two files (each under a temporary name, then renamed), creating DIR if needed.
  absl::Status save(const std::string& dir) const;
  // Whether a directory entry of this name is one save writes (a file or its temporary name): `tokenizer
  // train` writes only into a directory that holds nothing else.
  static bool is_saved_file_name(const std::string& name);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Ordinary encoding: special-token text in `text` is encoded as plain bytes (nanochat's
  // encode_ordinary). Any bytes are accepted (invalid UTF-8 included; see data/tokenizer/bpe_split.h) and
  // decode(encode(x)) == x. Appends to `out`. Thread-safe: any number of threads may encode at once.
  void encode(std::string_view text, std::vector<int32_t>& out) const;
  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of the tokens (specials decode to their names). Ids must be < vocab_size() (checked).
  std::string decode(std::span<const int32_t> ids) const;
  // The bytes of one token.
  std::string_view token_bytes(int32_t id) const;

  int32_t vocab_size() const;  // ranks (256 bytes + merges) + specials
  int32_t num_ranks() const;   // 256 bytes + merges: the first special's id
  int32_t bos_id() const;
  // The id of a special token by name, or -1.
  int32_t special_id(std::string_view name) const;
  // Bytes per token id (0 for specials): nanochat's token_bytes, for bits-per-byte.
  std::vector<int32_t> token_byte_lengths() const;
  // A stable hash of the ranks, specials and split pattern (16 hex digits, FNV-1a 64 of the saved files'
  // content): shards record it, the loader checks it.
  std::string hash() const;

 private:
  struct State;
  explicit Tokenizer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace nanoforge
