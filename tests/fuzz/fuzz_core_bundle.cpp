// Fuzz target: a CORE eval bundle (eval/core/core_bundle.h). The input is three files separated by NUL
// bytes: core.yaml, eval_meta_data.csv and eval_data/task.jsonl (the one task file a mutated core.yaml can
// name and find). Read as `eval --core` reads it, up front; every error must name a file of the bundle.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "eval/core/core_bundle.h"
#include "tests/fuzz/fuzz_support.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = fuzz::scratch_path("core_bundle");
  static const std::string files[3] = {fuzz::scratch_path("core_bundle/core.yaml"),
                                       fuzz::scratch_path("core_bundle/eval_meta_data.csv"),
                                       fuzz::scratch_path("core_bundle/eval_data/task.jsonl")};
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int i = 0; i < 3; ++i) {
    const size_t end = i < 2 ? rest.find('\0') : std::string_view::npos;
    fuzz::write_file(files[i], rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  const absl::StatusOr<CoreBundle> bundle = CoreBundle::read(dir);
  fuzz::require_named(bundle.status(), dir);
  return 0;
}
