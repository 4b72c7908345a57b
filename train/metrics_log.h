// The run's metrics file (RUN/metrics.jsonl): one JSON object per line, appended and flushed as the run goes,
// so a crashed run keeps every line it printed. Floats are written with %.9g, which round-trips float32.
#pragma once

#include <absl/status/statusor.h>

#include <cstdio>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace nanoforge {

using MetricValue = std::variant<int64_t, double, std::string>;
using MetricRecord = std::vector<std::pair<std::string, MetricValue>>;

// One record as a JSON object on one line (no newline).
std::string metric_json(const MetricRecord& record);

class MetricsLog {
 public:
  // Opens PATH for appending (a resumed run continues the same file).
  static absl::StatusOr<MetricsLog> open(const std::string& path);
  MetricsLog(MetricsLog&& other) noexcept
      : file_(std::exchange(other.file_, nullptr)), path_(std::move(other.path_)) {}
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  ~MetricsLog();

  absl::Status write(const MetricRecord& record);

 private:
  MetricsLog(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  std::FILE* file_ = nullptr;
  std::string path_;
};

}  // namespace nanoforge
