// Fuzz target: loader-state bytes (data/loader/loader_state.h, the /loader_state of trainer.h5), decoded,
// re-encoded (the decoded state must survive its own round trip), then restored into a loader over the
// fixture's shards, which checks the state against the data and, when it accepts it, produces batches from
// it. Seeds: states of that loader after 0, 2 and 5 batches.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::StatusOr<LoaderState> state = LoaderState::from_bytes({data, size});
  fuzz::require_named(state.status(), "loader state");
  if (!state.ok()) return 0;
  const absl::StatusOr<LoaderState> again = LoaderState::from_bytes(state->to_bytes());
  fuzz::require(again.ok() && *again == *state, "a decoded loader state survives its round trip");
  absl::StatusOr<std::unique_ptr<Loader>> loader =
      Loader::create(fuzz::fixture_shard_set(), fuzz::fixture_loader_options(), &*state);
  fuzz::require_named(loader.status(), "loader state");
  if (!loader.ok()) return 0;
  for (int b = 0; b < 2; ++b) {
    if (!(*loader)->next().ok()) break;
  }
  return 0;
}
