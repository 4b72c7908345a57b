// read_gpt_config / write_gpt_config over one table of the integer fields.
#include "model/gpt_config_file.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "support/status.h"

namespace nanoforge {
namespace {

constexpr char kGroup[] = "/config";

// The integer fields of a config, by attribute name.
template <class Config, class Field>
std::array<std::pair<const char*, Field*>, 6> integer_fields(Config& config) {
  return {{{"sequence_len", &config.sequence_len},
           {"vocab_size", &config.vocab_size},
           {"n_layer", &config.n_layer},
           {"n_head", &config.n_head},
           {"n_kv_head", &config.n_kv_head},
           {"n_embd", &config.n_embd}}};
}

}  // namespace

absl::StatusOr<GPTConfig> read_gpt_config(const H5File& file) {
  GPTConfig config;
  for (const auto& [name, field] : integer_fields<GPTConfig, int64_t>(config)) {
    NANOFORGE_ASSIGN_OR_RETURN(*field, file.read_int_attribute(kGroup, name));
  }
  NANOFORGE_ASSIGN_OR_RETURN(config.window_pattern, file.read_string_attribute(kGroup, "window_pattern"));
  if (const absl::Status valid = config.validate(); !valid.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}: {}", file.path(), kGroup, std::string(valid.message())));
  }
  return config;
}

absl::Status write_gpt_config(H5File& file, const GPTConfig& config) {
  NANOFORGE_RETURN_IF_ERROR(file.create_group(kGroup));
  for (const auto& [name, field] : integer_fields<const GPTConfig, const int64_t>(config))
    NANOFORGE_RETURN_IF_ERROR(file.write_int_attribute(kGroup, name, *field));
  return file.write_string_attribute(kGroup, "window_pattern", config.window_pattern);
}

}  // namespace nanoforge
