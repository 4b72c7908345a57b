// ParamLayout: nanochat's parameter names, shapes and counts (the 896.5M of depth 20), buffer order.
#include <gtest/gtest.h>

#include <set>

#include "model/param_layout.h"

namespace nanoforge {
namespace {

TEST(ParamLayout, Depth20HasNanochats896_5MParameters) {
  const ParamCounts counts = ParamLayout(GPTConfig::from_depth(20, 32768, 2048)).counts();
  EXPECT_EQ(counts.wte, 41'943'040);
  EXPECT_EQ(counts.value_embeds, 419'430'400);
  EXPECT_EQ(counts.lm_head, 41'943'040);
  EXPECT_EQ(counts.transformer_matrices, 393'217'200);
  EXPECT_EQ(counts.scalars, 66);
  EXPECT_EQ(counts.total, 896'533'746);
  EXPECT_EQ(counts.scaling(), 435'160'240);
}

TEST(ParamLayout, OtherDepthsMatchNanochatsCounts) {
  struct Expected {
    int64_t depth, wte, value_embeds, matrices, scalars, total, scaling;
  };
  for (const Expected& e :
       {Expected{12, 25'165'824, 150'994'944, 84'935'088, 50, 286'261'730, 110'100'912},
        Expected{24, 50'331'648, 603'979'776, 679'478'976, 74, 1'384'122'122, 729'810'624},
        Expected{26, 54'525'952, 708'837'376, 863'897'580, 78, 1'681'786'938, 918'423'532}}) {
    const ParamCounts counts = ParamLayout(GPTConfig::from_depth(e.depth, 32768, 2048)).counts();
    EXPECT_EQ(counts.wte, e.wte) << "depth " << e.depth;
    EXPECT_EQ(counts.lm_head, e.wte) << "depth " << e.depth;
    EXPECT_EQ(counts.value_embeds, e.value_embeds) << "depth " << e.depth;
    EXPECT_EQ(counts.transformer_matrices, e.matrices) << "depth " << e.depth;
    EXPECT_EQ(counts.scalars, e.scalars) << "depth " << e.depth;
    EXPECT_EQ(counts.total, e.total) << "depth " << e.depth;
    EXPECT_EQ(counts.scaling(), e.scaling) << "depth " << e.depth;
  }
}

TEST(ParamLayout, PrintsCountsAsNanochatDoes) {
  const std::string text = format_param_counts(ParamLayout(GPTConfig::from_depth(20, 32768, 2048)).counts());
  EXPECT_NE(text.find("total                   :     896,533,746"), std::string::npos) << text;
  EXPECT_NE(text.find("value_embeds            :     419,430,400"), std::string::npos) << text;
}

TEST(ParamLayout, StateDictOrderIsNanochatsRegistrationOrder) {
  GPTConfig config;
  config.n_layer = 2;
  config.n_embd = 128;
  config.n_head = 2;
  config.n_kv_head = 2;
  config.vocab_size = 300;
  config.sequence_len = 160;
  config.window_pattern = "SL";
  // dev_case1.h5's /meta param_names, written by nanochat.
  const std::vector<std::string> expected = {"resid_lambdas",
                                             "x0_lambdas",
                                             "smear_lambda",
                                             "backout_lambda",
                                             "transformer.wte.weight",
                                             "transformer.h.0.attn.c_q.weight",
                                             "transformer.h.0.attn.c_k.weight",
                                             "transformer.h.0.attn.c_v.weight",
                                             "transformer.h.0.attn.c_proj.weight",
                                             "transformer.h.0.mlp.c_fc.weight",
                                             "transformer.h.0.mlp.c_proj.weight",
                                             "transformer.h.1.attn.c_q.weight",
                                             "transformer.h.1.attn.c_k.weight",
                                             "transformer.h.1.attn.c_v.weight",
                                             "transformer.h.1.attn.c_proj.weight",
                                             "transformer.h.1.attn.ve_gate.weight",
                                             "transformer.h.1.mlp.c_fc.weight",
                                             "transformer.h.1.mlp.c_proj.weight",
                                             "lm_head.weight",
                                             "smear_gate.weight",
                                             "value_embeds.1.weight"};
  const ParamLayout layout(config);
  EXPECT_EQ(layout.state_dict_order(), expected);
  EXPECT_EQ(layout.params().size(), expected.size());
  EXPECT_EQ(layout.at("value_embeds.1.weight").shape, (std::vector<int64_t>{320, 128}));
  EXPECT_EQ(layout.at("transformer.h.1.attn.ve_gate.weight").shape, (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(layout.at("smear_gate.weight").shape, (std::vector<int64_t>{1, 24}));
  EXPECT_EQ(layout.find("value_embeds.0.weight"), nullptr);
}

TEST(ParamLayout, GqaShapesUseKvHeads) {
  GPTConfig config;
  config.n_layer = 3;
  config.n_embd = 128;
  config.n_head = 4;
  config.n_kv_head = 2;
  const ParamLayout layout(config);
  EXPECT_EQ(layout.at("transformer.h.0.attn.c_q.weight").shape, (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(layout.at("transformer.h.0.attn.c_k.weight").shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(layout.at("value_embeds.2.weight").shape, (std::vector<int64_t>{32768, 64}));
  EXPECT_EQ(layout.at("transformer.h.2.attn.ve_gate.weight").shape, (std::vector<int64_t>{2, 12}));
}

TEST(ParamLayout, BufferIsContiguousInBackwardOrder) {
  const ParamLayout layout(GPTConfig::from_depth(4, 512, 256));
  int64_t offset = 0;
  std::set<std::string> names;
  for (const ParamInfo& param : layout.params()) {
    EXPECT_EQ(param.offset, offset) << param.name;
    offset += param.numel;
    names.insert(param.name);
  }
  EXPECT_EQ(offset, layout.total_numel());
  EXPECT_EQ(names.size(), layout.params().size());
  // lm_head's gradient is complete first in the backward pass, the token embedding's last.
  EXPECT_EQ(layout.params().front().name, "lm_head.weight");
  EXPECT_EQ(layout.params().back().name, "transformer.wte.weight");
  EXPECT_LT(layout.at(layer_param(3, "mlp.c_proj")).offset, layout.at(layer_param(0, "attn.c_q")).offset);
  // Every GEMM matrix starts on a 16-byte boundary of the fp32 buffers: its gradient is a cuBLASLt output on
  // the GPU, and the optimizer's kernels use 16-byte loads (a lone scalar between matrices would break it).
  for (const ParamInfo& param : layout.params()) {
    if (param.kind == ParamKind::kMatrix || param.kind == ParamKind::kUnembedding) {
      EXPECT_EQ(param.offset % 4, 0) << param.name << " at element " << param.offset;
    }
  }
}

}  // namespace
}  // namespace nanoforge
