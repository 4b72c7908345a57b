// Passes over a shard's tokens as stored (uint16 or uint32): the full check on open (first token outside the
// vocabulary plus the checksum, in one pass), the positions of one id (llm.c documents are split at BOS), and
// widening to the int32 ids a batch holds. The inner loops work on fixed blocks without branches so that the
// compiler vectorises them; docs/data.md has their measured speed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nanoforge {

// The shard checksum: sum over i of tokens[i] * (2i + 1), modulo 2^64, i counted from 0. Every weight is odd,
// so changing any one token changes the sum, and so does swapping two different tokens (barring a 2^63
// coincidence). It is not cryptographic; it catches bit rot, zero-filled holes and misplaced blocks.
// numpy: (t.astype(np.uint64) * (2 * np.arange(len(t), dtype=np.uint64) + 1)).sum(dtype=np.uint64)
template <class Token>
uint64_t token_checksum(std::span<const Token> tokens);

struct TokenScanResult {
  uint64_t checksum = 0;
  int64_t first_out_of_vocab = -1;  // index of the first token >= vocab_size, -1 if none
  uint32_t out_of_vocab_value = 0;  // its value
};

// The checksum and the first out-of-vocabulary token in one pass.
template <class Token>
TokenScanResult scan_tokens(std::span<const Token> tokens, int64_t vocab_size);

// Index of the first token >= limit, or -1.
template <class Token>
int64_t find_first_at_or_above(std::span<const Token> tokens, int64_t limit);

// How many tokens equal `value`.
template <class Token>
int64_t count_token(std::span<const Token> tokens, uint32_t value);

// Appends to `positions` the index of every token equal to `value`, in order.
template <class Token>
void find_token_positions(std::span<const Token> tokens, uint32_t value, std::vector<int64_t>& positions);

// out[i] = tokens[i] as int32, for i < tokens.size(); returns the largest token (0 if none), so that a caller
// can check the vocabulary in the same pass.
template <class Token>
uint32_t widen_tokens(std::span<const Token> tokens, int32_t* out);

}  // namespace nanoforge
