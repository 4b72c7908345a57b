// Token passes, written as fixed-size blocks with branch-free inner loops (max, sums, compares) that GCC
// vectorises at -O2/-O3; the rare hit (an out-of-range token, a BOS) is then located by a scalar rescan of
// the one block that has it.
#include "data/shards/shard_token_scan.h"

#include <algorithm>

namespace nanoforge {
namespace {

// Block of the checksum: positions j < 2^16 and tokens < 2^32 keep sum(j * t_j) below 2^64.
constexpr int64_t kChecksumBlock = int64_t{1} << 16;
// Block of the position search: small, so that a block with a hit costs little to rescan.
constexpr int64_t kSearchBlock = 64;

template <class Token>
uint32_t block_max(const Token* tokens, int64_t count) {
  uint32_t largest = 0;
  for (int64_t j = 0; j < count; ++j)
    largest = std::max<uint32_t>(largest, tokens[j]);
  return largest;
}

// sum of t_j * (2 (base + j) + 1) = (2 base + 1) * sum(t_j) + 2 * sum(j t_j), modulo 2^64.
template <class Token>
uint64_t block_checksum(const Token* tokens, int64_t count, int64_t base) {
  uint64_t plain_sum = 0, weighted_sum = 0;
  for (int64_t j = 0; j < count; ++j) {
    plain_sum += tokens[j];
    weighted_sum += static_cast<uint64_t>(j) * tokens[j];
  }
  return (2 * static_cast<uint64_t>(base) + 1) * plain_sum + 2 * weighted_sum;
}

}  // namespace

template <class Token>
uint64_t token_checksum(std::span<const Token> tokens) {
  uint64_t checksum = 0;
  const auto count = static_cast<int64_t>(tokens.size());
  for (int64_t base = 0; base < count; base += kChecksumBlock) {
    checksum += block_checksum(tokens.data() + base, std::min(kChecksumBlock, count - base), base);
  }
  return checksum;
}

template <class Token>
TokenScanResult scan_tokens(std::span<const Token> tokens, int64_t vocab_size) {
  TokenScanResult result;
  const auto count = static_cast<int64_t>(tokens.size());
  for (int64_t base = 0; base < count; base += kChecksumBlock) {
    const int64_t block = std::min(kChecksumBlock, count - base);
    const Token* data = tokens.data() + base;
    result.checksum += block_checksum(data, block, base);
    if (result.first_out_of_vocab < 0 && static_cast<int64_t>(block_max(data, block)) >= vocab_size) {
      for (int64_t j = 0; j < block; ++j) {
        if (static_cast<int64_t>(data[j]) >= vocab_size) {
          result.first_out_of_vocab = base + j;
          result.out_of_vocab_value = data[j];
          break;
        }
      }
    }
  }
  return result;
}

template <class Token>
int64_t find_first_at_or_above(std::span<const Token> tokens, int64_t limit) {
  const auto count = static_cast<int64_t>(tokens.size());
  for (int64_t base = 0; base < count; base += kChecksumBlock) {
    const int64_t block = std::min(kChecksumBlock, count - base);
    if (static_cast<int64_t>(block_max(tokens.data() + base, block)) < limit) continue;
    for (int64_t j = 0; j < block; ++j) {
      if (static_cast<int64_t>(tokens[base + j]) >= limit) return base + j;
    }
  }
  return -1;
}

template <class Token>
int64_t count_token(std::span<const Token> tokens, uint32_t value) {
  const auto needle = static_cast<Token>(value);
  if (static_cast<uint32_t>(needle) != value) return 0;  // the value does not fit the stored width
  int64_t count = 0;
  for (const Token token : tokens)
    count += token == needle;
  return count;
}

template <class Token>
void find_token_positions(std::span<const Token> tokens, uint32_t value, std::vector<int64_t>& positions) {
  const auto count = static_cast<int64_t>(tokens.size());
  const auto needle = static_cast<Token>(value);
  if (static_cast<uint32_t>(needle) != value) return;  // the value does not fit the stored width
  int64_t base = 0;
  for (; base + kSearchBlock <= count; base += kSearchBlock) {
    const Token* data = tokens.data() + base;
    int hits = 0;
    for (int64_t j = 0; j < kSearchBlock; ++j)
      hits += data[j] == needle;
    if (hits == 0) continue;
    for (int64_t j = 0; j < kSearchBlock; ++j) {
      if (data[j] == needle) positions.push_back(base + j);
    }
  }
  for (; base < count; ++base) {
    if (tokens[base] == needle) positions.push_back(base);
  }
}

template <class Token>
uint32_t widen_tokens(std::span<const Token> tokens, int32_t* out) {
  const Token* data = tokens.data();
  const auto count = static_cast<int64_t>(tokens.size());
  uint32_t largest = 0;
  for (int64_t i = 0; i < count; ++i) {
    out[i] = static_cast<int32_t>(data[i]);
    largest = std::max<uint32_t>(largest, data[i]);
  }
  return largest;
}

#define NANOFORGE_TOKEN_SCAN_INSTANTIATE(Token)                                                       \
  template uint64_t token_checksum<Token>(std::span<const Token>);                                    \
  template TokenScanResult scan_tokens<Token>(std::span<const Token>, int64_t);                       \
  template int64_t find_first_at_or_above<Token>(std::span<const Token>, int64_t);                    \
  template int64_t count_token<Token>(std::span<const Token>, uint32_t);                              \
  template void find_token_positions<Token>(std::span<const Token>, uint32_t, std::vector<int64_t>&); \
  template uint32_t widen_tokens<Token>(std::span<const Token>, int32_t*);
NANOFORGE_TOKEN_SCAN_INSTANTIATE(uint16_t)
NANOFORGE_TOKEN_SCAN_INSTANTIATE(uint32_t)
#undef NANOFORGE_TOKEN_SCAN_INSTANTIATE

}  // namespace nanoforge
