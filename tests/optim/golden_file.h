// Where the optimizer goldens are (../shared/parity beside the clone), and the golden's model: depth 2 with
// head dim 64, built by base_train with --aspect-ratio=64 --head-dim=64 --max-seq-len=160
// --window-pattern=SL.
#pragma once

#include <filesystem>
#include <string>

#include "model/gpt_config.h"

namespace nanoforge::test {

inline std::string golden_path(const std::string& name) {
  return std::string(NANOFORGE_PARITY_DIR) + "/" + name;
}

inline GPTConfig golden_model() {
  return GPTConfig::from_depth(2, 300, 160, "SL", 64, 64);
}

}  // namespace nanoforge::test
