// The layout of the GPU's bf16 copies of the GEMM matrices (model/compute_weights.h), checked on the host:
// exactly the matrices matmul reads have a copy, each starts 256-byte aligned, none overlap, and the runs
// convert each matrix once from its own place in the master. For nanochat's shapes the runs merge to one for
// lm_head plus one per stretch between value-embedding layers; odd shapes only cost more runs. A CPU model
// keeps no copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/compute_weights.h"
#include "model/gpt.h"

namespace nanoforge {
namespace {

int64_t value_embedding_layers(const GPTConfig& config) {
  int64_t count = 0;
  for (int64_t layer = 0; layer < config.n_layer; ++layer)
    count += config.has_value_embed(layer);
  return count;
}

// Every invariant of a layout; returns the number of matrices with a copy.
int64_t check_layout(const ParamLayout& layout, const ComputeWeightLayout& compute) {
  const std::vector<ParamInfo>& params = layout.params();
  EXPECT_EQ(compute.copy_offset.size(), params.size());
  int64_t matrices = 0, copy_end = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& param = params[i];
    SCOPED_TRACE(param.name);
    const bool expected_copy = param.name == "lm_head.weight" ||
                               param.name.find("attn.c_") != std::string::npos ||
                               param.name.find("mlp.c_") != std::string::npos;
    EXPECT_EQ(is_gemm_matrix(param), expected_copy);
    EXPECT_EQ(compute.copy_offset[i] >= 0, expected_copy);
    if (!expected_copy) continue;
    ++matrices;
    // c_k and c_q continue c_v with no gap (one stacked matrix to the fused GEMM); every other matrix starts
    // aligned.
    const bool continues_vkq = param.name.find("attn.c_k.") != std::string::npos ||
                               param.name.find("attn.c_q.") != std::string::npos;
    if (continues_vkq) {
      EXPECT_EQ(compute.copy_offset[i], copy_end);
    } else {
      EXPECT_EQ(compute.copy_offset[i] * dtype_bytes(compute.dtype) % ArenaAllocator::kAlignmentBytes, 0);
    }
    EXPECT_GE(compute.copy_offset[i], copy_end);  // in master order, no overlap
    copy_end = compute.copy_offset[i] + param.numel;
    // The run holding this matrix maps its master range onto its copy range.
    const auto run = std::find_if(compute.runs.begin(), compute.runs.end(), [&](const auto& r) {
      return r.master_offset <= param.offset && param.offset < r.master_offset + r.numel;
    });
    EXPECT_NE(run, compute.runs.end());
    if (run == compute.runs.end()) continue;
    EXPECT_LE(param.offset + param.numel, run->master_offset + run->numel);
    EXPECT_EQ(run->copy_offset + (param.offset - run->master_offset), compute.copy_offset[i]);
  }
  EXPECT_EQ(compute.bytes, copy_end * dtype_bytes(compute.dtype));
  // The runs cover the matrices and nothing else: their sizes add up to the matrices' sizes.
  int64_t run_elements = 0, matrix_elements = 0;
  for (const ComputeWeightLayout::Run& run : compute.runs)
    run_elements += run.numel;
  for (const ParamInfo& param : params)
    matrix_elements += is_gemm_matrix(param) ? param.numel : 0;
  EXPECT_EQ(run_elements, matrix_elements);
  return matrices;
}

TEST(ComputeWeights, NanochatShapesMergeIntoFewRuns) {
  for (int64_t depth : {4, 5, 20}) {
    SCOPED_TRACE(depth);
    const GPTConfig config = GPTConfig::from_depth(depth, 32768, 2048);
    const ParamLayout layout(config);
    const ComputeWeightLayout compute = compute_weight_layout(layout, DType::kBF16);
    EXPECT_EQ(check_layout(layout, compute), 6 * depth + 1);
    // lm_head and the block matrices are adjacent in the layout: one run, cut by each value embedding.
    EXPECT_EQ(static_cast<int64_t>(compute.runs.size()), 1 + value_embedding_layers(config));
    int64_t matrix_elements = config.padded_vocab_size() * config.n_embd;
    matrix_elements +=
        config.n_layer * (2 * config.n_embd * config.n_embd + 2 * config.kv_dim() * config.n_embd +
                          2 * config.mlp_dim() * config.n_embd);
    EXPECT_EQ(compute.bytes, 2 * matrix_elements);  // no padding at all
  }
}

TEST(ComputeWeights, OddShapesStayAlignedWithMoreRuns) {
  GPTConfig config;
  config.n_layer = 3;
  config.n_embd = 36;  // 36 x 36 = 1296 bf16 elements: not a whole number of 256-byte blocks
  config.n_head = 2;
  config.n_kv_head = 1;
  config.vocab_size = 37;
  config.sequence_len = 64;
  ASSERT_TRUE(config.validate().ok());
  const ParamLayout layout(config);
  const ComputeWeightLayout compute = compute_weight_layout(layout, DType::kBF16);
  EXPECT_EQ(check_layout(layout, compute), 6 * config.n_layer + 1);
  EXPECT_GT(static_cast<int64_t>(compute.runs.size()), 2 + value_embedding_layers(config));
}

TEST(ComputeWeights, CpuModelsReadTheirParameters) {
  GPTConfig config = GPTConfig::from_sizing(
      {.depth = 2, .aspect_ratio = 64, .head_dim = 64, .max_seq_len = 64, .window_pattern = "SL"}, 300);
  GPT model(config, Device::kCpu, DType::kF32);
  EXPECT_EQ(model.compute_weight_bytes(), 0);
  EXPECT_EQ(model.param_dtype(), DType::kF32);
  EXPECT_EQ(model.compute_weights().blocks[1].c_vkq.data, model.weights().blocks[1].c_vkq.data);
  EXPECT_EQ(model.compute_weights().lm_head.data, model.weights().lm_head.data);
  const GPT::MemoryBytes bytes = GPT::memory_bytes(config, Device::kCpu, DType::kF32);
  EXPECT_EQ(bytes.params, model.params().bytes());
  EXPECT_EQ(bytes.compute_weights, 0);
}

TEST(ComputeWeights, GpuModelsKeepFp32ParametersAndBf16Matrices) {
  // Measured only: nothing is allocated, so this runs without a GPU.
  const GPTConfig config = GPTConfig::from_depth(4, 32768, 2048);
  const GPT::MemoryBytes gpu = GPT::memory_bytes(config, Device::kCuda, DType::kBF16);
  const GPT::MemoryBytes cpu = GPT::memory_bytes(config, Device::kCpu, DType::kF32);
  EXPECT_EQ(gpu.params, cpu.params);  // fp32 master weights on both
  EXPECT_EQ(gpu.grads, cpu.grads);
  EXPECT_EQ(gpu.compute_weights, compute_weight_layout(ParamLayout(config), DType::kBF16).bytes);
  EXPECT_EQ(gpu.rotary_tables, cpu.rotary_tables);  // f32 tables on both
}

}  // namespace
}  // namespace nanoforge
