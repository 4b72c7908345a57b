// DocumentReader: files are read in 1 MiB blocks and cut into lines; JSON lines go through simdjson's DOM
// parser (one parser reused for every line), text lines are grouped into paragraphs.
#include "data/documents/documents.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace nanoforge {
namespace {

constexpr size_t kReadBlockBytes = 1 << 20;

enum class FileKind { kUnknown, kJsonLines, kText };

FileKind kind_of(const std::filesystem::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (extension == ".jsonl" || extension == ".ndjson") return FileKind::kJsonLines;
  if (extension == ".txt" || extension == ".text" || extension == ".md") return FileKind::kText;
  return FileKind::kUnknown;
}

constexpr const char* kKnownKinds =
    "*.jsonl or *.ndjson (JSON lines with a \"text\" field), *.txt, *.text or *.md (text)";

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// Lines of one file, read in blocks; a line is returned without its '\n' and stays valid until the next call.
class LineReader {
 public:
  explicit LineReader(FILE* file) : file_(file) {}
  ~LineReader() {
    if (file_ != nullptr) std::fclose(file_);
  }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // False at the end of the file; *error is set on a read error.
  bool next(std::string_view& line, bool& error) {
    error = false;
    while (true) {
      const size_t newline = buffer_.find('\n', start_);
      if (newline != std::string::npos) {
        line = std::string_view(buffer_).substr(start_, newline - start_);
        consumed_ += newline + 1 - start_;
        start_ = newline + 1;
        ++line_number_;
        return true;
      }
      if (at_eof_) {
        if (start_ >= buffer_.size()) return false;
        line = std::string_view(buffer_).substr(start_);
        consumed_ += buffer_.size() - start_;
        start_ = buffer_.size();
        ++line_number_;
        return true;
      }
      buffer_.erase(0, start_);
      start_ = 0;
      const size_t old_size = buffer_.size();
      buffer_.resize(old_size + kReadBlockBytes);
      const size_t got = std::fread(buffer_.data() + old_size, 1, kReadBlockBytes, file_);
      buffer_.resize(old_size + got);
      if (got < kReadBlockBytes) {
        if (std::ferror(file_)) {
          error = true;
          return false;
        }
        at_eof_ = true;
      }
    }
  }
  int64_t line_number() const { return line_number_; }
  uint64_t consumed() const { return consumed_; }

 private:
  FILE* file_;
  std::string buffer_;
  size_t start_ = 0;
  bool at_eof_ = false;
  int64_t line_number_ = 0;
  uint64_t consumed_ = 0;
};

}  // namespace

absl::StatusOr<TextSplit> parse_text_split(std::string_view name) {
  if (name == "paragraphs") return TextSplit::kParagraphs;
  if (name == "file") return TextSplit::kWholeFile;
  return absl::InvalidArgumentError(
      fmt::format("text split '{}': expected 'paragraphs' (documents separated by blank lines) or 'file' "
                  "(one document per file)",
                  name));
}

absl::StatusOr<std::vector<std::string>> expand_document_paths(const std::vector<std::string>& inputs) {
  std::vector<std::string> paths;
  for (const std::string& input : inputs) {
    std::error_code error;
    if (std::filesystem::is_directory(input, error)) {
      std::vector<std::string> found;
      for (const auto& entry : std::filesystem::directory_iterator(input, error)) {
        if (entry.is_regular_file() && kind_of(entry.path()) != FileKind::kUnknown)
          found.push_back(entry.path().string());
      }
      if (error) return absl::NotFoundError(fmt::format("{}: cannot list: {}", input, error.message()));
      if (found.empty()) {
        return absl::NotFoundError(fmt::format("directory {} has no input files ({})", input, kKnownKinds));
      }
      std::sort(found.begin(), found.end());
      paths.insert(paths.end(), found.begin(), found.end());
    } else if (!std::filesystem::exists(input, error)) {
      return absl::NotFoundError(fmt::format("input {} does not exist", input));
    } else if (kind_of(input) == FileKind::kUnknown) {
      return absl::InvalidArgumentError(
          fmt::format("input {}: unknown kind of file; expected {}", input, kKnownKinds));
    } else {
      paths.push_back(input);
    }
  }
  if (paths.empty()) return absl::InvalidArgumentError("no input files given");
  return paths;
}

struct DocumentReader::State {
  std::vector<std::string> paths;
  TextSplit text_split = TextSplit::kParagraphs;
  uint64_t total_bytes = 0;
  uint64_t finished_files_bytes = 0;  // bytes of the files already read to the end
  size_t file_index = 0;
  std::unique_ptr<LineReader> lines;  // the current file; null before opening it
  simdjson::dom::parser json_parser;
  std::string paragraph;

  const std::string& path() const { return paths[file_index]; }
  absl::StatusOr<bool> next_json(Document& document);
  absl::StatusOr<bool> next_paragraph(Document& document);
  absl::StatusOr<bool> next_whole_file(Document& document);
};

DocumentReader::DocumentReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
DocumentReader::DocumentReader(DocumentReader&&) noexcept = default;
DocumentReader& DocumentReader::operator=(DocumentReader&&) noexcept = default;
DocumentReader::~DocumentReader() = default;

absl::StatusOr<DocumentReader> DocumentReader::open(std::vector<std::string> paths, TextSplit text_split) {
  auto state = std::make_unique<State>();
  for (const std::string& path : paths) {
    if (kind_of(path) == FileKind::kUnknown) {
      return absl::InvalidArgumentError(
          fmt::format("input {}: unknown kind of file; expected {}", path, kKnownKinds));
    }
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(path, error);
    if (error) return absl::NotFoundError(fmt::format("input {}: {}", path, error.message()));
    state->total_bytes += size;
  }
  state->paths = std::move(paths);
  state->text_split = text_split;
  return DocumentReader(std::move(state));
}

const std::vector<std::string>& DocumentReader::paths() const {
  return state_->paths;
}
uint64_t DocumentReader::total_bytes() const {
  return state_->total_bytes;
}
uint64_t DocumentReader::bytes_read() const {
  return state_->finished_files_bytes + (state_->lines ? state_->lines->consumed() : 0);
}

absl::StatusOr<bool> DocumentReader::next(Document& document) {
  State& s = *state_;
  while (s.file_index < s.paths.size()) {
    if (!s.lines) {
      FILE* file = std::fopen(s.path().c_str(), "rb");
      if (file == nullptr) {
        return absl::NotFoundError(fmt::format("{}: cannot open: {}", s.path(), std::strerror(errno)));
      }
      s.lines = std::make_unique<LineReader>(file);
    }
    absl::StatusOr<bool> got = false;
    if (kind_of(s.path()) == FileKind::kJsonLines) {
      got = s.next_json(document);
    } else if (s.text_split == TextSplit::kParagraphs) {
      got = s.next_paragraph(document);
    } else {
      got = s.next_whole_file(document);
    }
    if (!got.ok() || *got) {
      document.file_index = s.file_index;
      return got;
    }
    s.finished_files_bytes += s.lines->consumed();
    s.lines.reset();
    ++s.file_index;
  }
  return false;
}

absl::StatusOr<bool> DocumentReader::State::next_json(Document& document) {
  std::string_view line;
  bool read_error = false;
  while (lines->next(line, read_error)) {
    if (is_blank(line)) continue;
    const int64_t line_number = lines->line_number();
    simdjson::dom::element root;
    if (const auto error = json_parser.parse(line.data(), line.size(), true).get(root); error) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: not valid JSON: {}", path(), line_number, simdjson::error_message(error)));
    }
    simdjson::dom::object object;
    if (root.get(object) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError(fmt::format(
          "{}:{}: expected a JSON object with a \"text\" field on each line", path(), line_number));
    }
    simdjson::dom::element text;
    if (object["text"].get(text) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: the JSON object has no \"text\" field", path(), line_number));
    }
    std::string_view value;
    if (text.get(value) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: \"text\" is not a string", path(), line_number));
    }
    document.text.assign(value.data(), value.size());
    document.line = line_number;
    return true;
  }
  if (read_error)
    return absl::DataLossError(fmt::format("{}: read error after line {}", path(), lines->line_number()));
  return false;
}

absl::StatusOr<bool> DocumentReader::State::next_paragraph(Document& document) {
  std::string_view line;
  bool read_error = false;
  document.text.clear();
  bool started = false;
  while (lines->next(line, read_error)) {
    if (is_blank(line)) {
      if (started) break;
      continue;
    }
    if (!started) {
      started = true;
      document.line = lines->line_number();
    } else {
      document.text += '\n';
    }
    document.text += line;
  }
  if (read_error)
    return absl::DataLossError(fmt::format("{}: read error after line {}", path(), lines->line_number()));
  if (!started) return false;
  if (!document.text.empty() && document.text.back() == '\r') document.text.pop_back();  // a CRLF terminator
  return true;
}

absl::StatusOr<bool> DocumentReader::State::next_whole_file(Document& document) {
  if (lines->consumed() > 0 || lines->line_number() > 0) return false;  // this file was returned already
  std::string_view line;
  bool read_error = false;
  document.text.clear();
  document.line = 1;
  bool any = false;
  while (lines->next(line, read_error)) {
    if (any) document.text += '\n';
    document.text += line;
    any = true;
  }
  if (read_error) return absl::DataLossError(fmt::format("{}: read error", path()));
  if (!any) return false;  // an empty file has no document
  // LineReader drops the '\n' ending each line; put back the one that ended the file, if any.
  if (lines->consumed() > document.text.size()) document.text += '\n';
  return true;
}

}  // namespace nanoforge
