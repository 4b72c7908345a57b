// nanoforge -> nanochat -> nanoforge. A checkpoint exported by tools/export_checkpoint.py into a
// NANOCHAT_BASE_DIR is read as nanochat's loaders read it (check_nanochat_export.py: the tokenizer.pkl gives
// nanoforge's ids, token_bytes.pt its byte lengths, the state dict loads strictly into the PyTorch reference
// GPT); tools/import_nanochat.py brings it back with the same tokenizer files and the same weights (bit for
// bit with --fp32-embeddings; the bf16 default rounds the embeddings to bf16 and nothing else), and the
// imported model starts a run through model.init_from. Skips, saying why, where this build's Python lacks
// torch, tiktoken or h5py.
#include <cmath>
#include <cstring>

#include "data/tokenizer/tokenizer.h"
#include "tests/program_run.h"
#include "tests/test_paths.h"
#include "tests/train/training_fixture.h"

namespace nanoforge {
namespace {

using namespace test;

const std::string kPython = test::python();
const std::string kTools = test::source_path("tools");

ProgramRun python(const std::string& arguments) {
  return run_command(kPython + " " + arguments + " 2>&1");
}

// fp32 -> bf16 -> fp32, round to nearest even (what torch's .to(torch.bfloat16) does to finite values).
float bf16_rounded(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
  std::memcpy(&value, &bits, sizeof(bits));
  return value;
}

std::map<std::string, std::vector<float>> weights_of(const std::string& checkpoint_dir) {
  auto file = H5File::open_read(checkpoint_dir + "/model.h5");
  EXPECT_TRUE(file.ok()) << file.status();
  std::map<std::string, std::vector<float>> weights;
  const absl::StatusOr<std::vector<std::string>> names = file->members("/weights");
  EXPECT_TRUE(names.ok()) << names.status();
  for (const std::string& name : *names)
    weights[name] = file->read<float>("/weights/" + name)->values;
  return weights;
}

// What check_nanochat_export.py compares against: nanoforge's ids and token byte lengths.
std::string expected_json(const Tokenizer& tokenizer) {
  const std::vector<std::string> texts = {"The farmer found the red box.",
                                          "Ünïcödé, 日本語 and emoji 👩‍👩‍👧",
                                          "<|bos|> stays text", "  spaces\n\nand lines\r\n"};
  std::string json = "{\"bos_id\": " + std::to_string(tokenizer.bos_id()) + ", \"texts\": [";
  std::string ids_json = "], \"ids\": [";
  for (size_t i = 0; i < texts.size(); ++i) {
    json += (i ? ", " : "") + std::string("\"");
    for (char c : texts[i])
      json += c == '\n' ? "\\n" : c == '\r' ? "\\r" : std::string(1, c);
    json += "\"";
    ids_json += (i ? ", [" : "[") + fmt::format("{}", fmt::join(tokenizer.encode(texts[i]), ", ")) + "]";
  }
  return json + ids_json + "], \"token_bytes\": [" +
         fmt::format("{}", fmt::join(tokenizer.token_byte_lengths(), ", ")) + "]}";
}

TEST(NanochatInterop, ExportImportRoundTripIsExact) {
  const ProgramRun modules = python("-c 'import torch, tiktoken, h5py'");
  if (modules.exit_code != 0) GTEST_SKIP() << kPython << " cannot run the nanochat tools: " << modules.output;
  const std::string run = temp_dir("interop_run"), out = temp_dir("interop_out");
  ASSERT_TRUE(run_training(small_recipe(), stop_at(run, 2)).ok());
  auto golden = Tokenizer::load(kGolden);
  ASSERT_TRUE(golden.ok());
  std::ofstream(out + "/expected.json") << expected_json(*golden);

  for (const bool fp32 : {true, false}) {
    const std::string base = out + (fp32 ? "/nanochat_fp32" : "/nanochat_bf16");
    const ProgramRun exported = python(kTools + "/export_checkpoint.py nanochat " + run + " " + base +
                                       " --tokenizer " + kGolden + (fp32 ? " --fp32-embeddings" : ""));
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    EXPECT_TRUE(fs::exists(base + "/base_checkpoints/d1/model_000002.pt"));
    EXPECT_TRUE(fs::exists(base + "/base_checkpoints/d1/meta_000002.json"));
    const ProgramRun checked = python(test::source_path("tests/train/check_nanochat_export.py") + " " + base +
                                      " " + out + "/expected.json");
    EXPECT_EQ(checked.exit_code, 0) << checked.output;

    const std::string tokenizer = base + "/imported_tokenizer", model = base + "/imported_model";
    const ProgramRun imported_tokenizer =
        python(kTools + "/import_nanochat.py tokenizer " + base + "/tokenizer " + tokenizer);
    ASSERT_EQ(imported_tokenizer.exit_code, 0) << imported_tokenizer.output;
    for (const char* file : {Tokenizer::kRanksFile, Tokenizer::kSpecialsFile})
      EXPECT_EQ(read_bytes(tokenizer + "/" + file), read_bytes(kGolden + "/" + file)) << file;
    const ProgramRun imported_model = python(kTools + "/import_nanochat.py model " + base + " " + model);
    ASSERT_EQ(imported_model.exit_code, 0) << imported_model.output;

    const auto original = weights_of(*latest_checkpoint(run));
    const auto back = weights_of(model);
    ASSERT_EQ(back.size(), original.size());
    for (const auto& [name, values] : original) {
      ASSERT_EQ(back.count(name), 1u) << name;
      const bool embedding = name == "transformer.wte.weight" || name.starts_with("value_embeds.");
      std::vector<float> expected = values;
      if (embedding && !fp32) {
        for (float& v : expected)
          v = bf16_rounded(v);
      }
      EXPECT_TRUE(back.at(name) == expected) << name << (fp32 ? " (fp32 export)" : " (bf16 export)");
    }
  }

  // The imported model starts a nanoforge run.
  Recipe recipe = small_recipe();
  recipe.model.init_from = out + "/nanochat_fp32/imported_model";
  const std::string continued = temp_dir("interop_continued");
  const absl::Status continued_run = run_training(recipe, stop_at(continued, 1));
  ASSERT_TRUE(continued_run.ok()) << continued_run;
}

TEST(NanochatInterop, ExportRefusesAnotherTokenizer) {
  const ProgramRun modules = python("-c 'import torch, tiktoken, h5py'");
  if (modules.exit_code != 0) GTEST_SKIP() << kPython << " cannot run the nanochat tools: " << modules.output;
  const std::string run = temp_dir("interop_wrong"), other = temp_dir("interop_other_tokenizer");
  ASSERT_TRUE(run_training(small_recipe(), stop_at(run, 1)).ok());
  auto golden = Tokenizer::load(kGolden);
  std::vector<std::string> ranks;
  for (int32_t id = 0; id < golden->num_ranks() - 1; ++id)  // one merge fewer: another tokenizer
    ranks.emplace_back(golden->token_bytes(id));
  ASSERT_TRUE(Tokenizer::from_ranks(ranks)->save(other).ok());
  const ProgramRun exported = python(kTools + "/export_checkpoint.py nanochat " + run + " " +
                                     temp_dir("interop_x") + " --tokenizer " + other);
  EXPECT_NE(exported.exit_code, 0);
  EXPECT_NE(exported.output.find("is not the one the checkpoint was trained with"), std::string::npos)
      << exported.output;
}

}  // namespace
}  // namespace nanoforge
