// Parity case reading, running and result writing.
#include "parity/model_parity.h"

#include <fmt/format.h>

#include "h5/file.h"
#include "kernels/host_transfer.h"
#include "model/gpt.h"
#include "model/gpt_config_file.h"
#include "support/status.h"

namespace nanoforge {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("({})", fmt::join(shape, ", "));
}

absl::Status check_range(const H5File& file, const char* dataset, const HostArray<int64_t>& values,
                         int64_t low, int64_t high) {
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (values.values[i] < low || values.values[i] >= high) {
      return absl::InvalidArgumentError(fmt::format("{}: {}[{}] = {} is outside [{}, {})", file.path(),
                                                    dataset, i, values.values[i], low, high));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParityCase> read_parity_case(const std::string& path) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(path));
  ParityCase result;
  result.path = path;
  NANOFORGE_ASSIGN_OR_RETURN(result.config, read_gpt_config(file));
  const absl::StatusOr<int64_t> fp8 = file.read_int_attribute("/config", "fp8");
  if (!fp8.ok() && !absl::IsNotFound(fp8.status())) return fp8.status();
  if (fp8.ok() && *fp8 != 0 && *fp8 != 1) {
    return absl::InvalidArgumentError(
        fmt::format("{}: /config attribute fp8 is {}; it must be 0 or 1 (nanochat's --fp8)", path, *fp8));
  }
  result.fp8 = fp8.ok() && *fp8 == 1;
  const ParamLayout layout(result.config);

  for (const ParamInfo& param : layout.params()) {
    const std::string dataset = "/weights/" + param.name;
    NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> weight, file.read<float>(dataset));
    if (weight.shape != param.shape) {
      return absl::InvalidArgumentError(fmt::format("{}: {} has shape {}, but the config needs {}", path,
                                                    dataset, shape_text(weight.shape),
                                                    shape_text(param.shape)));
    }
    result.weights.emplace(param.name, std::move(weight));
  }
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> stored, file.members("/weights"));
  for (const std::string& name : stored) {
    if (layout.find(name) == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("{}: /weights/{} is not a parameter of the model in /config ({})", path, name,
                      result.config.describe()));
    }
  }

  NANOFORGE_ASSIGN_OR_RETURN(result.idx, file.read<int64_t>("/inputs/idx"));
  NANOFORGE_ASSIGN_OR_RETURN(result.targets, file.read<int64_t>("/inputs/targets"));
  if (result.idx.shape.size() != 2 || result.idx.shape[1] < 2 ||
      result.idx.shape[1] > result.config.sequence_len) {
    return absl::InvalidArgumentError(
        fmt::format("{}: /inputs/idx has shape {}; expected (B, T) with 2 <= T <= {}", path,
                    shape_text(result.idx.shape), result.config.sequence_len));
  }
  if (result.targets.shape != result.idx.shape) {
    return absl::InvalidArgumentError(fmt::format("{}: /inputs/targets has shape {}, /inputs/idx has {}",
                                                  path, shape_text(result.targets.shape),
                                                  shape_text(result.idx.shape)));
  }
  NANOFORGE_RETURN_IF_ERROR(check_range(file, "/inputs/idx", result.idx, 0, result.config.vocab_size));
  NANOFORGE_RETURN_IF_ERROR(
      check_range(file, "/inputs/targets", result.targets, -1, result.config.vocab_size));
  return result;
}

ParityResult run_parity(const ParityCase& parity_case, DType dtype) {
  const GPTConfig& config = parity_case.config;
  GPT model(config, Device::kCpu, dtype);
  ops::KernelSettings settings;  // the CPU backend reads only fp8 of these
  settings.fp8 = parity_case.fp8;
  model.set_kernel_settings(settings);
  for (const auto& [name, weight] : parity_case.weights)
    upload(model.param(name), weight.values.data());
  const int64_t batch = parity_case.idx.shape[0], seq = parity_case.idx.shape[1];
  model.plan(batch, seq);

  std::vector<int32_t> ids(parity_case.idx.values.begin(), parity_case.idx.values.end());
  std::vector<int32_t> targets(parity_case.targets.values.begin(), parity_case.targets.values.end());
  const TensorView ids_view(ids.data(), {batch, seq}, DType::kI32, Device::kCpu);
  const TensorView targets_view(targets.data(), {batch, seq}, DType::kI32, Device::kCpu);

  ParityResult result;
  model.zero_grad();
  result.loss = model.forward(ids_view, targets_view);
  result.logits.shape = {batch, seq, config.vocab_size};
  result.logits.values = model.capped_logits(0, batch * seq);  // nanochat's logits are the capped ones
  // The gradients: the same forward again, with the loss's gradient written over the logits.
  model.forward_for_backward(ids_view, targets_view);
  model.backward();
  for (const ParamInfo& param : model.layout().params()) {
    HostArray<float> grad;
    grad.shape = param.shape;
    grad.values = download<float>(model.grad(param.name));
    result.grads.emplace(param.name, std::move(grad));
  }
  return result;
}

absl::Status write_parity_result(const std::string& path, const ParityResult& result) {
  return write_h5_atomically(path, [&](H5File& file) -> absl::Status {
    const float loss = static_cast<float>(result.loss);
    NANOFORGE_RETURN_IF_ERROR(file.write("/loss", {}, &loss));
    NANOFORGE_RETURN_IF_ERROR(file.write("/logits", result.logits));
    for (const auto& [name, grad] : result.grads)
      NANOFORGE_RETURN_IF_ERROR(file.write("/grads/" + name, grad));
    return absl::OkStatus();
  });
}

}  // namespace nanoforge
