// Loading and saving a tokenizer directory: DIR/tokenizer.tiktoken is tiktoken's rank file ("BASE64 RANK"
// per line, as tiktoken's load_tiktoken_bpe reads it) and DIR/special_tokens.txt holds "NAME ID" per line.
// Every error names the file and, where there is one, the line.
#include <absl/container/flat_hash_map.h>
#include <absl/strings/numbers.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/tokenizer/bpe_base64.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/tokenizer_state.h"
#include "support/output_path.h"
#include "support/status.h"

namespace nanoforge {
namespace {

// The whole file, refused unread when it is not a regular file or is larger than `max_bytes`.
absl::StatusOr<std::string> read_whole_file(const std::string& path, int64_t max_bytes) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) return absl::NotFoundError(fmt::format("{}: no such file", path));
  if (!std::filesystem::is_regular_file(status))
    return absl::InvalidArgumentError(fmt::format("{}: not a regular file", path));
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, error));
  if (size > max_bytes) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: {} bytes, more than the {} a tokenizer file may hold (corrupt or not a tokenizer file)", path,
        size, max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::DataLossError(fmt::format("{}: read error", path));
  return std::move(contents).str();
}

// Calls line_fn(line_number, line) for each non-empty line (a trailing '\r' removed), stopping at an error.
template <typename LineFn>
absl::Status for_each_line(std::string_view contents, LineFn&& line_fn) {
  int64_t line_number = 0;
  while (!contents.empty()) {
    ++line_number;
    const size_t newline = contents.find('\n');
    std::string_view line = contents.substr(0, newline);
    contents.remove_prefix(newline == std::string_view::npos ? contents.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (absl::Status status = line_fn(line_number, line); !status.ok()) return status;
  }
  return absl::OkStatus();
}

// "FIRST SECOND" with one or more spaces or tabs between and nothing else.
bool split_two_fields(std::string_view line, std::string_view& first, std::string_view& second) {
  const size_t gap = line.find_first_of(" \t");
  if (gap == 0 || gap == std::string_view::npos) return false;
  first = line.substr(0, gap);
  const size_t start = line.find_first_not_of(" \t", gap);
  if (start == std::string_view::npos) return false;
  second = line.substr(start);
  const size_t end = second.find_last_not_of(" \t");
  second = second.substr(0, end + 1);
  return second.find_first_of(" \t") == std::string_view::npos;
}

absl::StatusOr<std::vector<std::string>> parse_rank_file(const std::string& path) {
  NANOFORGE_ASSIGN_OR_RETURN(const std::string contents, read_whole_file(path, Tokenizer::kMaxRankFileBytes));
  // A rank as large as the number of lines cannot leave the ranks below it all given: refuse it before
  // sizing tables by it.
  const int64_t max_lines = static_cast<int64_t>(std::count(contents.begin(), contents.end(), '\n')) + 1;
  std::vector<std::string> tokens;
  std::vector<int64_t> rank_line;  // rank -> the line that gave it (0: none yet)
  absl::flat_hash_map<std::string, std::pair<int64_t, int64_t>> token_seen;  // bytes -> (rank, line)
  NANOFORGE_RETURN_IF_ERROR(for_each_line(contents, [&](int64_t line_number, std::string_view line) {
    std::string_view base64, rank_text;
    if (!split_two_fields(line, base64, rank_text)) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: expected 'BASE64_TOKEN RANK', found '{}'", path,
                                                    line_number, line.substr(0, 80)));
    }
    if (static_cast<int64_t>(base64.size()) > (Tokenizer::kMaxTokenBytes + 2) / 3 * 4) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: a token of about {} bytes; tokens hold at most {}", path, line_number,
                      base64.size() / 4 * 3, Tokenizer::kMaxTokenBytes));
    }
    auto token = base64_decode(base64);
    if (!token.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: {}", path, line_number, std::string(token.status().message())));
    }
    int64_t rank = -1;
    if (!absl::SimpleAtoi(absl::string_view(rank_text.data(), rank_text.size()), &rank) || rank < 0 ||
        rank >= (1 << 30)) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: rank '{}' is not an integer in [0, 2^30)", path, line_number, rank_text));
    }
    if (rank >= max_lines) {
      return absl::InvalidArgumentError(fmt::format(
          "{}:{}: rank {} is not below the number of lines ({}), so ranks 0..N-1 cannot all be given", path,
          line_number, rank, max_lines));
    }
    if (static_cast<size_t>(rank) >= tokens.size()) {
      tokens.resize(rank + 1);
      rank_line.resize(rank + 1, 0);
    }
    if (rank_line[rank] != 0) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: rank {} is given twice (first on line {})", path,
                                                    line_number, rank, rank_line[rank]));
    }
    const auto [seen, inserted] = token_seen.emplace(*token, std::make_pair(rank, line_number));
    if (!inserted) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: token {} (rank {}) is the same bytes as rank {} on line {}", path, line_number,
                      base64, rank, seen->second.first, seen->second.second));
    }
    rank_line[rank] = line_number;
    tokens[rank] = std::move(*token);
    return absl::OkStatus();
  }));
  if (tokens.empty()) return absl::InvalidArgumentError(fmt::format("{}: no ranks in the file", path));
  for (size_t rank = 0; rank < tokens.size(); ++rank) {
    if (rank_line[rank] == 0) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: ranks must be 0..N-1 with none missing, but rank {} is missing (the largest is {})", path,
          rank, tokens.size() - 1));
    }
  }
  return tokens;
}

absl::StatusOr<std::vector<std::string>> parse_specials_file(const std::string& path, int32_t num_ranks) {
  NANOFORGE_ASSIGN_OR_RETURN(const std::string contents,
                             read_whole_file(path, Tokenizer::kMaxSpecialsFileBytes));
  std::vector<std::string> names;
  NANOFORGE_RETURN_IF_ERROR(for_each_line(contents, [&](int64_t line_number, std::string_view line) {
    std::string_view name, id_text;
    int64_t id = -1;
    if (!split_two_fields(line, name, id_text) ||
        !absl::SimpleAtoi(absl::string_view(id_text.data(), id_text.size()), &id)) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: expected 'NAME ID', found '{}'", path, line_number, line.substr(0, 80)));
    }
    const int64_t expected = num_ranks + static_cast<int64_t>(names.size());
    if (id != expected) {
      return absl::InvalidArgumentError(fmt::format(
          "{}:{}: special token {} has id {}, expected {}: the special ids follow the {} ranks, in order",
          path, line_number, name, id, expected, num_ranks));
    }
    names.emplace_back(name);
    return absl::OkStatus();
  }));
  return names;
}

absl::Status with_file_context(const absl::Status& status, const std::string& path) {
  return absl::Status(status.code(), fmt::format("{}: {}", path, std::string(status.message())));
}

}  // namespace

std::string format_rank_file(const Tokenizer& tokenizer) {
  std::string out;
  for (int32_t rank = 0; rank < tokenizer.num_ranks(); ++rank)
    out += fmt::format("{} {}\n", base64_encode(tokenizer.token_bytes(rank)), rank);
  return out;
}

std::string format_specials_file(const Tokenizer& tokenizer) {
  std::string out;
  for (int32_t id = tokenizer.num_ranks(); id < tokenizer.vocab_size(); ++id)
    out += fmt::format("{} {}\n", tokenizer.token_bytes(id), id);
  return out;
}

absl::StatusOr<Tokenizer> Tokenizer::load(const std::string& dir) {
  const std::string ranks_path = (std::filesystem::path(dir) / kRanksFile).string();
  const std::string specials_path = (std::filesystem::path(dir) / kSpecialsFile).string();
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::NotFoundError(fmt::format("tokenizer directory {} does not exist (expected {} and {} in it)",
                                           dir, kRanksFile, kSpecialsFile));
  }
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> tokens, parse_rank_file(ranks_path));
  const auto num_ranks = static_cast<int32_t>(tokens.size());
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> specials,
                             parse_specials_file(specials_path, num_ranks));
  auto tokenizer = from_ranks(std::move(tokens), std::move(specials));
  if (!tokenizer.ok()) return with_file_context(tokenizer.status(), ranks_path + " + " + specials_path);
  return tokenizer;
}

absl::StatusOr<Tokenizer> Tokenizer::load_rank_file(const std::string& path) {
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> tokens, parse_rank_file(path));
  auto tokenizer = from_ranks(std::move(tokens), special_token_names());
  if (!tokenizer.ok()) return with_file_context(tokenizer.status(), path);
  return tokenizer;
}

absl::Status Tokenizer::save(const std::string& dir) const {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    return absl::PermissionDeniedError(fmt::format("cannot create directory {}: {}", dir, error.message()));
  NANOFORGE_RETURN_IF_ERROR(
      write_file_atomically((std::filesystem::path(dir) / kRanksFile).string(), format_rank_file(*this)));
  return write_file_atomically((std::filesystem::path(dir) / kSpecialsFile).string(),
                               format_specials_file(*this));
}

bool Tokenizer::is_saved_file_name(const std::string& name) {
  for (const std::string file : {kRanksFile, kSpecialsFile}) {
    if (name == file || name == file + kTemporaryFileSuffix) return true;
  }
  return false;
}

}  // namespace nanoforge
