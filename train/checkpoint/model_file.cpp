// load_checkpoint_model.
#include "train/checkpoint/model_file.h"

#include <fmt/format.h>

#include <filesystem>

#include "step/memory_plan.h"
#include "support/status.h"

namespace nanoforge {

absl::StatusOr<std::string> resolve_checkpoint(const std::string& path) {
  std::error_code error;
  if (std::filesystem::exists(std::filesystem::path(path) / "model.h5", error)) return path;
  absl::StatusOr<std::string> latest = latest_checkpoint(path);
  if (latest.ok() || !absl::IsNotFound(latest.status())) return latest;  // a damaged `latest` says so
  return absl::NotFoundError(fmt::format(
      "{}: neither a checkpoint directory (with model.h5) nor a run directory with checkpoints/latest",
      path));
}

absl::StatusOr<CheckpointModel> load_checkpoint_model(const std::string& path,
                                                      const std::string& tokenizer_dir, Device device,
                                                      const InferenceBatch& batch) {
  NANOFORGE_ASSIGN_OR_RETURN(const std::string checkpoint, resolve_checkpoint(path));
  NANOFORGE_RETURN_IF_ERROR(verify_model_files(checkpoint));
  NANOFORGE_ASSIGN_OR_RETURN(TrainerState trainer, read_trainer_state(checkpoint));
  NANOFORGE_ASSIGN_OR_RETURN(Recipe recipe,
                             parse_recipe(trainer.recipe_toml, checkpoint + "/trainer.h5 recipe"));
  const std::string tokenizer_path = tokenizer_dir.empty() ? recipe.data.tokenizer : tokenizer_dir;
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::load(tokenizer_path);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        fmt::format("the run's tokenizer ({}): {}; pass --tokenizer DIR", tokenizer_path,
                                    std::string(tokenizer.status().message())));
  }
  if (tokenizer->hash() != trainer.tokenizer_hash) {
    return absl::FailedPreconditionError(
        fmt::format("tokenizer {} (hash {}) is not the one {} was trained with (hash {})", tokenizer_path,
                    tokenizer->hash(), checkpoint, trainer.tokenizer_hash));
  }
  NANOFORGE_ASSIGN_OR_RETURN(const GPTConfig config, read_checkpoint_config(checkpoint));
  if (config.vocab_size != tokenizer->vocab_size()) {
    return absl::FailedPreconditionError(
        fmt::format("{}/model.h5: vocabulary of {} tokens, but its tokenizer {} has {}", checkpoint,
                    config.vocab_size, tokenizer_path, tokenizer->vocab_size()));
  }
  NANOFORGE_RETURN_IF_ERROR(
      check_model_fits(config, device, batch.rows, config.sequence_len, /*fp8=*/false, batch.setting));
  auto model = std::make_unique<GPT>(config, device, training_dtype(device));
  NANOFORGE_RETURN_IF_ERROR(load_model_weights(checkpoint, *model));
  model->refresh_compute_weights();
  return CheckpointModel{checkpoint, std::move(trainer), std::move(recipe), std::move(*tokenizer),
                         std::move(model)};
}

}  // namespace nanoforge
