// A whole tensor on the host under its dataset name in a checkpoint file ("/weights/lm_head.weight",
// "/state/lm_head.weight/exp_avg"): what snapshots hold and what the optimizer's state gathering produces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nanoforge {

struct NamedTensor {
  std::string dataset;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

}  // namespace nanoforge
