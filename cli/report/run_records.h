// A run directory read back for `nanoforge report` (metrics.jsonl, config.toml, checkpoints/, core.json):
// what the page (cli/report/run_report.h) shows, and what of the directory was left out.
#pragma once

#include <absl/status/statusor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nanoforge {

struct TrainingPoint {
  int64_t step = 0;
  double loss = 0, lr_multiplier = 0, grad_norm = 0, tokens_per_s = 0;
  std::optional<double> mfu, step_ms, exposed_comm_ms, data_wait_ms;
};

// A round that `nanoforge launch` re-formed (train/reformation_record.h), at the step it resumed from.
struct Reformation {
  int64_t step = 0;
  std::string cause;  // "failure" (also in records written before the field was) or "join"
  int64_t restart = 0, previous_world_size = 0, world_size = 0;
  std::string nodes_left, nodes_joined;
  std::optional<double> seconds_to_resume, seconds_redone;  // from the failure (or the stop) to the resume
  std::optional<int64_t> steps_redone;
};

struct RunRecords {
  std::string name;  // the directory's name
  std::string dir;
  std::vector<TrainingPoint> training;
  std::vector<std::pair<double, double>> val_bpb, core, checkpoint_ms;  // (step, value)
  std::map<std::string, double> core_tasks;                             // the last CORE evaluation's
  std::vector<std::pair<int64_t, std::string>> samples;
  std::vector<Reformation> reformations;
  std::vector<std::pair<std::string, std::string>> config;  // "section.key" -> value as TOML
  struct Checkpoint {
    std::string name;
    int64_t step = 0, bytes = 0;
  };
  std::vector<Checkpoint> checkpoints;
  std::vector<std::string> files;  // every file of the run read or listed (an output must be none of them)
  std::vector<std::string> notes;  // what is left out, unreadable: "PATH: why" or "PATH is a pipe, ..."
};

// Reads what a run directory holds; an error when it has no metrics.jsonl it can read (not a run directory).
// Everything else is optional: a config.toml, core.json or checkpoint that cannot be read (not a regular
// file, too large, unreadable, a looping link, not TOML or JSON), or a re-formation record without its world
// sizes, is left out with a note in `notes`.
absl::StatusOr<RunRecords> read_run_records(const std::string& run_dir);

}  // namespace nanoforge
