// PieceSplitter on PCRE2: one compiled, JIT-compiled pattern shared by all threads; each thread keeps its
// own match data, match context and JIT stack (created on first use, freed at thread exit).
#include "data/tokenizer/bpe_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include "support/check.h"

namespace nanoforge {
namespace {

// The JIT stack grows on demand up to this size; nanochat's pattern needs little (its repeats are simple
// character classes), this is headroom for long whitespace runs.
constexpr size_t kJitStackStartBytes = 32 * 1024;
constexpr size_t kJitStackMaxBytes = 8 * 1024 * 1024;

std::string pcre2_message(int error_code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error_code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

struct ThreadMatchState {
  pcre2_match_data* match_data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(kJitStackStartBytes, kJitStackMaxBytes, nullptr);
  ThreadMatchState() {
    NANOFORGE_CHECK(match_data && context && jit_stack, "out of memory creating PCRE2 match state");
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match_data);
  }
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

// The length of the UTF-8 sequence starting with `lead` (1 for bytes that cannot start one).
size_t utf8_sequence_length(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  return 1;
}

}  // namespace

struct PieceSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

absl::StatusOr<PieceSplitter> PieceSplitter::create(std::string_view pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  auto compiled = std::make_unique<Compiled>();
  compiled->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset, nullptr);
  if (compiled->code == nullptr) {
    return absl::InvalidArgumentError(fmt::format("split pattern does not compile at offset {}: {}",
                                                  error_offset, pcre2_message(error_code)));
  }
  if (const int jit = pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE); jit != 0) {
    return absl::InternalError(
        fmt::format("PCRE2 JIT compilation of the split pattern failed: {} (this "
                    "PCRE2 build may lack JIT support)",
                    pcre2_message(jit)));
  }
  return PieceSplitter(std::string(pattern), std::move(compiled));
}

PieceSplitter::PieceSplitter(std::string pattern, std::unique_ptr<Compiled> compiled)
    : pattern_(std::move(pattern)), compiled_(std::move(compiled)) {}
PieceSplitter::PieceSplitter(PieceSplitter&&) noexcept = default;
PieceSplitter& PieceSplitter::operator=(PieceSplitter&&) noexcept = default;
PieceSplitter::~PieceSplitter() = default;

size_t PieceSplitter::piece_end(std::string_view text, size_t offset) const {
  ThreadMatchState& state = thread_match_state();
  const int rc = pcre2_jit_match(compiled_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                                 offset, 0, state.match_data, state.context);
  if (rc == PCRE2_ERROR_NOMATCH) return text.size();  // the rest is invalid UTF-8: one piece
  if (rc < 0) {
    // Only resource limits can fail here (the JIT stack on pathological input). Keep the output exact
    // by taking one character as the piece; tiktoken has no equivalent case.
    return std::min(text.size(), offset + utf8_sequence_length(static_cast<unsigned char>(text[offset])));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.match_data);
  if (ovector[0] > offset) return ovector[0];  // invalid UTF-8 before the match: a piece of its own
  if (ovector[1] > offset) return ovector[1];
  // An empty match (impossible with nanochat's pattern, possible with others): advance one character.
  return std::min(text.size(), offset + utf8_sequence_length(static_cast<unsigned char>(text[offset])));
}

}  // namespace nanoforge
