// The whole model on the GPU in mixed precision (bf16 activations and GEMM matrices, fp32 master weights and
// gradients) against the CPU backend in fp32, from the same weights and batch: the loss, the logits and every
// parameter's gradient. The config exercises what training does at small size: GQA (2 query heads on 1 kv
// head, head dim 128 as in nanochat), a short window that really cuts (128 keys, seq 192), value embeddings
// on two of three layers, backout, an ignored target and a padded vocabulary (500 -> 512), with the MLP on
// cuBLASLt and the ReLU² pass and on our fused MLP GEMM (kernels/mlp_gemm.h). Also: the bf16
// copies are the master rounded to nearest even, forward refuses copies older than the weights, and two
// models with different kernel settings run side by side in one process.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_memory.h"
#include "kernels/host_transfer.h"
#include "kernels/kernel_settings.h"
#include "model/gpt.h"
#include "support/philox.h"
#include "tests/kernels/cuda/gpu_test_support.h"

namespace nanoforge {
namespace {

constexpr int64_t kBatch = 2, kSeq = 192, kVocab = 500;

GPTConfig gpu_config() {
  GPTConfig config;
  config.n_layer = 3;
  config.n_embd = 256;
  config.n_head = 2;
  config.n_kv_head = 1;
  config.vocab_size = kVocab;
  config.sequence_len = 256;  // short window: ceil(ceil(256 / 4) / 128) * 128 = 128 < kSeq
  config.window_pattern = "SL";
  return config;
}

// init_weights, then N(0, 0.05^2) noise on every weight, so that no gradient is zero by construction (both
// projections start at zero) and the gates and lambdas are off their initial values.
std::vector<float> perturbed_weights(const GPTConfig& config) {
  GPT model(config, Device::kCpu, DType::kF32);
  model.init_weights(7);
  std::vector<float> weights = download<float>(model.params());
  const Philox noise(11, Philox::stream_of("perturbation"));
  for (size_t i = 0; i < weights.size(); ++i)
    weights[i] += static_cast<float>(0.05 * noise.normal(static_cast<int64_t>(i)));
  return weights;
}

std::vector<int32_t> random_tokens(uint64_t seed) {
  const Philox tokens(seed, Philox::stream_of("tokens"));
  std::vector<int32_t> ids(kBatch * kSeq);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int32_t>(tokens.uniform(static_cast<int64_t>(i)) * kVocab);
  return ids;
}

// sqrt(sum (a - b)^2) / sqrt(sum b^2) over [begin, end) of two flat arrays.
double relative_frobenius_error(const std::vector<float>& actual, const std::vector<float>& expected,
                                int64_t begin, int64_t end) {
  double error = 0, norm = 0;
  for (int64_t i = begin; i < end; ++i) {
    error += std::pow(double{actual[i]} - expected[i], 2);
    norm += std::pow(double{expected[i]}, 2);
  }
  return std::sqrt(error) / std::sqrt(norm);
}

struct Pass {
  double loss = 0;
  std::vector<float> logits;  // (N, vocab) capped, read after forward()
  std::vector<float> grads;   // flat, layout order
};

Pass run_cpu(const GPTConfig& config, const std::vector<float>& weights, std::vector<int32_t>& ids,
             std::vector<int32_t>& targets, const ops::KernelSettings& settings = {}) {
  GPT model(config, Device::kCpu, DType::kF32);
  model.set_kernel_settings(settings);
  upload(model.params(), weights.data());
  model.plan(kBatch, kSeq);
  model.zero_grad();
  Pass pass;
  pass.loss = model.forward(TensorView(ids.data(), {kBatch, kSeq}, DType::kI32, Device::kCpu),
                            TensorView(targets.data(), {kBatch, kSeq}, DType::kI32, Device::kCpu));
  pass.logits = model.capped_logits(0, kBatch * kSeq);
  model.forward_for_backward(TensorView(ids.data(), {kBatch, kSeq}, DType::kI32, Device::kCpu),
                             TensorView(targets.data(), {kBatch, kSeq}, DType::kI32, Device::kCpu));
  model.backward();
  pass.grads = download<float>(model.grads());
  return pass;
}

Pass run_gpu(const GPTConfig& config, const std::vector<float>& weights, const std::vector<int32_t>& ids,
             const std::vector<int32_t>& targets, const ops::KernelSettings& settings = {}) {
  GPT model(config, Device::kCuda, DType::kBF16);
  model.set_kernel_settings(settings);
  upload(model.params(), weights.data());
  model.weights_changed();
  model.refresh_compute_weights();
  model.plan(kBatch, kSeq);
  model.zero_grad();
  const DeviceBuffer ids_gpu = gpu_test::upload(ids), targets_gpu = gpu_test::upload(targets);
  Pass pass;
  pass.loss = model.forward(TensorView(ids_gpu.data(), {kBatch, kSeq}, DType::kI32, Device::kCuda),
                            TensorView(targets_gpu.data(), {kBatch, kSeq}, DType::kI32, Device::kCuda));
  EXPECT_EQ(model.logits().dtype, DType::kBF16);
  pass.logits = model.capped_logits(0, kBatch * kSeq);  // both sides compare the capped logits
  model.forward_for_backward(TensorView(ids_gpu.data(), {kBatch, kSeq}, DType::kI32, Device::kCuda),
                             TensorView(targets_gpu.data(), {kBatch, kSeq}, DType::kI32, Device::kCuda));
  model.backward();
  pass.grads = download<float>(model.grads());
  return pass;
}

// Tolerances. bf16 keeps 8 significant bits: every activation the GPU stores is rounded by up to 2^-9
// (0.2 %) relative, and the forward pass stores ~15 of them in sequence per block (norms, q/k/v, rotary,
// attention, the MLP, the residual stream itself), weights rounded once more. Independent roundings add up
// like a random walk, so the logits carry ~1 % relative error; the loss, a mean over 383 tokens of
// log-sum-exp minus the target logit, averages most of it away.
constexpr double kLossRelative = 1e-2;
constexpr double kLogitsRelative = 2e-2;
// A gradient carries the forward pass's error plus the backward pass's own roundings (d_logits and every
// d_activation in bf16; weight gradients accumulate in fp32): about twice the logits' error.
constexpr double kGradientRelative = 5e-2;
// Gates and lambdas (fewer than 64 elements) are sums over all N x C products whose terms cancel, so the
// same absolute error is a larger part of the result. A wrong or missing term is off by O(1) either way.
constexpr double kScalarGradientRelative = 1e-1;

class GptCudaMlpGemm : public testing::TestWithParam<ops::MlpGemm> {};

TEST_P(GptCudaMlpGemm, LossLogitsAndEveryGradientMatchTheCpuInFp32) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const GPTConfig config = gpu_config();
  const std::vector<float> weights = perturbed_weights(config);
  std::vector<int32_t> ids = random_tokens(3), targets = random_tokens(4);
  targets[5] = -1;
  const Pass cpu = run_cpu(config, weights, ids, targets);
  const Pass gpu = run_gpu(config, weights, ids, targets, {.mlp_gemm = GetParam()});

  EXPECT_NEAR(gpu.loss, cpu.loss, kLossRelative * cpu.loss);
  const int64_t N = kBatch * kSeq;
  EXPECT_LE(relative_frobenius_error(gpu.logits, cpu.logits, 0, N * kVocab), kLogitsRelative);

  const ParamLayout layout(config);
  std::printf("%-44s %12s %10s\n", "parameter", "rel. error", "tolerance");  // for calibrating on new GPUs
  for (const ParamInfo& param : layout.params()) {
    SCOPED_TRACE(param.name);
    // Padding rows of the embedding and lm_head take no part: their gradients stay exactly zero.
    int64_t used = param.numel;
    if (param.shape.size() == 2 && param.shape[0] == config.padded_vocab_size()) {
      used = kVocab * param.shape[1];
      for (int64_t i = param.offset + used; i < param.offset + param.numel; ++i)
        ASSERT_EQ(gpu.grads[i], 0.0f) << "padding element " << i - param.offset;
    }
    const double tolerance = param.numel < 64 ? kScalarGradientRelative : kGradientRelative;
    const double error = relative_frobenius_error(gpu.grads, cpu.grads, param.offset, param.offset + used);
    std::printf("%-44s %12.3e %10.1e\n", param.name.c_str(), error, tolerance);
    EXPECT_LE(error, tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(MlpGemms, GptCudaMlpGemm,
                         testing::Values(ops::MlpGemm::kCublasLt, ops::MlpGemm::kFused),
                         [](const testing::TestParamInfo<ops::MlpGemm>& info) {
                           return std::string(ops::mlp_gemm_name(info.param));
                         });

// FP8 (model.fp8) on the GPU against FP8 on the CPU: every Linear of this model passes base_train's filter
// (256 wide, kv 128, MLP 1024, lm_head over the vocabulary padded 500 -> 512). The GPU quantises bf16
// activations and bf16 weight copies where the CPU quantises fp32 ones, so a few per cent of the codes land
// one FP8 step apart (a bf16 rounding of 2^-9 crosses an e4m3 rounding midpoint, 2^-4 apart, for ~3 % of the
// elements); measured errors and the tolerances below (twice the bf16 test's) cover that, and the GPU's
// logits must be nearer the CPU's FP8 logits than the CPU's logits without FP8.
// Under both MLP GEMMs: cuBLASLt's FP8 GEMM with the ReLU² pass, and our fused GEMM on FP8 codes.
class GptCudaFp8 : public testing::TestWithParam<ops::MlpGemm> {};

TEST_P(GptCudaFp8, LossLogitsAndGradientsMatchTheCpuFp8) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  GPTConfig config = gpu_config();
  config.n_layer = 1;  // one block holds every kind of FP8 Linear; three would triple the emulated time
  const std::vector<float> weights = perturbed_weights(config);
  std::vector<int32_t> ids = random_tokens(5), targets = random_tokens(6);
  const Pass cpu_fp8 = run_cpu(config, weights, ids, targets, {.fp8 = true});
  const Pass cpu = run_cpu(config, weights, ids, targets);
  const Pass gpu_fp8 = run_gpu(config, weights, ids, targets, {.mlp_gemm = GetParam(), .fp8 = true});
  const int64_t N = kBatch * kSeq;
  EXPECT_NEAR(gpu_fp8.loss, cpu_fp8.loss, 2 * kLossRelative * cpu_fp8.loss);
  const double to_fp8 = relative_frobenius_error(gpu_fp8.logits, cpu_fp8.logits, 0, N * kVocab);
  const double to_full = relative_frobenius_error(gpu_fp8.logits, cpu.logits, 0, N * kVocab);
  std::printf("logits: %.3e from the CPU's FP8, %.3e from its full precision\n", to_fp8, to_full);
  EXPECT_LE(to_fp8, 5 * kLogitsRelative);
  EXPECT_LT(to_fp8, to_full);
  const ParamLayout layout(config);
  for (const ParamInfo& param : layout.params()) {
    SCOPED_TRACE(param.name);
    // One block: the backout snapshot is the block's output, the final norm is scale-invariant, and
    // backout_lambda's gradient is rounding noise (~1e-8) on both sides.
    if (param.name == "backout_lambda") continue;
    int64_t used = param.numel;
    if (param.shape.size() == 2 && param.shape[0] == config.padded_vocab_size())
      used = kVocab * param.shape[1];
    const double tolerance = 5 * (param.numel < 64 ? kScalarGradientRelative : kGradientRelative);
    const double error =
        relative_frobenius_error(gpu_fp8.grads, cpu_fp8.grads, param.offset, param.offset + used);
    std::printf("%-44s %12.3e %10.1e\n", param.name.c_str(), error, tolerance);
    EXPECT_LE(error, tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(MlpGemms, GptCudaFp8, testing::Values(ops::MlpGemm::kCublasLt, ops::MlpGemm::kFused),
                         [](const testing::TestParamInfo<ops::MlpGemm>& info) {
                           return std::string(ops::mlp_gemm_name(info.param));
                         });

TEST(GptCuda, RefreshRoundsTheMasterMatricesToBf16) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  const GPTConfig config = gpu_config();
  GPT model(config, Device::kCuda, DType::kBF16);
  const std::vector<float> weights = perturbed_weights(config);
  upload(model.params(), weights.data());
  model.weights_changed();
  model.refresh_compute_weights();
  const ParamLayout& layout = model.layout();
  auto check = [&](const TensorView& copy, const std::string& name) {
    SCOPED_TRACE(name);
    ASSERT_EQ(copy.dtype, DType::kBF16);
    std::vector<uint16_t> bits(static_cast<size_t>(copy.numel()));
    cuda::copy_to_host(bits.data(), copy.data, copy.bytes());
    const int64_t offset = layout.at(name).offset;
    for (size_t i = 0; i < bits.size(); ++i)
      ASSERT_EQ(bits[i], gpu_test::bf16_bits(weights[offset + i])) << "element " << i;
  };
  const ModelWeights& w = model.compute_weights();
  check(w.lm_head, "lm_head.weight");
  for (int64_t layer = 0; layer < config.n_layer; ++layer) {
    const BlockWeights& b = w.blocks[static_cast<size_t>(layer)];
    check(b.c_vkq, layer_param(layer, "attn.c_v"));  // c_v, then c_k and c_q after it, as in the master
    check(b.c_proj, layer_param(layer, "attn.c_proj"));
    check(b.fc, layer_param(layer, "mlp.c_fc"));
    check(b.mlp_proj, layer_param(layer, "mlp.c_proj"));
    // Gates and lambdas are read from the master itself.
    EXPECT_EQ(b.resid_lambda.data, model.weights().blocks[static_cast<size_t>(layer)].resid_lambda.data);
    EXPECT_EQ(b.ve_gate.data, model.weights().blocks[static_cast<size_t>(layer)].ve_gate.data);
  }
  EXPECT_EQ(w.wte.dtype, DType::kF32);
}

TEST(GptCuda, ForwardRefusesCopiesOlderThanTheWeights) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorView ids(nullptr, {kBatch, kSeq}, DType::kI32, Device::kCuda);
  EXPECT_DEATH(
      {
        GPT model(gpu_config(), Device::kCuda, DType::kBF16);
        model.init_weights(1);
        model.forward(ids, ids);
      },
      "older than the fp32 weights.*refresh_compute_weights");
  EXPECT_DEATH(
      {
        GPT model(gpu_config(), Device::kCuda, DType::kBF16);
        model.init_weights(1);
        model.refresh_compute_weights();
        model.weights_changed();  // e.g. an optimizer step
        model.forward(ids, ids);
      },
      "older than the fp32 weights");
}

// A GPU model with `settings` at `weights`, planned for the test's batch, its gradients zero.
std::unique_ptr<GPT> gpu_model(const GPTConfig& config, const std::vector<float>& weights,
                               const ops::KernelSettings& settings) {
  auto model = std::make_unique<GPT>(config, Device::kCuda, DType::kBF16);
  model->set_kernel_settings(settings);
  upload(model->params(), weights.data());
  model->weights_changed();
  model->refresh_compute_weights();
  model->plan(kBatch, kSeq);
  model->zero_grad();
  return model;
}

// Two models in one process with different kernel settings (cuBLASLt's MLP GEMM in deterministic mode; our
// fused GEMM with atomic table scatters), their training passes interleaved, each give what the same model
// gives run alone (value embeddings on one of the two layers, GQA off at this width). With the process-wide
// settings this replaced, one value served both models, so one of them ran the other's MLP GEMM and its loss
// and gradients left its own (the two differ: checked first).
TEST(GptCuda, ModelsWithDifferentKernelSettingsRunSideBySide) {
  NANOFORGE_SKIP_WITHOUT_GPU();
  GPTConfig config = gpu_config();  // narrower and shallower: four passes on the emulator, kept short
  config.n_layer = 2;
  config.n_embd = 128;
  config.n_head = 1;
  const std::vector<float> weights = perturbed_weights(config);
  const DeviceBuffer ids = gpu_test::upload(random_tokens(3)), targets = gpu_test::upload(random_tokens(4));
  const TensorView ids_view(ids.data(), {kBatch, kSeq}, DType::kI32, Device::kCuda);
  const TensorView targets_view(targets.data(), {kBatch, kSeq}, DType::kI32, Device::kCuda);
  const ops::KernelSettings settings_a{.mlp_gemm = ops::MlpGemm::kCublasLt, .deterministic = true};
  const ops::KernelSettings settings_b{.mlp_gemm = ops::MlpGemm::kFused, .deterministic = false};
  struct Result {
    double loss = 0;
    std::vector<float> grads;
  };
  const auto alone = [&](const ops::KernelSettings& settings) {
    const std::unique_ptr<GPT> model = gpu_model(config, weights, settings);
    const double loss = model->forward_for_backward(ids_view, targets_view);
    model->backward();
    return Result{loss, download<float>(model->grads())};
  };
  const Result a_alone = alone(settings_a), b_alone = alone(settings_b);
  ASSERT_NE(a_alone.loss, b_alone.loss) << "the settings must change the bits, or this test shows nothing";

  const std::unique_ptr<GPT> a = gpu_model(config, weights, settings_a),
                             b = gpu_model(config, weights, settings_b);
  const double a_loss = a->forward_for_backward(ids_view, targets_view);
  const double b_loss = b->forward_for_backward(ids_view, targets_view);
  a->backward();
  b->backward();
  EXPECT_EQ(a_loss, a_alone.loss);
  EXPECT_EQ(b_loss, b_alone.loss);
  EXPECT_EQ(download<float>(a->grads()), a_alone.grads);
  // b scatters the embedding tables' gradients with atomics, whose order may change between runs: those
  // within fp32 reordering, every other gradient bit for bit.
  const std::vector<float> b_grads = download<float>(b->grads());
  for (const ParamInfo& param : b->layout().params()) {
    SCOPED_TRACE(param.name);
    const int64_t begin = param.offset, end = param.offset + param.numel;
    if (param.name == "transformer.wte.weight" || param.name.rfind("value_embeds.", 0) == 0) {
      EXPECT_LE(relative_frobenius_error(b_grads, b_alone.grads, begin, end), 1e-6);
    } else {
      EXPECT_TRUE(std::equal(b_grads.begin() + begin, b_grads.begin() + end, b_alone.grads.begin() + begin));
    }
  }
}

TEST(GptCudaContract, GpuModelsTrainInBf16) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(GPT(gpu_config(), Device::kCuda, DType::kF32), "GPT on CUDA trains with bf16 activations");
}

}  // namespace
}  // namespace nanoforge
