// KernelSettings' one-line description (kernels/kernel_settings.h).
#include "kernels/kernel_settings.h"

#include <fmt/format.h>

namespace nanoforge::ops {

std::string KernelSettings::describe() const {
  return fmt::format("attention {}, mlp gemm {}, deterministic {}, fp8 {}",
                     attention_implementation_name(attention), mlp_gemm_name(mlp_gemm),
                     deterministic ? "on" : "off", fp8 ? "on" : "off");
}

}  // namespace nanoforge::ops
