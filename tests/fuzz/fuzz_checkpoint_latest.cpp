// Fuzz target: a run's checkpoints/latest, next to one valid checkpoint. Whatever `latest` says, the readers
// answer with a path or an error naming `latest`, and resuming finds the valid checkpoint (falling back past
// whatever `latest` names).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/model_file.h"
#include "train/checkpoint/resume.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string run = fuzz::scratch_path("run");
  static const std::string checkpoint = fuzz::write_fixture_checkpoint(run, 2);
  fuzz::write_file(run + "/checkpoints/latest", data, size);
  fuzz::require_named(latest_checkpoint(run).status(), "latest");
  resolve_checkpoint(run).IgnoreError();
  std::vector<std::string> skipped;
  const absl::StatusOr<std::string> resumable = newest_valid_checkpoint(run, &skipped);
  fuzz::require(resumable.ok(), "a run with a valid checkpoint must be resumable whatever `latest` says");
  return 0;
}
