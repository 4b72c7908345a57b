// Where the committed parity files are (tests/parity/golden/, made from nanochat's own code by
// tools/dev/make_nanochat_goldens.py), and the optimizer goldens' model as base_train sized it: --depth=2
// --aspect-ratio=12 --head-dim=12 --max-seq-len=160 --window-pattern=SL with a 60-token vocabulary
// (optim_real_init.h5; the perturbed goldens change n_kv_head, which sizing does not reach).
#pragma once

#include <string>

#include "model/gpt_config.h"
#include "tests/test_paths.h"

namespace nanoforge::test {

inline std::string golden_path(const std::string& name) {
  return source_path("tests/parity/golden/") + name;
}

inline constexpr int64_t kGoldenVocab = 60;

inline ModelSizing golden_sizing() {
  return {.depth = 2, .aspect_ratio = 12, .head_dim = 12, .max_seq_len = 160, .window_pattern = "SL"};
}

inline GPTConfig golden_model() {
  return GPTConfig::from_sizing(golden_sizing(), kGoldenVocab);
}

}  // namespace nanoforge::test
