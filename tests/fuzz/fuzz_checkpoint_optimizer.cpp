// Fuzz target: a checkpoint's optimizer.h5, the other files valid, read as `train --resume` reads it: every
// dataset verified, the step count, then every state tensor loaded into the run's optimizer.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/manifest.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string checkpoint = fuzz::write_fixture_checkpoint(fuzz::scratch_path("run"), 2);
  fuzz::write_file(checkpoint + "/optimizer.h5", data, size);
  // The manifest rewritten to match, as anyone can: its CRC-32s catch damage, not an attacker.
  fuzz::require(write_manifest(checkpoint, {"model.h5", "optimizer.h5", "trainer.h5"}).ok(), "manifest");
  fuzz::require_named(verify_checkpoint(checkpoint), "optimizer.h5");
  const absl::StatusOr<int64_t> steps = read_optimizer_steps(checkpoint);
  fuzz::require_named(steps.status(), "optimizer.h5");
  if (!steps.ok()) return 0;
  const absl::Status loaded = fuzz::tiny_training().optimizer.load_state(
      [&](const std::string& dataset, int64_t numel) {
        return read_optimizer_tensor(checkpoint, dataset, numel);
      },
      *steps);
  fuzz::require_named(loaded, "optimizer.h5");
  return 0;
}
