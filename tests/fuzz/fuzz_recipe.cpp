// Fuzz target: a recipe file (train/recipe.h), read from disk as `--recipe` does. An accepted recipe must
// survive the round trip through its resolved TOML. Seeds: the recipes in recipes/ and a resolved one.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/recipe_round_trip.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_path("recipe.toml");
  fuzz::write_file(path, data, size);
  const absl::StatusOr<Recipe> recipe = read_recipe(path);
  fuzz::require_named(recipe.status(), path);
  if (recipe.ok()) fuzz::require_recipe_round_trip(*recipe);
  return 0;
}
