// Splits text into the pieces BPE merges within, with nanochat's regex run by PCRE2 (UTF + UCP, JIT). The
// pattern is compiled with PCRE2_MATCH_INVALID_UTF so any bytes can be split: invalid UTF-8 never matches
// the regex, and each maximal run the regex leaves unmatched becomes a piece of its own. The pieces therefore
// always tile the input exactly (decode(encode(x)) == x for every byte string), and on valid UTF-8 there are
// no such runs, so the pieces are exactly those of tiktoken's regex. Thread-safe: match data and the JIT
// stack are per thread.
#pragma once

#include <absl/status/statusor.h>

#include <memory>
#include <string>
#include <string_view>

namespace nanoforge {

// nanochat's split pattern (nanochat/tokenizer.py SPLIT_PATTERN): GPT-4's, with \p{N}{1,2} instead of
// \p{N}{1,3}.
inline constexpr std::string_view kNanochatSplitPattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

class PieceSplitter {
 public:
  // Compiles and JIT-compiles `pattern`; an error names the offset in the pattern.
  static absl::StatusOr<PieceSplitter> create(std::string_view pattern = kNanochatSplitPattern);

  PieceSplitter(PieceSplitter&&) noexcept;
  PieceSplitter& operator=(PieceSplitter&&) noexcept;
  ~PieceSplitter();

  const std::string& pattern() const { return pattern_; }

  // The end of the piece that starts at `offset` (offset < text.size(); the result is > offset).
  size_t piece_end(std::string_view text, size_t offset) const;

  // Calls visit(std::string_view piece) for each piece of `text`, in order.
  template <typename Visit>
  void for_each_piece(std::string_view text, Visit&& visit) const {
    size_t offset = 0;
    while (offset < text.size()) {
      const size_t end = piece_end(text, offset);
      visit(text.substr(offset, end - offset));
      offset = end;
    }
  }

 private:
  struct Compiled;
  PieceSplitter(std::string pattern, std::unique_ptr<Compiled> compiled);
  std::string pattern_;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace nanoforge
