// The recipe schema (one table binding TOML keys to Recipe fields) and the parsing, override and printing
// built on it, with toml++.
#include "train/recipe.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <variant>

#include "step/kernel_choice.h"
#include "support/base_dir.h"
#include "support/status.h"

namespace nanoforge {
namespace {

using FieldRef = std::variant<int64_t*, double*, std::string*, bool*>;

struct Field {
  const char* section;
  const char* key;
  FieldRef ref;
  const char* help;
};

// The schema. Recipe is non-const so the same table reads and writes.
std::vector<Field> fields_of(Recipe& r) {
  return {
      {"model", "depth", &r.model.depth, "transformer blocks; width and heads follow nanochat's sizing"},
      {"model", "aspect_ratio", &r.model.aspect_ratio,
       "model dim = depth * aspect_ratio, rounded up to head_dim"},
      {"model", "head_dim", &r.model.head_dim, "attention head dimension"},
      {"model", "max_seq_len", &r.model.max_seq_len, "sequence length T of every training row"},
      {"model", "window_pattern", &r.model.window_pattern,
       "attention windows per layer (S short, L long), tiled"},
      {"model", "init_from", &r.model.init_from,
       "start from these weights (model.h5, a checkpoint or run directory) instead of the seeded init"},
      {"model", "attention", &r.model.attention,
       "GPU attention kernels: auto (cuDNN's where built and supported, else flash), cudnn or flash"},
      {"model", "mlp_gemm", &r.model.mlp_gemm,
       "GPU MLP GEMMs: auto (fused on a GB10, else cublaslt), cublaslt (and a ReLU² pass) or fused (ours, "
       "ReLU² in the epilogue)"},
      {"model", "fp8", &r.model.fp8,
       "FP8 training as nanochat's --fp8: tensorwise-scaled e4m3/e5m2 GEMMs in every Linear with both sides "
       "divisible by 16 and the smaller >= 128 (GPUs of compute capability 8.9+; evaluation stays bf16)"},
      {"model", "fp8_recipe", &r.model.fp8_recipe, "FP8 scaling: tensorwise (rowwise is not implemented)"},
      {"data", "train", &r.data.train,
       "training shards: a directory of shard files, or one file (unset: $NANOFORGE_BASE_DIR/shards)"},
      {"data", "val", &r.data.val,
       "validation shards: a directory or one file (unset: $NANOFORGE_BASE_DIR/shards)"},
      {"data", "tokenizer", &r.data.tokenizer,
       "tokenizer directory, tokenizer train's --out (unset: $NANOFORGE_BASE_DIR/tokenizer)"},
      {"train", "device_batch_size", &r.train.device_batch_size, "rows per micro-batch per device"},
      {"train", "total_batch_size", &r.train.horizon.total_batch_size,
       "tokens per optimizer step; -1: nanochat's power law"},
      {"train", "num_iterations", &r.train.horizon.num_iterations,
       "optimizer steps; -1: from target_flops or the data ratio"},
      {"train", "target_flops", &r.train.horizon.target_flops,
       "training FLOPs budget for the horizon; -1: unused"},
      {"train", "target_param_data_ratio", &r.train.horizon.target_param_data_ratio,
       "tokens per scaling parameter"},
      {"train", "seed", &r.train.seed, "init and data-order seed"},
      {"train", "warmup_steps", &r.train.schedule.warmup_steps, "linear LR warmup steps"},
      {"train", "warmdown_ratio", &r.train.schedule.warmdown_ratio,
       "fraction of the run spent in the LR warmdown"},
      {"train", "final_lr_frac", &r.train.schedule.final_lr_frac, "LR multiplier at the end of the warmdown"},
      {"train", "eval_every", &r.train.eval_every,
       "steps between validation bits-per-byte evaluations; -1: never"},
      {"train", "eval_tokens", &r.train.eval_tokens, "validation tokens per evaluation"},
      {"train", "sample_every", &r.train.sample_every, "steps between samples; -1: never"},
      {"train", "sample_tokens", &r.train.sample_tokens, "tokens generated per sample prompt"},
      {"train", "core_every", &r.train.core.every,
       "steps between CORE evaluations (and at the end) when train.core_bundle is set; -1: never"},
      {"train", "core_bundle", &r.train.core.bundle,
       "nanochat's CORE eval bundle (core.yaml, eval_meta_data.csv, eval_data/); empty: no CORE"},
      {"train", "core_max_per_task", &r.train.core.max_per_task,
       "CORE examples per task during training (nanochat's 500); -1: all"},
      {"train", "device", &r.train.device, "auto, cpu or cuda"},
      {"train", "threads", &r.train.threads, "CPU threads (0: all cores)"},
      {"train", "deterministic", &r.train.deterministic,
       "GPU: fixed-order reductions instead of atomics, so a run repeats bit for bit (slower)"},
      {"optim", "unembedding_lr", &r.optim.unembedding_lr, "AdamW lr of lm_head (before scaling)"},
      {"optim", "embedding_lr", &r.optim.embedding_lr, "AdamW lr of the embeddings (before scaling)"},
      {"optim", "scalar_lr", &r.optim.scalar_lr, "AdamW lr of the residual scalars (before scaling)"},
      {"optim", "matrix_lr", &r.optim.matrix_lr, "Muon lr of the block matrices (before scaling)"},
      {"optim", "weight_decay", &r.optim.weight_decay, "Muon weight decay (before horizon scaling)"},
      {"checkpoint", "every", &r.checkpoint.every, "steps between checkpoints; -1: only at the end"},
      {"checkpoint", "keep_last", &r.checkpoint.keep_last, "keep the newest K checkpoints (-1: all)"},
      {"checkpoint", "keep_every", &r.checkpoint.keep_every,
       "also keep every checkpoint whose step is a multiple of M"},
      {"dist", "timeout_seconds", &r.dist.timeout_seconds,
       "how long a rank waits for the others before failing"},
      {"dist", "bucket_mb", &r.dist.bucket_mb,
       "MB of gradients per reduction bucket: smaller starts communication sooner, larger has less overhead"},
      {"log", "wandb_project", &r.log.wandb_project,
       "Weights & Biases project the run's metrics go to (rank 0's sidecar); empty: no W&B"},
      {"log", "wandb_run", &r.log.wandb_run, "W&B run name; empty: the run directory's name"},
      {"log", "wandb_mode", &r.log.wandb_mode,
       "W&B mode: online, offline (wandb sync later) or disabled; the WANDB_MODE environment variable wins"},
      {"log", "tensorboard", &r.log.tensorboard, "write TensorBoard event files under RUN_DIR/tensorboard/"},
  };
}

const char* type_name(const FieldRef& ref) {
  return std::visit(
      [](auto* p) -> const char* {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t>) return "integer";
        if constexpr (std::is_same_v<T, double>) return "float";
        if constexpr (std::is_same_v<T, bool>) return "boolean";
        return "string";
      },
      ref);
}

std::string toml_value(const FieldRef& ref) {
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(*p);
        } else if constexpr (std::is_same_v<T, double>) {
          std::string text = fmt::format("{}", *p);
          if (text.find_first_of(".einf") == std::string::npos) text += ".0";  // keep it a TOML float
          return text;
        } else if constexpr (std::is_same_v<T, bool>) {
          return *p ? "true" : "false";
        } else {
          std::ostringstream quoted;
          quoted << toml::value<std::string>(*p);  // TOML string syntax with escapes
          return quoted.str();
        }
      },
      ref);
}

// Levenshtein distance, for "did you mean" hints.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      current[j] =
          std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string suggestion(const std::string& name, const std::vector<Field>& fields) {
  std::string best;
  size_t best_distance = 4;  // only close misspellings
  for (const Field& field : fields) {
    const std::string candidate = fmt::format("{}.{}", field.section, field.key);
    const size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) best = candidate, best_distance = distance;
  }
  return best.empty() ? "" : fmt::format(" (did you mean {}?)", best);
}

// Assigns a TOML node to a field, checking its type.
absl::Status assign(const Field& field, const toml::node& node, const std::string& where) {
  const std::string name = fmt::format("{}.{}", field.section, field.key);
  auto wrong = [&](const char* found) {
    return absl::InvalidArgumentError(fmt::format("{}: {} must be {} {}, got {}", where, name,
                                                  field.ref.index() == 0 ? "an" : "a", type_name(field.ref),
                                                  found));
  };
  const char* found = node.is_integer()          ? "an integer"
                      : node.is_floating_point() ? "a float"
                      : node.is_string()         ? "a string"
                      : node.is_boolean()        ? "a boolean"
                                                 : "a table or array";
  return std::visit(
      [&](auto* p) -> absl::Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          if (!node.is_integer()) return wrong(found);
          *p = node.as_integer()->get();
        } else if constexpr (std::is_same_v<T, double>) {
          if (node.is_integer()) {
            *p = static_cast<double>(node.as_integer()->get());
          } else if (node.is_floating_point()) {
            *p = node.as_floating_point()->get();
            if (!std::isfinite(*p)) {
              return absl::InvalidArgumentError(
                  fmt::format("{}: {} must be a finite number, got {}", where, name, *p));
            }
          } else {
            return wrong(found);
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!node.is_boolean()) return wrong(found);
          *p = node.as_boolean()->get();
        } else {
          if (!node.is_string()) return wrong(found);
          *p = node.as_string()->get();
        }
        return absl::OkStatus();
      },
      field.ref);
}

absl::Status assign_table(Recipe& recipe, const toml::table& table, const std::string& where) {
  const std::vector<Field> fields = fields_of(recipe);
  for (const auto& [section_key, section_node] : table) {
    const std::string section(section_key.str());
    const toml::table* section_table = section_node.as_table();
    const bool known_section =
        std::any_of(fields.begin(), fields.end(), [&](const Field& f) { return section == f.section; });
    if (!known_section || section_table == nullptr) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: [{}] is not a recipe section; sections are [model] [data] [train] [optim] [checkpoint] [dist] "
          "[log]",
          where, section));
    }
    for (const auto& [key_name, node] : *section_table) {
      const std::string key(key_name.str());
      const auto field = std::find_if(fields.begin(), fields.end(),
                                      [&](const Field& f) { return section == f.section && key == f.key; });
      if (field == fields.end()) {
        const std::string name = fmt::format("{}.{}", section, key);
        return absl::InvalidArgumentError(
            fmt::format("{}: unknown key {}{}; `nanoforge train --help` lists the keys", where, name,
                        suggestion(name, fields)));
      }
      if (absl::Status status = assign(*field, node, where); !status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Recipe> parse_recipe(const std::string& toml_text, const std::string& source_name) {
  toml::table table;
  try {
    table = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& error) {
    return absl::InvalidArgumentError(fmt::format("{}:{}:{}: {}", source_name, error.source().begin.line,
                                                  error.source().begin.column, error.description()));
  }
  Recipe recipe;
  if (absl::Status status = assign_table(recipe, table, source_name); !status.ok()) return status;
  return recipe;
}

absl::StatusOr<Recipe> read_recipe(const std::string& path) {
  // A recipe is a short text; a directory or a device would read as an empty one (or never end).
  constexpr uintmax_t kMaxRecipeBytes = 1 << 20;
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status))
    return absl::NotFoundError(fmt::format("{}: cannot read the recipe: no such file", path));
  if (!std::filesystem::is_regular_file(status))
    return absl::InvalidArgumentError(
        fmt::format("{}: the recipe must be a TOML file, not a directory or "
                    "device (see recipes/)",
                    path));
  if (std::filesystem::file_size(path, error) > kMaxRecipeBytes) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} bytes; a recipe is a short TOML file (at most 1 MiB)", path,
                    std::filesystem::file_size(path, error)));
  }
  std::ifstream file(path);
  if (!file) return absl::PermissionDeniedError(fmt::format("{}: cannot read the recipe", path));
  std::stringstream text;
  text << file.rdbuf();
  return parse_recipe(text.str(), path);
}

absl::Status apply_overrides(Recipe& recipe, const std::vector<std::string>& overrides) {
  const std::vector<Field> fields = fields_of(recipe);
  for (const std::string& override_text : overrides) {
    const size_t equals = override_text.find('=');
    const size_t dot = override_text.find('.');
    if (equals == std::string::npos || dot == std::string::npos || dot > equals) {
      return absl::InvalidArgumentError(fmt::format(
          "override '{}' must look like section.key=value, e.g. train.num_iterations=100", override_text));
    }
    const std::string section = override_text.substr(0, dot),
                      key = override_text.substr(dot + 1, equals - dot - 1);
    std::string value = override_text.substr(equals + 1);
    // A recipe is TOML, which holds UTF-8 text only: other bytes would not survive config.toml and resume.
    if (!simdjson::validate_utf8(value)) {
      return absl::InvalidArgumentError(fmt::format(
          "override {}.{}: the value is not valid UTF-8 (recipes are TOML, which holds UTF-8 text only)",
          section, key));
    }
    const auto field = std::find_if(fields.begin(), fields.end(),
                                    [&](const Field& f) { return section == f.section && key == f.key; });
    if (field == fields.end()) {
      const std::string name = section + "." + key;
      return absl::InvalidArgumentError(
          fmt::format("override {}: unknown key{}; `nanoforge train --help` lists the keys", name,
                      suggestion(name, fields)));
    }
    toml::table parsed;
    try {
      parsed = toml::parse("value = " + value);
    } catch (const toml::parse_error&) {
      parsed = toml::table{{"value", value}};  // a bare word: the string itself
    }
    if (std::holds_alternative<std::string*>(field->ref) && !parsed["value"].is_string()) {
      parsed = toml::table{{"value", value}};  // string fields take the text as written (paths, patterns)
    }
    if (absl::Status status = assign(*field, *parsed.get("value"), "override " + override_text);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Recipe> load_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  NANOFORGE_ASSIGN_OR_RETURN(Recipe recipe, read_recipe(path));
  NANOFORGE_RETURN_IF_ERROR(apply_overrides(recipe, overrides));
  for (auto [key, value, default_dir] :
       {std::tuple{"data.train", &recipe.data.train, &default_shards_dir},
        std::tuple{"data.val", &recipe.data.val, &default_shards_dir},
        std::tuple{"data.tokenizer", &recipe.data.tokenizer, &default_tokenizer_dir}}) {
    if (!value->empty()) continue;
    absl::StatusOr<std::string> directory = default_dir();
    if (!directory.ok()) {
      return absl::Status(directory.status().code(), fmt::format("{} sets no {}, and {}", path, key,
                                                                 std::string(directory.status().message())));
    }
    *value = *directory;
  }
  return recipe;
}

std::vector<RecipeKey> recipe_keys(const Recipe& recipe) {
  Recipe copy = recipe;
  std::vector<RecipeKey> keys;
  for (const Field& field : fields_of(copy)) {
    keys.push_back({fmt::format("{}.{}", field.section, field.key), type_name(field.ref),
                    toml_value(field.ref), field.help});
  }
  return keys;
}

std::string recipe_to_toml(const Recipe& recipe) {
  Recipe copy = recipe;
  std::string text;
  std::string section;
  for (const Field& field : fields_of(copy)) {
    if (section != field.section) {
      section = field.section;
      text += fmt::format("{}[{}]\n", text.empty() ? "" : "\n", section);
    }
    text += fmt::format("{} = {}\n", field.key, toml_value(field.ref));
  }
  return text;
}

}  // namespace nanoforge

namespace nanoforge {
namespace {

// Limits on what a recipe may ask for. Far above any real run, and low enough that nothing computed from
// them overflows or allocates before the memory plan (step/memory_plan.h) has checked the run fits.
constexpr int64_t kMaxBatchRows = int64_t{1} << 20;            // train.device_batch_size
constexpr int64_t kMaxTokensPerMicroBatch = int64_t{1} << 31;  // device_batch_size x max_seq_len
constexpr int64_t kMaxTotalBatchTokens = int64_t{1} << 40;
constexpr int64_t kMaxSteps = 1'000'000'000'000;  // num_iterations, warmup_steps
constexpr double kMaxDataRatio = 1e4;             // tokens per parameter (nanochat: 12, Chinchilla: 20)
constexpr double kMaxTargetFlops = 1e30;
constexpr int64_t kMaxEvalTokens = int64_t{1} << 50;
constexpr int64_t kMaxSampleTokens = 4096;  // tokens per sample prompt, printed only when all are drawn
constexpr int64_t kMaxThreads = 1024;
constexpr double kMaxLearningRate = 1e6;
constexpr double kMaxTimeoutSeconds = 1e6;

absl::Status invalid(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

// "KEY must be in [LOW, HIGH], got VALUE" unless low <= value <= high (NaN fails).
template <class T>
absl::Status in_range(const char* key, T value, T low, T high, const char* hint = "") {
  if (value >= low && value <= high) return absl::OkStatus();
  return invalid(fmt::format("{} must be in [{}, {}]{}, got {}", key, low, high, hint, value));
}

// -1 (the automatic value or "never") or in [low, high].
absl::Status minus_one_or_in_range(const char* key, int64_t value, int64_t low, int64_t high,
                                   const char* meaning) {
  if (value == -1) return absl::OkStatus();
  return in_range<int64_t>(key, value, low, high, fmt::format(" or -1 ({})", meaning).c_str());
}

}  // namespace

absl::Status validate_recipe(const Recipe& r) {
  NANOFORGE_RETURN_IF_ERROR(in_range<int64_t>("model.depth", r.model.depth, 1, kMaxLayers));
  NANOFORGE_RETURN_IF_ERROR(in_range<int64_t>("model.aspect_ratio", r.model.aspect_ratio, 1, kMaxEmbd));
  NANOFORGE_RETURN_IF_ERROR(in_range<int64_t>("model.head_dim", r.model.head_dim, 2, kMaxEmbd));
  if (r.model.depth * r.model.aspect_ratio > kMaxEmbd) {
    return invalid(
        fmt::format("model.depth x model.aspect_ratio = {} (the model's width) exceeds the limit of {}",
                    r.model.depth * r.model.aspect_ratio, kMaxEmbd));
  }
  NANOFORGE_RETURN_IF_ERROR(in_range<int64_t>("model.max_seq_len", r.model.max_seq_len, 2, kMaxSequenceLen));
  if (r.data.train.empty() || r.data.val.empty() || r.data.tokenizer.empty()) {
    return invalid(
        "data.train, data.val and data.tokenizer must all be set (nanoforge prep writes all three; "
        "see docs/data.md)");
  }
  NANOFORGE_RETURN_IF_ERROR(
      in_range<int64_t>("train.device_batch_size", r.train.device_batch_size, 1, kMaxBatchRows));
  if (r.train.device_batch_size * r.model.max_seq_len > kMaxTokensPerMicroBatch) {
    return invalid(fmt::format(
        "train.device_batch_size x model.max_seq_len = {} tokens per micro-batch exceeds the limit of {}",
        r.train.device_batch_size * r.model.max_seq_len, kMaxTokensPerMicroBatch));
  }
  NANOFORGE_RETURN_IF_ERROR(minus_one_or_in_range("train.total_batch_size", r.train.horizon.total_batch_size,
                                                  1, kMaxTotalBatchTokens, "automatic"));
  NANOFORGE_RETURN_IF_ERROR(minus_one_or_in_range("train.num_iterations", r.train.horizon.num_iterations, 1,
                                                  kMaxSteps, "from the horizon"));
  if (r.train.horizon.target_flops != -1) {
    NANOFORGE_RETURN_IF_ERROR(in_range<double>("train.target_flops", r.train.horizon.target_flops, 1,
                                               kMaxTargetFlops, " or -1 (unused)"));
  }
  if (!(r.train.horizon.target_param_data_ratio > 0 &&
        r.train.horizon.target_param_data_ratio <= kMaxDataRatio)) {
    return invalid(fmt::format("train.target_param_data_ratio must be in (0, {}], got {}", kMaxDataRatio,
                               r.train.horizon.target_param_data_ratio));
  }
  NANOFORGE_RETURN_IF_ERROR(
      in_range<int64_t>("train.warmup_steps", r.train.schedule.warmup_steps, 0, kMaxSteps));
  NANOFORGE_RETURN_IF_ERROR(in_range<double>("train.warmdown_ratio", r.train.schedule.warmdown_ratio, 0, 1));
  NANOFORGE_RETURN_IF_ERROR(in_range<double>("train.final_lr_frac", r.train.schedule.final_lr_frac, 0, 1));
  NANOFORGE_RETURN_IF_ERROR(
      minus_one_or_in_range("train.eval_every", r.train.eval_every, 1, kMaxSteps, "never"));
  NANOFORGE_RETURN_IF_ERROR(
      minus_one_or_in_range("train.sample_every", r.train.sample_every, 1, kMaxSteps, "never"));
  NANOFORGE_RETURN_IF_ERROR(in_range<int64_t>("train.eval_tokens", r.train.eval_tokens, 1, kMaxEvalTokens));
  NANOFORGE_RETURN_IF_ERROR(
      in_range<int64_t>("train.sample_tokens", r.train.sample_tokens, 1, kMaxSampleTokens));
  if (r.train.device != "auto" && r.train.device != "cpu" && r.train.device != "cuda") {
    return invalid(fmt::format("train.device must be auto, cpu or cuda, got '{}'", r.train.device));
  }
  NANOFORGE_RETURN_IF_ERROR(validate_attention_setting(r.model.attention, r.train.device));
  NANOFORGE_RETURN_IF_ERROR(validate_mlp_gemm_setting(r.model.mlp_gemm));
  NANOFORGE_RETURN_IF_ERROR(validate_fp8_recipe(r.model.fp8_recipe));
  NANOFORGE_RETURN_IF_ERROR(
      in_range<int64_t>("train.threads", r.train.threads, 0, kMaxThreads, " (0: all cores)"));
  for (const auto& [name, lr] : {std::pair{"optim.unembedding_lr", r.optim.unembedding_lr},
                                 {"optim.embedding_lr", r.optim.embedding_lr},
                                 {"optim.scalar_lr", r.optim.scalar_lr},
                                 {"optim.matrix_lr", r.optim.matrix_lr},
                                 {"optim.weight_decay", r.optim.weight_decay}}) {
    NANOFORGE_RETURN_IF_ERROR(in_range<double>(name, lr, 0, kMaxLearningRate));
  }
  NANOFORGE_RETURN_IF_ERROR(
      minus_one_or_in_range("checkpoint.every", r.checkpoint.every, 1, kMaxSteps, "at the end"));
  NANOFORGE_RETURN_IF_ERROR(
      minus_one_or_in_range("checkpoint.keep_last", r.checkpoint.keep_last, 1, kMaxSteps, "keep all"));
  NANOFORGE_RETURN_IF_ERROR(
      minus_one_or_in_range("checkpoint.keep_every", r.checkpoint.keep_every, 1, kMaxSteps, "none"));
  if (!(r.dist.timeout_seconds > 0 && r.dist.timeout_seconds <= kMaxTimeoutSeconds)) {
    return invalid(fmt::format("dist.timeout_seconds must be in (0, {}], got {}", kMaxTimeoutSeconds,
                               r.dist.timeout_seconds));
  }
  if (!(r.dist.bucket_mb > 0 && r.dist.bucket_mb <= 4096)) {
    return invalid(fmt::format("dist.bucket_mb must be in (0, 4096] MB (PyTorch DDP uses 25), got {}",
                               r.dist.bucket_mb));
  }
  if (r.log.wandb_mode != "online" && r.log.wandb_mode != "offline" && r.log.wandb_mode != "disabled") {
    return invalid(
        fmt::format("log.wandb_mode must be online, offline or disabled, got '{}'", r.log.wandb_mode));
  }
  return absl::OkStatus();
}

}  // namespace nanoforge
