// Which checkpoint a resumed run starts from, agreed by every rank before any of them loads one. Rank 0 alone
// writes the run directory, but each rank reads the checkpoint at its own --run-dir: without a filesystem the
// machines share, one rank may find step 8 where another finds nothing and starts from step 0, and the two
// would train on together, silently. So every rank chooses on its own, then all learn each other's choice
// (a few scalar all-reduces) and all refuse, with the same message, unless every rank chose rank 0's.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>

namespace nanoforge {

// What one rank would resume from, before the ranks agree.
struct ResumeChoice {
  std::string checkpoint;    // empty: a fresh start
  int64_t step = 0;          // the checkpoint's step (trainer.h5)
  absl::Status local_error;  // this rank could not choose (every checkpoint damaged, a bad --resume-from)
};

// This rank's choice for --resume (the newest checkpoint of RUN that verifies; none written: a fresh start)
// or --resume-from CHECKPOINT (verified). The chief prints what it verifies and the damaged checkpoints it
// passes over.
ResumeChoice choose_resume_checkpoint(const std::string& run_dir, const std::string& resume_from, bool chief);

// Sums three scalars over all ranks (the trainer's all-reduce); its error is a lost rank's.
using SumOverRanks = std::function<absl::StatusOr<std::array<double, 3>>(std::array<double, 3>)>;

// Every rank calls this with its own choice (world size 1: returns at once). OK when every rank chose rank
// 0's checkpoint (or every rank starts fresh); otherwise every rank returns an error — a rank with a local
// error its own, after taking part in the rounds — that says what rank 0 resumes, which ranks differ and what
// they found, and how to make every rank read the same checkpoint.
absl::Status agree_on_resume_checkpoint(const ResumeChoice& choice, const std::string& run_dir,
                                        const std::string& resume_from, int64_t rank, int64_t world_size,
                                        const SumOverRanks& sum_over_ranks);

}  // namespace nanoforge
