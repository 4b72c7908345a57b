// read_run_records: metrics.jsonl read line by line with simdjson (a line that is not a record is skipped: a
// run still training may be mid-line), config.toml flattened to section.key with toml++. Every file is
// opened non-blocking and read only when it is a regular file (a pipe or device there would block or never
// end), within a bound; what of a run cannot be read is left out with a note, except metrics.jsonl, without
// which there is no run.
#include "cli/report/run_records.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <utility>

#include "support/status.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

// The longest metrics.jsonl line read: a sample record holds at most 4096 tokens of at most 1024 bytes
// (docs/untrusted-input.md), 6 bytes each when JSON-escaped: 24 MiB. Longer lines are skipped unread.
constexpr size_t kMaxRecordBytes = 32 << 20;
// config.toml (the resolved recipe, whose own limit is 1 MiB) and core.json (a score per CORE task).
constexpr int64_t kMaxSmallFileBytes = 1 << 20;

// A file opened for reading; closed when it goes.
struct OpenFile {
  int fd = -1;
  int64_t size_bytes = 0;
  OpenFile() = default;
  OpenFile(OpenFile&& other) noexcept : fd(std::exchange(other.fd, -1)), size_bytes(other.size_bytes) {}
  OpenFile& operator=(OpenFile&&) = delete;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

// `path` opened when it is a regular file (a link to one is followed); NotFound when nothing is there.
absl::StatusOr<OpenFile> open_regular_file(const std::string& path) {
  OpenFile file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (file.fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR)
      return absl::NotFoundError(fmt::format("{}: no such file", path));
    return absl::PermissionDeniedError(fmt::format("{}: cannot open: {}", path, std::strerror(error)));
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0)
    return absl::PermissionDeniedError(fmt::format("{}: cannot inspect: {}", path, std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(fmt::format("{} is {}, not a regular file", path,
                                                  S_ISFIFO(info.st_mode)  ? "a pipe"
                                                  : S_ISDIR(info.st_mode) ? "a directory"
                                                                          : "a device"));
  }
  file.size_bytes = info.st_size;
  return file;
}

// Reads up to `max_bytes` of `file` from where it is (less when the file ends first).
absl::StatusOr<std::string> read_up_to(const OpenFile& file, const std::string& path, size_t max_bytes) {
  std::string bytes;
  char chunk[1 << 16];
  while (bytes.size() < max_bytes) {
    const ssize_t got = ::read(file.fd, chunk, std::min(sizeof(chunk), max_bytes - bytes.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return absl::DataLossError(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    if (got == 0) break;
    bytes.append(chunk, static_cast<size_t>(got));
  }
  return bytes;
}

// A short text file whole (config.toml, core.json).
absl::StatusOr<std::string> read_small_file(const std::string& path) {
  NANOFORGE_ASSIGN_OR_RETURN(const OpenFile file, open_regular_file(path));
  if (file.size_bytes > kMaxSmallFileBytes) {
    return absl::InvalidArgumentError(fmt::format("{}: {} bytes, more than the {} this file is read up to",
                                                  path, file.size_bytes, kMaxSmallFileBytes));
  }
  return read_up_to(file, path, static_cast<size_t>(file.size_bytes));
}

// A run file the page can do without (config.toml, core.json): its text, counted among the run's files; none
// when it is absent, or unreadable (then a note says why).
std::optional<std::string> read_optional_run_file(const std::string& path, RunRecords& run) {
  absl::StatusOr<std::string> text = read_small_file(path);
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) run.notes.push_back(std::string(text.status().message()));
    return std::nullopt;
  }
  run.files.push_back(path);
  return std::move(*text);
}

// Calls `on_line` with each line of the file's first `size_bytes` (what it held when opened: a run may be
// appending); lines longer than kMaxRecordBytes are skipped without being held.
absl::Status for_each_line(const OpenFile& file, const std::string& path,
                           const std::function<void(const std::string&)>& on_line) {
  std::string line;
  bool overlong = false;
  for (int64_t left = file.size_bytes; left > 0;) {
    NANOFORGE_ASSIGN_OR_RETURN(const std::string chunk,
                               read_up_to(file, path, static_cast<size_t>(std::min<int64_t>(left, 1 << 20))));
    if (chunk.empty()) break;  // the file was shortened meanwhile
    left -= static_cast<int64_t>(chunk.size());
    for (std::string_view rest = chunk; !rest.empty();) {
      const size_t newline = rest.find('\n');
      const std::string_view piece = rest.substr(0, newline);
      overlong = overlong || line.size() + piece.size() > kMaxRecordBytes;
      if (overlong) {
        line.clear();
      } else {
        line.append(piece);
      }
      if (newline == std::string_view::npos) break;
      if (!overlong) on_line(line);
      line.clear();
      overlong = false;
      rest.remove_prefix(newline + 1);
    }
  }
  if (!overlong && !line.empty()) on_line(line);
  return absl::OkStatus();
}

std::optional<double> number_field(simdjson::dom::object& record, const char* key) {
  double value = 0;
  if (record[key].get_double().get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

std::string string_field(simdjson::dom::object& record, const char* key) {
  std::string_view text;
  if (record[key].get_string().get(text) != simdjson::SUCCESS) return "";
  return std::string(text);
}

std::optional<int64_t> integer_field(simdjson::dom::object& record, const char* key) {
  int64_t value = 0;
  if (record[key].get_int64().get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

// A re-formation record; one without its restart and world sizes is left out with a note.
void read_reformation(simdjson::dom::object& record, int64_t step, const std::string& path, RunRecords& run) {
  const std::optional<int64_t> restart = integer_field(record, "restart"),
                               before = integer_field(record, "previous_world_size"),
                               after = integer_field(record, "world_size");
  if (!restart || !before || !after) {
    run.notes.push_back(
        fmt::format("{}: the re-formation record at step {} has no whole restart, "
                    "previous_world_size and world_size",
                    path, step));
    return;
  }
  Reformation reformation{step,
                          string_field(record, "cause"),
                          *restart,
                          *before,
                          *after,
                          string_field(record, "nodes_left"),
                          string_field(record, "nodes_joined"),
                          number_field(record, "seconds_from_failure_to_resume"),
                          number_field(record, "seconds_redone"),
                          integer_field(record, "steps_redone")};
  if (reformation.cause != "join") reformation.cause = "failure";
  run.reformations.push_back(std::move(reformation));
}

void read_metrics_record(simdjson::dom::parser& parser, const std::string& line, const std::string& path,
                         RunRecords& run) {
  simdjson::dom::object record;
  int64_t step = 0;
  if (parser.parse(line).get_object().get(record) != simdjson::SUCCESS ||
      record["step"].get_int64().get(step) != simdjson::SUCCESS) {
    return;
  }
  const double x = static_cast<double>(step);
  std::string_view text;
  if (const auto loss = number_field(record, "loss")) {
    run.training.push_back({step, *loss, number_field(record, "lr_multiplier").value_or(NAN),
                            number_field(record, "grad_norm").value_or(NAN),
                            number_field(record, "tokens_per_s").value_or(NAN), number_field(record, "mfu"),
                            number_field(record, "step_ms"), number_field(record, "exposed_comm_ms"),
                            number_field(record, "data_wait_ms")});
  } else if (const auto bpb = number_field(record, "val_bpb")) {
    run.val_bpb.emplace_back(x, *bpb);
  } else if (const auto core = number_field(record, "core_metric")) {
    run.core.emplace_back(x, *core);
    run.core_tasks.clear();
    for (auto [key, value] : record) {
      double centred = 0;
      if (key.substr(0, 5) == "core/" && value.get_double().get(centred) == simdjson::SUCCESS)
        run.core_tasks[std::string(key.substr(5))] = centred;
    }
  } else if (const auto checkpoint = number_field(record, "checkpoint_ms")) {
    run.checkpoint_ms.emplace_back(x, *checkpoint);
  } else if (record["sample"].get_string().get(text) == simdjson::SUCCESS) {
    run.samples.emplace_back(step, std::string(text));
  } else if (string_field(record, "event") == "reformation") {
    read_reformation(record, step, path, run);
  }
}

// core.json from `nanoforge eval --core --out RUN/core.json` (make demo), when training logged no CORE.
void read_core_file(const std::string& path, RunRecords& run) {
  const std::optional<std::string> text = read_optional_run_file(path, run);
  if (!text) return;
  simdjson::dom::parser parser;
  simdjson::dom::object core;
  if (const auto error = parser.parse(*text).get_object().get(core); error != simdjson::SUCCESS) {
    run.notes.push_back(fmt::format("{}: not a JSON object: {}", path, simdjson::error_message(error)));
    return;
  }
  double metric = 0;
  int64_t step = 0;
  if (core["core_metric"].get_double().get(metric) != simdjson::SUCCESS ||
      core["step"].get_int64().get(step) != simdjson::SUCCESS) {
    return;
  }
  run.core.emplace_back(static_cast<double>(step), metric);
  simdjson::dom::object tasks;
  if (core["centered_results"].get_object().get(tasks) != simdjson::SUCCESS) return;
  for (auto [key, value] : tasks) {
    double centred = 0;
    if (value.get_double().get(centred) == simdjson::SUCCESS) run.core_tasks[std::string(key)] = centred;
  }
}

// A float as config.toml has it: the shortest text that reads back as the same double (as Python's repr and
// TOML writers print it), so 0.3 shows as 0.3, not as toml++'s 17 digits 0.29999999999999999.
std::string float_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string text = fmt::format("{}", value);                      // fmt's shortest round trip
  if (text.find_first_of(".e") == std::string::npos) text += ".0";  // a float stays one: 1.0, not 1
  return text;
}

// A config value as TOML text, its floats (alone or in arrays) by float_text.
std::string config_value_text(const toml::node& value) {
  if (const toml::value<double>* number = value.as_floating_point()) return float_text(number->get());
  if (const toml::array* array = value.as_array()) {
    std::vector<std::string> items;
    for (const toml::node& item : *array)
      items.push_back(config_value_text(item));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  std::ostringstream text;
  value.visit([&](const auto& leaf) { text << leaf; });
  return text.str();
}

void read_config(const std::string& path, RunRecords& run) {
  const std::optional<std::string> text = read_optional_run_file(path, run);
  if (!text) return;
  toml::table table;
  try {
    table = toml::parse(*text, path);
  } catch (const toml::parse_error& error) {
    run.notes.push_back(fmt::format("{}:{}:{}: not TOML: {}", path, error.source().begin.line,
                                    error.source().begin.column, error.description()));
    return;
  }
  for (const auto& [section, node] : table) {
    const toml::table* keys = node.as_table();
    if (keys == nullptr) continue;
    for (const auto& [key, value] : *keys)
      run.config.emplace_back(fmt::format("{}.{}", section.str(), key.str()), config_value_text(value));
  }
}

// A checkpoint's step from its directory's name, `step_` and digits only (not `step_000010.replaced-PID`).
std::optional<int64_t> checkpoint_step(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5) return std::nullopt;
  int64_t step = 0;
  const char* end = name.data() + name.size();
  const auto [stop, error] = std::from_chars(name.data() + 5, end, step);
  if (error != std::errc() || stop != end || step < 0) return std::nullopt;
  return step;
}

// The listing below goes through std::filesystem's error-code overloads only: the others throw (a looping
// link, a place that cannot be read), which ended the program.
void read_checkpoints(const std::string& run_dir, RunRecords& run) {
  const std::string root = run_dir + "/checkpoints";
  std::error_code error;
  fs::directory_iterator entry(root, error);
  if (error) {
    if (error != std::errc::no_such_file_or_directory && error != std::errc::not_a_directory)
      run.notes.push_back(fmt::format("{}: cannot list it: {}", root, error.message()));
    return;
  }
  for (; entry != fs::directory_iterator(); entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    const std::optional<int64_t> step = checkpoint_step(name);
    if (!step) continue;
    const fs::file_status status = entry->status(error);  // a link to a checkpoint is followed
    if (error) {
      run.notes.push_back(fmt::format("{}: {}", entry->path().string(), error.message()));
      error.clear();
      continue;
    }
    if (!fs::is_directory(status)) continue;
    RunRecords::Checkpoint checkpoint{name, *step, 0};
    fs::directory_iterator file(entry->path(), error);
    for (; file != fs::directory_iterator(); file.increment(error)) {
      std::error_code file_error;
      const fs::file_status file_status = file->status(file_error);
      const uintmax_t bytes =
          !file_error && fs::is_regular_file(file_status) ? file->file_size(file_error) : 0;
      if (file_error) {
        run.notes.push_back(
            fmt::format("{}, from its checkpoint's size: {}", file->path().string(), file_error.message()));
        continue;
      }
      checkpoint.bytes += static_cast<int64_t>(bytes);
      run.files.push_back(file->path().string());
    }
    if (error) {
      run.notes.push_back(fmt::format("{}: {}", entry->path().string(), error.message()));
      error.clear();
      continue;
    }
    run.checkpoints.push_back(checkpoint);
  }
  if (error)
    run.notes.push_back(fmt::format("{}: what its listing did not reach: {}", root, error.message()));
  std::sort(run.checkpoints.begin(), run.checkpoints.end(),
            [](const auto& a, const auto& b) { return a.step < b.step; });
}

}  // namespace

absl::StatusOr<RunRecords> read_run_records(const std::string& run_dir) {
  const std::string metrics = run_dir + "/metrics.jsonl";
  absl::StatusOr<OpenFile> metrics_file = open_regular_file(metrics);
  if (!metrics_file.ok()) {
    return absl::Status(metrics_file.status().code(),
                        fmt::format("{}: no metrics.jsonl to report on ({}); give run directories (nanoforge "
                                    "train --run-dir)",
                                    run_dir, std::string(metrics_file.status().message())));
  }
  RunRecords run;
  run.dir = run_dir;
  run.name = fs::path(run_dir).lexically_normal().filename().string();
  if (run.name.empty()) run.name = fs::path(run_dir).lexically_normal().parent_path().filename().string();
  run.files.push_back(metrics);
  simdjson::dom::parser parser;
  NANOFORGE_RETURN_IF_ERROR(for_each_line(*metrics_file, metrics, [&](const std::string& line) {
    read_metrics_record(parser, line, metrics, run);
  }));
  if (run.core.empty()) read_core_file(run_dir + "/core.json", run);
  read_config(run_dir + "/config.toml", run);
  read_checkpoints(run_dir, run);
  return run;
}

}  // namespace nanoforge
