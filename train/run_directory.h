// Claiming a run directory for the run about to start. A new run (train without --resume) starts in a new or
// empty directory, or one holding only what nanoforge writes into a run directory: one that holds a run (a
// checkpoint, a trained step) is refused, so nothing of it is replaced or mixed; one that holds anything
// else (source files, another tool's output) is refused naming it; what a start that failed before its first
// step left (config.toml, step-0 evaluations) is replaced, saying so, since nothing in it is a run's.
#pragma once

#include <absl/status/statusor.h>

#include <string>

#include "train/run_dir_lock.h"

namespace nanoforge {

// For the process that writes `run_dir` (rank 0): refuses, for a new run (`new_run`), a directory holding a
// name nanoforge does not write, before anything is created in it; creates the directory and takes its lock
// (held until the returned lock is gone); refuses, for a new run, one that holds a run and replaces what a
// failed start left; removes what interrupted saves left; writes config.toml (`config_toml`). Prints what it
// took over, replaced or removed. Refusals: FailedPrecondition naming the first foreign entry, AlreadyExists
// naming what the run there holds and how to continue it; either changes nothing.
absl::StatusOr<RunDirLock> claim_run_directory(const std::string& run_dir, bool new_run,
                                               const std::string& config_toml);

}  // namespace nanoforge
