// Fuzz target: a checkpoint's model.h5, the other files of the checkpoint valid. Read as `train --resume`
// reads it (every dataset verified, the weights loaded into the run's model) and as `sample`/`eval` do (the
// stored config, then a model of that config with its weights).
#include <cstddef>
#include <cstdint>

#include "step/memory_plan.h"
#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/manifest.h"

using namespace nanoforge;

namespace {

// Models the harness builds from a stored config. A config may claim any size; refusing one too large to
// allocate is the readers' job (bounded resources), and a model within these bounds takes microseconds.
bool small_enough_to_build(const GPTConfig& config) {
  return config.n_layer <= 4 && config.n_embd <= 256 && config.n_head <= 16 && config.vocab_size <= 4096 &&
         config.sequence_len <= 4096;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string checkpoint = fuzz::write_fixture_checkpoint(fuzz::scratch_path("run"), 2);
  fuzz::write_file(checkpoint + "/model.h5", data, size);
  // The manifest rewritten to match, as anyone can: its CRC-32s catch damage, not an attacker.
  fuzz::require(write_manifest(checkpoint, {"model.h5", "optimizer.h5", "trainer.h5"}).ok(), "manifest");
  fuzz::require_named(verify_checkpoint(checkpoint), "model.h5");
  fuzz::require_named(load_model_weights(checkpoint, fuzz::tiny_training().model), "model.h5");
  const absl::StatusOr<GPTConfig> config = read_checkpoint_config(checkpoint);
  fuzz::require_named(config.status(), "model.h5");
  if (config.ok() && small_enough_to_build(*config)) {
    GPT model(*config, Device::kCpu, training_dtype(Device::kCpu));
    fuzz::require_named(load_model_weights(checkpoint, model), "model.h5");
  }
  return 0;
}
