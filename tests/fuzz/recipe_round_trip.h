// The property both recipe targets check on an accepted recipe: its resolved TOML (what a run writes as
// config.toml and trainer.h5 keeps) parses back to the same settings.
#pragma once

#include <fmt/format.h>

#include "tests/fuzz/fuzz_support.h"
#include "train/recipe.h"

namespace nanoforge::fuzz {

inline void require_recipe_round_trip(const Recipe& recipe) {
  const absl::StatusOr<Recipe> again = parse_recipe(recipe_to_toml(recipe), "config.toml");
  require_named(again.status(), "config.toml");
  require(again.ok(), "the resolved recipe parses");
  const std::vector<RecipeKey> before = recipe_keys(recipe), after = recipe_keys(*again);
  for (size_t i = 0; i < before.size(); ++i) {
    require(before[i].value == after[i].value, fmt::format("{} is {} and {} after a round trip",
                                                           before[i].name, before[i].value, after[i].value));
  }
}

}  // namespace nanoforge::fuzz
