// Fuzz target: `section.key=value` overrides (train/recipe.h apply_overrides), one per line of the input,
// as the command line gives them. An error names the override; an accepted set must survive the recipe's
// round trip through its resolved TOML.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/recipe_round_trip.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  for (size_t start = 0; start <= text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    overrides.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  Recipe recipe;
  const absl::Status applied = apply_overrides(recipe, overrides);
  fuzz::require_named(applied, "override");
  if (applied.ok()) fuzz::require_recipe_round_trip(recipe);
  return 0;
}
