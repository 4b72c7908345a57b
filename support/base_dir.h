// Where nanoforge's data lives when a command or a recipe names no path: $NANOFORGE_BASE_DIR, or
// $HOME/.cache/nanoforge when that is unset or empty (nanochat keeps its data in ~/.cache/nanochat). The
// tokenizer goes to BASE/tokenizer and the shards to BASE/shards: outside any source tree, so that a command
// pasted from the README never writes beside nanoforge's own files.
#pragma once

#include <absl/status/statusor.h>

#include <string>

namespace nanoforge {

inline constexpr char kBaseDirVariable[] = "NANOFORGE_BASE_DIR";
// The defaults as help texts show them.
inline constexpr char kDefaultTokenizerDirText[] = "$NANOFORGE_BASE_DIR/tokenizer";
inline constexpr char kDefaultShardsDirText[] = "$NANOFORGE_BASE_DIR/shards";

// $NANOFORGE_BASE_DIR, else $HOME/.cache/nanoforge; FailedPrecondition naming both variables when neither
// is set.
absl::StatusOr<std::string> base_dir();
// BASE/tokenizer: `tokenizer train --out`, `prep --tokenizer` and the recipe's data.tokenizer.
absl::StatusOr<std::string> default_tokenizer_dir();
// BASE/shards: `prep --out` and the recipe's data.train and data.val.
absl::StatusOr<std::string> default_shards_dir();

}  // namespace nanoforge
