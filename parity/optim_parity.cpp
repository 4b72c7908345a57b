// Reading an optimizer golden file, replaying it through the data-parallel optimizer, writing the result.
#include "parity/optim_parity.h"

#include <fmt/format.h>

#include <algorithm>

#include "h5/file.h"
#include "kernels/host_transfer.h"
#include "model/gpt.h"
#include "model/gpt_config_file.h"
#include "optim/data_parallel_optimizer.h"
#include "parity/model_parity.h"
#include "support/status.h"

namespace nanoforge {
namespace {

absl::StatusOr<OptimGoldenGroup> read_group(const H5File& file, const std::string& group_path) {
  OptimGoldenGroup group;
  NANOFORGE_ASSIGN_OR_RETURN(group.kind, file.read_string_attribute(group_path, "kind"));
  NANOFORGE_ASSIGN_OR_RETURN(group.params, file.read_string_array_attribute(group_path, "params"));
  NANOFORGE_ASSIGN_OR_RETURN(group.initial_lr, file.read_float_attribute(group_path, "initial_lr"));
  NANOFORGE_ASSIGN_OR_RETURN(group.weight_decay, file.read_float_attribute(group_path, "weight_decay"));
  if (group.kind == "adamw") {
    NANOFORGE_ASSIGN_OR_RETURN(std::vector<double> betas,
                               file.read_float_array_attribute(group_path, "betas"));
    if (betas.size() != 2)
      return absl::InvalidArgumentError(
          fmt::format("{}: {} betas must be 2 values", file.path(), group_path));
    group.beta1 = betas[0];
    group.beta2 = betas[1];
    NANOFORGE_ASSIGN_OR_RETURN(group.eps, file.read_float_attribute(group_path, "eps"));
  } else if (group.kind == "muon") {
    NANOFORGE_ASSIGN_OR_RETURN(group.muon_beta2, file.read_float_attribute(group_path, "beta2"));
    NANOFORGE_ASSIGN_OR_RETURN(group.ns_steps, file.read_int_attribute(group_path, "ns_steps"));
  } else {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} has unknown kind '{}'", file.path(), group_path, group.kind));
  }
  return group;
}

absl::StatusOr<std::map<std::string, HostArray<float>>> read_tensors(const H5File& file,
                                                                     const std::string& group_path,
                                                                     const ParamLayout& layout) {
  std::map<std::string, HostArray<float>> tensors;
  for (const ParamInfo& param : layout.params()) {
    const std::string dataset = group_path + "/" + param.name;
    NANOFORGE_ASSIGN_OR_RETURN(HostArray<float> tensor, file.read<float>(dataset));
    if (tensor.shape != param.shape) {
      return absl::InvalidArgumentError(fmt::format("{}: {} has shape ({}), the config needs ({})",
                                                    file.path(), dataset, fmt::join(tensor.shape, ", "),
                                                    fmt::join(param.shape, ", ")));
    }
    tensors.emplace(param.name, std::move(tensor));
  }
  return tensors;
}

}  // namespace

absl::StatusOr<OptimGolden> read_optim_golden(const std::string& path) {
  NANOFORGE_ASSIGN_OR_RETURN(H5File file, H5File::open_read(path));
  OptimGolden golden;
  golden.path = path;
  NANOFORGE_ASSIGN_OR_RETURN(golden.config, read_gpt_config(file));
  const ParamLayout layout(golden.config);
  if (absl::StatusOr<std::string> ortho = file.read_string_attribute("/optim_config", "ortho_dtype");
      ortho.ok()) {
    golden.ortho_dtype = *ortho;
  }
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> group_names, file.members("/optim_config/groups"));
  for (const std::string& name : group_names) {
    NANOFORGE_ASSIGN_OR_RETURN(OptimGoldenGroup group, read_group(file, "/optim_config/groups/" + name));
    golden.groups.push_back(std::move(group));
  }
  NANOFORGE_ASSIGN_OR_RETURN(golden.weights_before, read_tensors(file, "/weights_before", layout));
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<std::string> step_names, file.members("/steps"));
  std::sort(step_names.begin(), step_names.end(),
            [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
  for (const std::string& name : step_names) {
    const std::string step_path = "/steps/" + name;
    OptimGoldenStep step;
    NANOFORGE_ASSIGN_OR_RETURN(step.iteration, file.read_int_attribute(step_path, "iteration"));
    NANOFORGE_ASSIGN_OR_RETURN(step.schedule.lr_multiplier,
                               file.read_float_attribute(step_path, "lr_multiplier"));
    NANOFORGE_ASSIGN_OR_RETURN(step.schedule.muon_momentum,
                               file.read_float_attribute(step_path, "muon_momentum"));
    NANOFORGE_ASSIGN_OR_RETURN(step.schedule.muon_weight_decay,
                               file.read_float_attribute(step_path, "muon_weight_decay"));
    NANOFORGE_ASSIGN_OR_RETURN(step.grads, read_tensors(file, step_path + "/grads", layout));
    golden.steps.push_back(std::move(step));
  }
  if (golden.steps.empty()) return absl::InvalidArgumentError(fmt::format("{}: /steps holds no steps", path));
  return golden;
}

absl::StatusOr<std::vector<ParamGroup>> golden_param_groups(const OptimGolden& golden,
                                                            const ParamLayout& layout) {
  std::vector<ParamGroup> groups =
      nanochat_param_groups(golden.config, layout, OptimizerHyperparameters{}, 1.0, 0.0);
  if (groups.size() != golden.groups.size()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} optimizer groups, nanoforge builds {} for this model", golden.path,
                    golden.groups.size(), groups.size()));
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    ParamGroup& group = groups[i];
    const OptimGoldenGroup& stored = golden.groups[i];
    std::vector<std::string> names;
    for (const ParamInfo* info : group.params)
      names.push_back(info->name);
    const bool same_kind = (group.kind == GroupKind::kMuon) == (stored.kind == "muon");
    if (!same_kind || names != stored.params) {
      return absl::InvalidArgumentError(
          fmt::format("{}: group {} holds [{}] ({}), nanoforge's group {} holds [{}]", golden.path, i,
                      fmt::join(stored.params, ", "), stored.kind, i, fmt::join(names, ", ")));
    }
    group.initial_lr = stored.initial_lr;
    group.weight_decay = stored.weight_decay;
    if (group.kind == GroupKind::kAdamW) {
      group.beta1 = stored.beta1;
      group.beta2 = stored.beta2;
      group.eps = stored.eps;
    } else {
      group.muon_beta2 = stored.muon_beta2;
      group.ns_steps = static_cast<int>(stored.ns_steps);
    }
  }
  return groups;
}

absl::StatusOr<std::vector<std::map<std::string, HostArray<float>>>> run_optim_parity(
    const OptimGolden& golden, Communicator& communicator, Device device) {
  // For its parameter and gradient buffers (f32 on either device).
  GPT model(golden.config, device, device == Device::kCuda ? DType::kBF16 : DType::kF32);
  NANOFORGE_ASSIGN_OR_RETURN(std::vector<ParamGroup> groups, golden_param_groups(golden, model.layout()));
  for (const auto& [name, weight] : golden.weights_before)
    upload(model.param(name), weight.values.data());
  // Training's default bucket size (dist.bucket_mb = 25): this small model's AdamW tensors share a bucket.
  DataParallelOptimizer optimizer(std::move(groups), model.layout(), model.params(), model.grads(),
                                  communicator, int64_t{25} << 20);
  std::vector<std::map<std::string, HostArray<float>>> results;
  for (const OptimGoldenStep& step : golden.steps) {
    for (const auto& [name, grad] : step.grads)
      upload(model.grad(name), grad.values.data());
    NANOFORGE_RETURN_IF_ERROR(optimizer.step(step.schedule));
    std::map<std::string, HostArray<float>> after;
    for (const ParamInfo& param : model.layout().params()) {
      after[param.name] = HostArray<float>{param.shape, download<float>(model.param(param.name))};
    }
    results.push_back(std::move(after));
  }
  return results;
}

absl::Status write_optim_result(const std::string& path,
                                const std::vector<std::map<std::string, HostArray<float>>>& weights_after) {
  return write_h5_atomically(path, [&](H5File& file) -> absl::Status {
    for (size_t k = 0; k < weights_after.size(); ++k) {
      for (const auto& [name, weight] : weights_after[k]) {
        NANOFORGE_RETURN_IF_ERROR(file.write(fmt::format("/steps/{}/weights_after/{}", k, name), weight));
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace nanoforge
