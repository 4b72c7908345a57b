// The ranks' agreement on the resumed checkpoint: each rank's choice travels as one number (its step + 1, 0
// for a fresh start, -1 for a rank that could not choose), three ranks per all-reduce, so every rank holds
// the same table and words the same refusal.
#include "train/checkpoint/agreement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "support/status.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/resume.h"

namespace nanoforge {
namespace {

using Scalars = std::array<double, 3>;  // what one all-reduce of sum_over_ranks carries

constexpr double kCouldNotChoose = -1, kFreshStart = 0;

double choice_code(const ResumeChoice& choice) {
  if (!choice.local_error.ok()) return kCouldNotChoose;
  return choice.checkpoint.empty() ? kFreshStart : static_cast<double>(choice.step + 1);
}

// What a rank with this code would do: "resumes step 8".
std::string describe(double code) {
  if (code == kCouldNotChoose) return "could not choose a checkpoint (that rank prints its own error)";
  if (code == kFreshStart) return "found no checkpoint in its run directory (it would start from step 0)";
  return fmt::format("resumes step {}", static_cast<int64_t>(code) - 1);
}

// "rank 3", "ranks 1-3", "ranks 1, 4-5".
std::string name_ranks(const std::vector<int64_t>& ranks) {
  std::vector<std::string> spans;
  for (size_t first = 0; first < ranks.size();) {
    size_t last = first;
    while (last + 1 < ranks.size() && ranks[last + 1] == ranks[last] + 1)
      ++last;
    spans.push_back(last == first ? fmt::format("{}", ranks[first])
                                  : fmt::format("{}-{}", ranks[first], ranks[last]));
    first = last + 1;
  }
  return fmt::format("rank{} {}", ranks.size() > 1 ? "s" : "", fmt::join(spans, ", "));
}

}  // namespace

ResumeChoice choose_resume_checkpoint(const std::string& run_dir, const std::string& resume_from,
                                      bool chief) {
  ResumeChoice choice;
  if (!resume_from.empty()) {
    // The checkpoint the user named: verified, and never silently replaced by another.
    if (absl::Status valid = verify_checkpoint(resume_from); !valid.ok()) {
      choice.local_error = absl::Status(
          valid.code(), fmt::format("--resume-from {}: {}", resume_from, std::string(valid.message())));
      return choice;
    }
    choice.checkpoint = resume_from;
  } else {
    if (chief) fmt::print("resume: verifying the newest checkpoint of {}\n", run_dir);
    std::fflush(stdout);
    std::vector<std::string> skipped;
    absl::StatusOr<std::string> chosen = newest_valid_checkpoint(run_dir, &skipped);
    // None written (killed before its first checkpoint; a requeued job resumes blindly): a fresh start.
    if (absl::IsNotFound(chosen.status())) return choice;
    // Another rank's run directory is its own when the machines share no filesystem: its damage is listed too
    // when it leaves that rank without a checkpoint.
    for (const std::string& problem : skipped) {
      if (chief || !chosen.ok()) fmt::print("resume: skipping damaged checkpoint {}\n", problem);
    }
    if (!chosen.ok()) {
      choice.local_error = chosen.status();
      return choice;
    }
    choice.checkpoint = *chosen;
  }
  absl::StatusOr<TrainerState> state = read_trainer_state(choice.checkpoint);
  if (state.ok()) {
    choice.step = state->step;
  } else {
    choice.local_error = state.status();
  }
  return choice;
}

absl::Status agree_on_resume_checkpoint(const ResumeChoice& choice, const std::string& run_dir,
                                        const std::string& resume_from, int64_t rank, int64_t world_size,
                                        const SumOverRanks& sum_over_ranks) {
  if (world_size == 1) return choice.local_error;
  std::vector<double> codes(static_cast<size_t>(world_size));
  for (int64_t first = 0; first < world_size; first += 3) {
    Scalars values{};
    if (rank >= first && rank < first + 3) values[static_cast<size_t>(rank - first)] = choice_code(choice);
    NANOFORGE_ASSIGN_OR_RETURN(const Scalars summed, sum_over_ranks(values));
    for (int64_t r = first; r < std::min(first + 3, world_size); ++r)
      codes[static_cast<size_t>(r)] = summed[static_cast<size_t>(r - first)];
  }
  const double chief_code = codes[0];
  std::map<double, std::vector<int64_t>> differing;  // by what they found
  for (int64_t r = 1; r < world_size; ++r) {
    if (codes[static_cast<size_t>(r)] != chief_code || chief_code == kCouldNotChoose)
      differing[codes[static_cast<size_t>(r)]].push_back(r);
  }
  if (differing.empty() && chief_code != kCouldNotChoose) return absl::OkStatus();

  std::string chief_does = describe(chief_code);
  // Where rank 0 has a checkpoint, every rank needs that one; otherwise the user picks which to share.
  std::string fix =
      "every rank reads the same checkpoint at the same path: put the run directory on a filesystem all "
      "machines share, or copy the checkpoints/ to resume from to the same path on each machine, then resume "
      "again";
  if (chief_code > kFreshStart) {
    const int64_t step = static_cast<int64_t>(chief_code) - 1;
    const std::string chief_checkpoint = !resume_from.empty() ? resume_from
                                         : rank == 0
                                             ? choice.checkpoint
                                             : fmt::format("{}/checkpoints/step_{:06d}", run_dir, step);
    chief_does += fmt::format(" ({})", chief_checkpoint);
    fix = fmt::format(
        "every rank reads {} at the same path: put the run directory on a filesystem all machines share, or "
        "copy rank 0's checkpoints/ to the same path on each machine, then resume again",
        chief_checkpoint);
  }
  std::vector<std::string> others;
  for (const auto& [code, ranks] : differing)
    others.push_back(fmt::format("{} {}", name_ranks(ranks), describe(code)));
  const std::string refusal = fmt::format(
      "resume: the ranks did not choose the same checkpoint, so none trains: rank 0 {}{}{}. Fix: {}",
      chief_does, others.empty() ? "" : "; ", fmt::join(others, "; "), fix);
  if (!choice.local_error.ok()) {
    return absl::Status(
        choice.local_error.code(),
        fmt::format("rank {}: {}\n{}", rank, std::string(choice.local_error.message()), refusal));
  }
  return absl::FailedPreconditionError(refusal);
}

}  // namespace nanoforge
