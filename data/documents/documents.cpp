// DocumentReader: files are read in 1 MiB blocks (decompressed where compressed) and cut into lines; JSON
// lines go through simdjson's DOM parser (one parser reused for every line), text lines are grouped into
// paragraphs; parquet files are handed to their own reader.
#include "data/documents/documents.h"

#include <fmt/format.h>
#include <glob.h>
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "data/documents/byte_source.h"
#include "data/documents/parquet_documents.h"
#include "support/status.h"

namespace nanoforge {
namespace {

constexpr size_t kReadBlockBytes = 1 << 20;

enum class FileKind { kUnknown, kJsonLines, kText, kParquet };

struct InputKind {
  FileKind kind = FileKind::kUnknown;
  Compression compression = Compression::kNone;
};

std::string lower_extension(const std::filesystem::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

// By extension: a compression suffix (.gz, .zst) and the kind before it; "-" is standard input.
InputKind kind_of(const std::filesystem::path& path) {
  if (path == "-") return {FileKind::kJsonLines, Compression::kSniff};
  InputKind input;
  std::string extension = lower_extension(path);
  if (extension == ".parquet") return {FileKind::kParquet, Compression::kNone};
  if (extension == ".gz" || extension == ".zst") {
    input.compression = extension == ".gz" ? Compression::kGzip : Compression::kZstd;
    extension = lower_extension(path.stem());
  }
  if (extension == ".jsonl" || extension == ".ndjson") input.kind = FileKind::kJsonLines;
  if (extension == ".txt" || extension == ".text" || extension == ".md") input.kind = FileKind::kText;
  return input;
}

constexpr const char* kKnownKinds =
    "*.jsonl or *.ndjson (JSON lines with a \"text\" field), *.txt, *.text or *.md (text), either "
    "compressed as .gz or .zst (*.jsonl.zst), *.parquet, or - (JSON lines on standard input)";

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// Lines of one file, read in blocks; a line is returned without its '\n' and stays valid until the next call.
class LineReader {
 public:
  explicit LineReader(std::unique_ptr<ByteSource> source) : source_(std::move(source)) {}

  // False at the end of the file; *error is set on a read error (status() says what it was).
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
      absl::StatusOr<size_t> got = source_->read(buffer_.data() + old_size, kReadBlockBytes);
      if (!got.ok()) {
        status_ = got.status();
        buffer_.resize(old_size);
        error = true;
        return false;
      }
      buffer_.resize(old_size + *got);
      if (*got == 0) at_eof_ = true;
    }
  }
  int64_t line_number() const { return line_number_; }
  uint64_t consumed() const { return consumed_; }
  uint64_t source_bytes_read() const { return source_->source_bytes_read(); }
  // The read error, with the line it came after.
  absl::Status status() const {
    return absl::Status(status_.code(),
                        fmt::format("{} (after line {})", std::string(status_.message()), line_number_));
  }

 private:
  std::unique_ptr<ByteSource> source_;
  absl::Status status_;
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

namespace {

bool known(const std::filesystem::path& path) {
  return kind_of(path).kind != FileKind::kUnknown;
}

bool is_glob(const std::string& input) {
  return input.find_first_of("*?[") != std::string::npos;
}

// The matches of a glob pattern that are input files, sorted (glob(3) sorts them).
absl::StatusOr<std::vector<std::string>> glob_inputs(const std::string& pattern) {
  glob_t matches{};
  const int result = glob(pattern.c_str(), 0, nullptr, &matches);
  std::vector<std::string> found;
  for (size_t i = 0; result == 0 && i < matches.gl_pathc; ++i) {
    std::error_code error;
    if (std::filesystem::is_regular_file(matches.gl_pathv[i], error) && known(matches.gl_pathv[i]))
      found.emplace_back(matches.gl_pathv[i]);
  }
  globfree(&matches);
  if (found.empty())
    return absl::NotFoundError(fmt::format("pattern {} matches no input files ({})", pattern, kKnownKinds));
  return found;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> expand_document_paths(const std::vector<std::string>& inputs) {
  std::vector<std::string> paths;
  for (const std::string& input : inputs) {
    std::error_code error;
    if (input == "-") {
      if (std::find(paths.begin(), paths.end(), "-") != paths.end())
        return absl::InvalidArgumentError("standard input (-) can be given only once");
      paths.push_back(input);
    } else if (std::filesystem::is_directory(input, error)) {
      std::vector<std::string> found;
      for (const auto& entry : std::filesystem::directory_iterator(input, error)) {
        if (entry.is_regular_file() && known(entry.path())) found.push_back(entry.path().string());
      }
      if (error) return absl::NotFoundError(fmt::format("{}: cannot list: {}", input, error.message()));
      if (found.empty()) {
        return absl::NotFoundError(fmt::format("directory {} has no input files ({})", input, kKnownKinds));
      }
      std::sort(found.begin(), found.end());
      paths.insert(paths.end(), found.begin(), found.end());
    } else if (!std::filesystem::exists(input, error) && is_glob(input)) {
      NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> found, glob_inputs(input));
      paths.insert(paths.end(), found.begin(), found.end());
    } else if (!std::filesystem::exists(input, error)) {
      return absl::NotFoundError(fmt::format("input {} does not exist", input));
    } else if (!known(input)) {
      return absl::InvalidArgumentError(
          fmt::format("input {}: unknown kind of file; expected {}", input, kKnownKinds));
    } else {
      paths.push_back(input);
    }
  }
  if (paths.empty()) return absl::InvalidArgumentError("no input files given");
  // A file named twice (by itself, then through its directory or a pattern) is read once, where first named.
  std::vector<std::string> unique;
  std::set<std::filesystem::path> seen;
  for (std::string& path : paths) {
    std::error_code error;
    const std::filesystem::path canonical =
        path == "-" ? std::filesystem::path(path) : std::filesystem::weakly_canonical(path, error);
    if (seen.insert(error ? std::filesystem::path(path) : canonical).second)
      unique.push_back(std::move(path));
  }
  return unique;
}

struct DocumentReader::State {
  std::vector<std::string> paths;
  DocumentReadOptions options;
  uint64_t total_bytes = 0;
  uint64_t finished_files_bytes = 0;  // bytes of the files already read to the end
  int64_t finished_files_null_texts = 0;
  size_t file_index = 0;
  std::unique_ptr<LineReader> lines;  // the current file when it is line-oriented; null before opening it
  std::unique_ptr<ParquetTextReader> parquet;  // the current file when it is parquet
  simdjson::dom::parser json_parser;
  std::string paragraph;

  // The current input as errors name it.
  std::string path() const { return paths[file_index] == "-" ? "standard input" : paths[file_index]; }
  absl::Status open_current();
  absl::StatusOr<bool> next_json(Document& document);
  absl::StatusOr<bool> next_paragraph(Document& document);
  absl::StatusOr<bool> next_whole_file(Document& document);
};

DocumentReader::DocumentReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
DocumentReader::DocumentReader(DocumentReader&&) noexcept = default;
DocumentReader& DocumentReader::operator=(DocumentReader&&) noexcept = default;
DocumentReader::~DocumentReader() = default;

absl::StatusOr<DocumentReader> DocumentReader::open(std::vector<std::string> paths, TextSplit text_split) {
  DocumentReadOptions options;
  options.text_split = text_split;
  return open(std::move(paths), options);
}

absl::StatusOr<DocumentReader> DocumentReader::open(std::vector<std::string> paths,
                                                    const DocumentReadOptions& options) {
  auto state = std::make_unique<State>();
  for (const std::string& path : paths) {
    if (!known(path)) {
      return absl::InvalidArgumentError(
          fmt::format("input {}: unknown kind of file; expected {}", path, kKnownKinds));
    }
    if (path == "-") continue;  // a pipe has no size
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(path, error);
    if (error) return absl::NotFoundError(fmt::format("input {}: {}", path, error.message()));
    state->total_bytes += size;
  }
  state->paths = std::move(paths);
  state->options = options;
  return DocumentReader(std::move(state));
}

const std::vector<std::string>& DocumentReader::paths() const {
  return state_->paths;
}
uint64_t DocumentReader::total_bytes() const {
  return state_->total_bytes;
}
uint64_t DocumentReader::bytes_read() const {
  const State& s = *state_;
  return s.finished_files_bytes + (s.lines ? s.lines->source_bytes_read() : 0) +
         (s.parquet ? s.parquet->bytes_read() : 0);
}
int64_t DocumentReader::null_texts() const {
  return state_->finished_files_null_texts + (state_->parquet ? state_->parquet->null_texts() : 0);
}

absl::Status DocumentReader::State::open_current() {
  const std::string& file = paths[file_index];
  const InputKind input = kind_of(file);
  if (input.kind == FileKind::kParquet) {
    NANOFORGE_ASSIGN_OR_RETURN(parquet, open_parquet_text(file, {options.text_column, options.threads}));
  } else {
    NANOFORGE_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, open_byte_source(file, input.compression));
    lines = std::make_unique<LineReader>(std::move(source));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> DocumentReader::next(Document& document) {
  State& s = *state_;
  while (s.file_index < s.paths.size()) {
    if (!s.lines && !s.parquet) NANOFORGE_RETURN_IF_ERROR(s.open_current());
    absl::StatusOr<bool> got = false;
    if (s.parquet) {
      got = s.parquet->next(document.text, document.line);
    } else if (kind_of(s.paths[s.file_index]).kind == FileKind::kJsonLines) {
      got = s.next_json(document);
    } else if (s.options.text_split == TextSplit::kParagraphs) {
      got = s.next_paragraph(document);
    } else {
      got = s.next_whole_file(document);
    }
    if (!got.ok() || *got) {
      document.file_index = s.file_index;
      return got;
    }
    s.finished_files_bytes += s.lines ? s.lines->source_bytes_read() : s.parquet->bytes_read();
    s.finished_files_null_texts += s.parquet ? s.parquet->null_texts() : 0;
    s.lines.reset();
    s.parquet.reset();
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
  if (read_error) return lines->status();
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
  if (read_error) return lines->status();
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
  if (read_error) return lines->status();
  if (!any) return false;  // an empty file has no document
  // LineReader drops the '\n' ending each line; put back the one that ended the file, if any.
  if (lines->consumed() > document.text.size()) document.text += '\n';
  return true;
}

}  // namespace nanoforge
