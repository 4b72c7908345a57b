// Parity with nanochat: the committed model cases (nanochat's own PyTorch numbers, tests/parity/golden/) run
// in-process, the result file's layout, and case files that are wrong in each way a user could get wrong —
// each refused with the file and dataset named.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "h5/file.h"
#include "parity/model_parity.h"
#include "parity/model_parity_compare.h"
#include "tests/parity/golden_file.h"

namespace nanoforge {
namespace {

// GQA (4 heads, 2 kv heads), a short window that cuts (128 < 160), value embeddings on layers 0 and 2.
const std::string kGqaCase = test::golden_path("model_gqa_windows.h5");
// Full attention heads, four layers, ignored targets.
const std::string kMhaCase = test::golden_path("model_mha.h5");

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("nanoforge_parity_" + std::to_string(getpid()) + "_" + name))
      .string();
}

void expect_case_matches(const std::string& path, size_t parameters) {
  auto parity_case = read_parity_case(path);
  ASSERT_TRUE(parity_case.ok()) << parity_case.status();
  const ParityResult result = run_parity(*parity_case, DType::kF32);
  auto checks = compare_with_expected(path, result);
  ASSERT_TRUE(checks.ok()) << checks.status();
  EXPECT_EQ(checks->size(), 2u + parameters);  // loss, logits, every parameter's gradient
  for (const TensorCheck& check : *checks) {
    EXPECT_TRUE(check.passed) << check.name << ": max error " << check.max_error << " > tolerance "
                              << check.tolerance << " " << check.problem;
  }
}

TEST(ModelParity, GqaWindowsCaseMatchesNanochat) {
  expect_case_matches(kGqaCase, 29);
}

TEST(ModelParity, MhaCaseMatchesNanochat) {
  expect_case_matches(kMhaCase, 35);
}

// nanochat's FP8 training (fp8.py, tensorwise) on two 1-layer models of width 128: loss within 1e-4 and every
// tensor either within 1e-4 or within 3x the spread of our own FP8 runs with the weights nudged by 2^-20 (the
// rule and why in parity/model_parity_compare.cpp). Which tensors need the second rule depends on this
// build's fp32 rounding (the release build matches the GQA case to ~1e-6 everywhere; the sanitizer build
// flips one FP8 tie in it).
void expect_fp8_case_matches(const std::string& path) {
  auto parity_case = read_parity_case(path);
  ASSERT_TRUE(parity_case.ok()) << parity_case.status();
  ASSERT_TRUE(parity_case->fp8);
  const ParityResult result = run_parity(*parity_case, DType::kF32);
  const Fp8Spread spread = measure_fp8_spread(*parity_case, result);
  auto checks = compare_with_expected(path, result, &spread);
  ASSERT_TRUE(checks.ok()) << checks.status();
  for (const TensorCheck& check : *checks) {
    EXPECT_TRUE(check.passed) << check.name << ": " << check.max_error << " > " << check.tolerance;
    if (check.name == "loss") {
      EXPECT_TRUE(check.problem.empty()) << "the loss within 1e-4, as any case";
    }
  }
  // The same model without FP8 is far from nanochat's FP8 numbers, by the FP8 rule too: the FP8 path is what
  // matches, and the spread is no licence for a model that skips it.
  ParityCase full_precision_case = *parity_case;
  full_precision_case.fp8 = false;
  auto without = compare_with_expected(path, run_parity(full_precision_case, DType::kF32), &spread);
  ASSERT_TRUE(without.ok());
  int far = 0;
  for (const TensorCheck& check : *without)
    far += check.passed ? 0 : 1;
  EXPECT_GE(far, 10);
}

TEST(ModelParity, Fp8MhaCaseMatchesNanochatsFp8) {
  expect_fp8_case_matches(test::golden_path("model_fp8_mha.h5"));
}

TEST(ModelParity, Fp8GqaCaseMatchesNanochatsFp8) {
  expect_fp8_case_matches(test::golden_path("model_fp8_gqa.h5"));
}

// An unseen FP8 case (2 layers of width 256, nanochat's fp8.py): smear_lambda's gradient as nanochat,
// our FP8 run and our run without FP8 gave it (one instance, 2 heads, vocab 300, perturb 0.02), and the
// spread of our nudged FP8 runs there. FP8 hardly moves this gradient (full precision is 1.2e-4 from
// nanochat's FP8), while the codes that a rounding difference flips move it by up to ~5e-4: the rule that
// asked for half the full-precision distance (5.9e-5) failed our 1.2e-4 (PyTorch's own FP8 with its GEMMs
// summed in fp64 lands 1.6x the full-precision distance from PyTorch's on such a tensor). Judged by the
// spread, it passes; four times the spread away still fails.
TEST(ModelParity, Fp8RuleJudgesByTheSpreadNotByTheFullPrecisionDistance) {
  ExpectedValues expected;
  expected.loss.values = {5.7492247f};
  expected.logits.shape = {1};
  expected.logits.values = {0.0f};
  expected.grads["smear_lambda"].shape = {1};
  expected.grads["smear_lambda"].values = {-0.00356742f};
  ParityResult ours;
  ours.loss = expected.loss.values[0];
  ours.logits = expected.logits;
  ours.grads["smear_lambda"] = expected.grads["smear_lambda"];
  ours.grads["smear_lambda"].values = {-0.00368985f};
  Fp8Spread spread;
  spread.by_tensor = {{"loss", 0.0}, {"logits", 0.0}, {"grads/smear_lambda", 4.893e-4}};
  const std::vector<TensorCheck> checks = compare_with_expected(expected, ours, &spread);
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_FALSE(checks[2].problem.empty()) << "outside 1e-4: judged by the FP8 rule";
  EXPECT_TRUE(checks[2].passed) << checks[2].max_error << " > " << checks[2].tolerance;

  ours.grads["smear_lambda"].values = {-0.00356742f - 4 * 4.893e-4f};
  EXPECT_FALSE(compare_with_expected(expected, ours, &spread)[2].passed) << "four times the spread fails";
}

TEST(ModelParity, ResultFileHasTheDocumentedLayout) {
  auto parity_case = read_parity_case(kGqaCase);
  ASSERT_TRUE(parity_case.ok());
  const ParityResult result = run_parity(*parity_case, DType::kF32);
  const std::string out = temp_path("result.h5");
  ASSERT_TRUE(write_parity_result(out, result).ok());
  auto file = H5File::open_read(out);
  ASSERT_TRUE(file.ok());
  auto loss = file->read<float>("/loss");
  ASSERT_TRUE(loss.ok());
  EXPECT_TRUE(loss->shape.empty());
  auto logits = file->read<float>("/logits");
  ASSERT_TRUE(logits.ok());
  EXPECT_EQ(logits->shape, (std::vector<int64_t>{2, 160, 100}));  // unpadded vocab
  auto grad = file->read<float>("/grads/transformer.h.2.attn.ve_gate.weight");
  ASSERT_TRUE(grad.ok());
  EXPECT_EQ(grad->shape, (std::vector<int64_t>{2, 12}));
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));
  std::filesystem::remove(out);
}

// A case as it is written to a file, so tests can damage one part of it.
struct CaseParts {
  GPTConfig config;
  std::map<std::string, HostArray<float>> weights;
  HostArray<int64_t> idx, targets;
};

class BadCaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto source = read_parity_case(kGqaCase);
    ASSERT_TRUE(source.ok()) << source.status();
    parts_ = {source->config, source->weights, source->idx, source->targets};
    path_ = temp_path("bad_case.h5");
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // Writes parts_ (with `skip_attribute` left out) and returns what reading it says.
  absl::Status write_and_read(const std::string& skip_attribute = "") {
    {
      auto file = H5File::create(path_);
      EXPECT_TRUE(file.ok());
      EXPECT_TRUE(file->create_group("/config").ok());
      const std::pair<const char*, int64_t> ints[] = {
          {"sequence_len", parts_.config.sequence_len}, {"vocab_size", parts_.config.vocab_size},
          {"n_layer", parts_.config.n_layer},           {"n_head", parts_.config.n_head},
          {"n_kv_head", parts_.config.n_kv_head},       {"n_embd", parts_.config.n_embd}};
      for (const auto& [name, value] : ints) {
        if (name == skip_attribute) continue;
        EXPECT_TRUE(file->write_int_attribute("/config", name, value).ok());
      }
      EXPECT_TRUE(
          file->write_string_attribute("/config", "window_pattern", parts_.config.window_pattern).ok());
      for (const auto& [name, weight] : parts_.weights) {
        EXPECT_TRUE(file->write("/weights/" + name, weight).ok());
      }
      if (float_ids_) {
        HostArray<float> ids{parts_.idx.shape,
                             std::vector<float>(parts_.idx.values.begin(), parts_.idx.values.end())};
        EXPECT_TRUE(file->write("/inputs/idx", ids).ok());
      } else {
        EXPECT_TRUE(file->write("/inputs/idx", parts_.idx).ok());
      }
      EXPECT_TRUE(file->write("/inputs/targets", parts_.targets).ok());
    }
    return read_parity_case(path_).status();
  }

  static void expect_mentions(const absl::Status& status, std::initializer_list<std::string> words) {
    EXPECT_FALSE(status.ok());
    for (const std::string& word : words) {
      EXPECT_NE(status.message().find(word), std::string::npos)
          << "'" << word << "' not in: " << status.message();
    }
  }

  CaseParts parts_;
  std::string path_;
  bool float_ids_ = false;
};

TEST_F(BadCaseTest, UndamagedCopyReadsBack) {
  EXPECT_TRUE(write_and_read().ok()) << write_and_read();
}

TEST_F(BadCaseTest, MissingWeightIsNamed) {
  parts_.weights.erase("transformer.h.1.mlp.c_fc.weight");
  expect_mentions(write_and_read(), {path_, "missing dataset /weights/transformer.h.1.mlp.c_fc.weight"});
}

TEST_F(BadCaseTest, WrongShapeIsNamedWithBothShapes) {
  parts_.weights["lm_head.weight"].shape = {32, 128};
  expect_mentions(write_and_read(), {"/weights/lm_head.weight", "(32, 128)", "(128, 32)"});
}

TEST_F(BadCaseTest, WrongDtypeIsNamed) {
  float_ids_ = true;
  expect_mentions(write_and_read(), {"/inputs/idx", "floating point", "expected integer"});
}

TEST_F(BadCaseTest, MissingConfigAttributeIsNamed) {
  expect_mentions(write_and_read("n_kv_head"), {"n_kv_head", "/config"});
}

TEST_F(BadCaseTest, InvalidConfigIsExplained) {
  parts_.config.n_kv_head = 3;
  expect_mentions(write_and_read(), {"/config", "n_kv_head 3"});
}

TEST_F(BadCaseTest, UnknownWeightIsRefused) {
  parts_.weights["value_embeds.1.weight"] = parts_.weights["value_embeds.0.weight"];  // layer 1 has none
  expect_mentions(write_and_read(), {"/weights/value_embeds.1.weight", "not a parameter"});
}

TEST_F(BadCaseTest, TokenOutsideTheVocabularyIsRefused) {
  parts_.idx.values[17] = 100;
  expect_mentions(write_and_read(), {"/inputs/idx[17] = 100", "[0, 100)"});
  parts_.idx.values[17] = 0;
  parts_.targets.values[3] = -2;
  expect_mentions(write_and_read(), {"/inputs/targets[3] = -2"});
}

TEST_F(BadCaseTest, MismatchedTargetsShapeIsRefused) {
  parts_.targets.shape = {1, 320};
  expect_mentions(write_and_read(), {"/inputs/targets", "(1, 320)", "(2, 160)"});
}

}  // namespace
}  // namespace nanoforge
