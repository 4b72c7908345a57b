// MetricsLog and the JSON encoding of one record (numbers, and strings with JSON escapes).
#include "train/metrics_log.h"

#include <fmt/format.h>

#include <cmath>

#include "support/json_text.h"

namespace nanoforge {
namespace {

std::string json_value(const MetricValue& value) {
  if (const int64_t* integer = std::get_if<int64_t>(&value)) return std::to_string(*integer);
  if (const double* number = std::get_if<double>(&value)) {
    if (!std::isfinite(*number)) return "null";  // JSON has no NaN or infinity
    return fmt::format("{:.9g}", *number);
  }
  return json_string(std::get<std::string>(value));
}

}  // namespace

std::string metric_json(const MetricRecord& record) {
  std::string line = "{";
  for (size_t i = 0; i < record.size(); ++i) {
    line +=
        fmt::format("{}{}: {}", i ? ", " : "", json_string(record[i].first), json_value(record[i].second));
  }
  return line + "}";
}

absl::StatusOr<MetricsLog> MetricsLog::open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr)
    return absl::PermissionDeniedError(fmt::format("{}: cannot open the metrics file for writing", path));
  return MetricsLog(file, path);
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status MetricsLog::write(const MetricRecord& record) {
  const std::string line = metric_json(record) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    return absl::DataLossError(fmt::format("{}: cannot write metrics (disk full?)", path_));
  }
  return absl::OkStatus();
}

}  // namespace nanoforge
