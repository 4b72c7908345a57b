// Fuzz target: a checkpoint's manifest.txt, the checkpoint's files valid, checked as `train --resume`, eval
// and sample check it before libhdf5 opens anything. Every error must name the manifest or the file it
// disagrees with; a manifest that passes must describe the files as they are (the writer's own manifest).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/manifest.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string checkpoint = fuzz::write_fixture_checkpoint(fuzz::scratch_path("run"), 2);
  static const std::string written = fuzz::read_file(checkpoint + "/manifest.txt");
  fuzz::write_file(checkpoint + "/manifest.txt", data, size);
  const absl::Status status = verify_manifest(checkpoint, {"model.h5", "optimizer.h5", "trainer.h5"});
  fuzz::require_named(status, checkpoint + "/");
  fuzz::require_named(verify_checkpoint(checkpoint), checkpoint + "/");
  fuzz::write_file(checkpoint + "/manifest.txt", written);
  return 0;
}
