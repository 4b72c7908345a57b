// Fuzz target: a checkpoint's trainer.h5, the other files valid, read as `train --resume` reads it: every
// dataset verified, the trainer state, the saved recipe (parsed and compared with the run's), and the loader
// state restored into a loader over the fixture's shards.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/resume.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string checkpoint = fuzz::write_fixture_checkpoint(fuzz::scratch_path("run"), 2);
  fuzz::write_file(checkpoint + "/trainer.h5", data, size);
  // The manifest rewritten to match, as anyone can: its CRC-32s catch damage, not an attacker.
  fuzz::require(write_manifest(checkpoint, {"model.h5", "optimizer.h5", "trainer.h5"}).ok(), "manifest");
  fuzz::require_named(verify_checkpoint(checkpoint), "trainer.h5");
  const absl::StatusOr<TrainerState> state = read_trainer_state(checkpoint);
  fuzz::require_named(state.status(), "trainer.h5");
  if (!state.ok()) return 0;
  const absl::StatusOr<Recipe> saved = parse_recipe(state->recipe_toml, checkpoint + "/trainer.h5 recipe");
  fuzz::require_named(saved.status(), "trainer.h5");
  if (saved.ok()) resume_changes(*saved, fuzz::tiny_recipe()).IgnoreError();
  const absl::StatusOr<LoaderState> loader_state = LoaderState::from_bytes(state->loader_state);
  if (!loader_state.ok()) return 0;
  absl::StatusOr<std::unique_ptr<Loader>> loader =
      Loader::create(fuzz::fixture_shard_set(), fuzz::fixture_loader_options(), &*loader_state);
  if (loader.ok()) (*loader)->next().IgnoreError();
  return 0;
}
