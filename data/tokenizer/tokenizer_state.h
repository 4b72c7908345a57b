// The inside of a Tokenizer, shared by its files (tokenizer.cpp: construction, encode/decode;
// tokenizer_files.cpp: load/save). Token bytes live in one arena that never moves after construction, so the
// whole-piece lookup can key on string_views into it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/bpe_merge.h"
#include "data/tokenizer/bpe_piece_table.h"
#include "data/tokenizer/bpe_split.h"
#include "data/tokenizer/tokenizer.h"

namespace nanoforge {

struct Tokenizer::State {
  PieceSplitter splitter;
  std::string arena;              // the bytes of every token, ranks then specials, back to back
  std::vector<uint32_t> offsets;  // token id -> offset into arena; offsets[vocab_size] = arena.size()
  int32_t num_ranks = 0;          // 256 bytes + merges
  std::vector<std::string> specials;
  BpeRanks ranks;     // declared after arena and offsets: built from them
  PieceTable pieces;  // ranked token bytes -> id
  uint64_t uid;       // tells this tokenizer's per-thread piece caches from others'
  std::string hash;

  State(PieceSplitter splitter, std::string arena_bytes, std::vector<uint32_t> token_offsets,
        int32_t num_ranked, std::vector<std::string> special_names)
      : splitter(std::move(splitter)),
        arena(std::move(arena_bytes)),
        offsets(std::move(token_offsets)),
        num_ranks(num_ranked),
        specials(std::move(special_names)),
        ranks(ranked_tokens()),
        uid(next_uid()) {
    pieces.build(ranked_tokens());
  }

  static uint64_t next_uid();

  std::vector<std::string_view> ranked_tokens() const {
    std::vector<std::string_view> tokens;
    tokens.reserve(num_ranks);
    for (int32_t id = 0; id < num_ranks; ++id)
      tokens.push_back(token(id));
    return tokens;
  }

  std::string_view token(int32_t id) const {
    return std::string_view(arena).substr(offsets[id], offsets[id + 1] - offsets[id]);
  }
};

// The text of the two files of a tokenizer directory, exactly as save() writes them.
std::string format_rank_file(const Tokenizer& tokenizer);
std::string format_specials_file(const Tokenizer& tokenizer);

}  // namespace nanoforge
