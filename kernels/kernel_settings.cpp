// KernelSettings' one-line description (kernels/kernel_settings.h).
#include "kernels/kernel_settings.h"

#include <fmt/format.h>

namespace nanoforge::ops {

std::string KernelSettings::describe() const {
  return fmt::format("attention {}, mlp gemm {}, deterministic {}", attention_implementation_name(attention),
                     mlp_gemm_name(mlp_gemm), deterministic ? "on" : "off");
}

}  // namespace nanoforge::ops
