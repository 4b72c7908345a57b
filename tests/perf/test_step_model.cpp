// The performance model (perf/): the recorded step against independent counts of the model's
// FLOPs (6 x GEMM weights x tokens, attention tile pairs by diagonals), of ZeRO-1's collectives (the GEMM
// matrices all-gathered in bf16) and of Muon's GEMMs, the recorded op names and counts against the CPU op
// profiler's of a real training step (the order too: test_step_drift.cpp), the roofline and timeline
// arithmetic on hand-made GPUs, and the JSON line.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "dist/single_communicator.h"
#include "kernels/device_buffer.h"
#include "kernels/host_transfer.h"
#include "kernels/op_profile.h"
#include "model/flops.h"
#include "model/fp8_linears.h"
#include "model/gpt.h"
#include "model/param_layout.h"
#include "optim/data_parallel_optimizer.h"
#include "optim/param_groups.h"
#include "perf/step_report.h"
#include "step/training_step.h"
#include "tests/perf/attention_tile_pairs.h"

namespace nanoforge {
namespace {

// depth 4: C = 256, 2 heads of 128, windows S S S L = 128, 128, 128, 256 at seq 256; two value-embedding
// layers.
GPTConfig small_config() {
  return GPTConfig::from_depth(4, 512, 256);
}

double flops_of(const std::vector<StepEvent>& events, const std::string& op, StepPhase phase) {
  double total = 0;
  for (const StepEvent& event : events) {
    if (event.kind == StepEvent::Kind::kOp && event.op == op && event.phase == phase)
      total += event.cost.tensor_flops;
  }
  return total;
}

int64_t count_of(const std::vector<StepEvent>& events, const std::string& op, StepPhase phase) {
  int64_t count = 0;
  for (const StepEvent& event : events)
    count += event.kind == StepEvent::Kind::kOp && event.op == op && event.phase == phase;
  return count;
}

// The weights the GEMMs multiply by, from the architecture: per layer q, k, v, proj, fc, mlp proj; lm_head's
// vocab rows (not its padding).
int64_t gemm_weights(const GPTConfig& c) {
  const int64_t C = c.n_embd, kv = c.n_kv_head * (c.n_embd / c.n_head);
  return c.n_layer * (C * C + 2 * C * kv + C * C + 2 * C * 4 * C) + c.vocab_size * C;
}

TEST(StepModel, GemmFlopsAreSixPerGemmWeightPerToken) {
  for (const GPTConfig& config : {small_config(), GPTConfig::from_depth(20, 32768, 2048)}) {
    const int64_t batch = config.n_layer == 20 ? 32 : 3;  // d20 at its real size: nothing is allocated
    const std::vector<StepEvent> events = record_training_step({.config = config, .batch = batch});
    const double tokens = static_cast<double>(batch * config.sequence_len);
    const double gemm =
        flops_of(events, "matmul", StepPhase::kForward) + flops_of(events, "matmul", StepPhase::kBackward);
    EXPECT_EQ(gemm, 6 * tokens * static_cast<double>(gemm_weights(config))) << config.describe();
    EXPECT_EQ(flops_of(events, "matmul", StepPhase::kForward), 2 * tokens * gemm_weights(config));
    // nanochat's count (model/flops.h) has the same weights plus the value gates, the smear gate and the
    // lm_head padding, which no GEMM multiplies by.
    const ParamLayout layout(config);
    int64_t gates = 0;
    for (int64_t layer = 0; layer < config.n_layer; ++layer)
      gates += config.has_value_embed(layer) ? config.n_kv_head * kValueGateChannels : 0;
    EXPECT_EQ(matmul_params(config), gemm_weights(config) + gates + kSmearGateChannels +
                                         (config.padded_vocab_size() - config.vocab_size) * config.n_embd);
  }
}

// With FP8, the amax of each Linear's input comes from the kernel that wrote it (the norms, ReLU² or the
// fused MLP GEMM) or, for the attention's output, from the quantiser's own pass; the backward pass takes no x
// or W amax again (kernels/fp8_amax.h). A quantisation with its own amax pass launches three kernels
// (zeroing, amax, quantise), one given its amax launches one; a producer asked for its amax launches one more
// (the zeroing). With the fused MLP GEMM the ReLU² passes are gone: the FP8 GEMM ops carry them.
TEST(StepModel, Fp8TakesEachAmaxOnceAndFusesItIntoTheProducers) {
  const GPTConfig config = small_config();
  const Fp8Linears linears = Fp8Linears::of(config);
  ASSERT_TRUE(linears.c_q && linears.c_k && linears.c_v && linears.c_proj && linears.mlp_fc &&
              linears.mlp_proj && linears.lm_head);
  for (const ops::MlpGemm gemm : {ops::MlpGemm::kCublasLt, ops::MlpGemm::kFused}) {
    SCOPED_TRACE(ops::mlp_gemm_name(gemm));
    StepRecordingOptions options;
    options.config = config;
    options.batch = 2;
    options.kernel_settings.mlp_gemm = gemm;
    options.kernel_settings.fp8 = true;
    const std::vector<StepEvent> events = record_training_step(options);
    auto launches = [&](const std::string& op, StepPhase phase, int kernels) {
      int64_t count = 0;
      for (const StepEvent& event : events) {
        count += event.kind == StepEvent::Kind::kOp && event.op == op && event.phase == phase &&
                 event.cost.kernels == kernels;
      }
      return count;
    };
    const int64_t layers = config.n_layer;
    const int64_t weights = 6 * layers + 1;  // c_v, c_k, c_q, c_proj, fc, mlp proj per layer; lm_head
    // Forward: every weight's amax taken, and the attention output's; the inputs the norms and ReLU² wrote
    // given.
    EXPECT_EQ(launches("fp8_quantize", StepPhase::kForward, 3), weights + layers);
    EXPECT_EQ(launches("fp8_quantize", StepPhase::kForward, 1), 3 * layers + 1);
    // Backward: only the output gradients' amax taken; every x and W quantised from the forward's.
    EXPECT_EQ(launches("fp8_quantize", StepPhase::kBackward, 3), weights);
    EXPECT_EQ(launches("fp8_quantize", StepPhase::kBackward, 1), (4 * layers + 1) + weights);
    EXPECT_EQ(launches("residual_mix_rmsnorm_forward", StepPhase::kForward, 2), layers);
    EXPECT_EQ(launches("rmsnorm_forward", StepPhase::kForward, 2), layers + 1);  // norm2s and the final norm
    EXPECT_EQ(launches("rmsnorm_forward", StepPhase::kForward, 1), 1);  // the embedding's: no GEMM reads it
    const bool fused = gemm == ops::MlpGemm::kFused;
    EXPECT_EQ(launches("relu_squared_forward", StepPhase::kForward, 2), fused ? 0 : layers);
    EXPECT_EQ(launches("fp8_linear_relu_squared_forward", StepPhase::kForward, 2), fused ? layers : 0);
    EXPECT_EQ(count_of(events, "relu_squared_backward", StepPhase::kBackward), fused ? 0 : layers);
    EXPECT_EQ(count_of(events, "fp8_relu_squared_linear_backward", StepPhase::kBackward), fused ? layers : 0);
  }
}

TEST(StepModel, AttentionFlopsFollowEachLayersWindow) {
  const GPTConfig config = small_config();
  const int64_t batch = 3, tiles = config.sequence_len / 64;
  ASSERT_EQ(config.window(0), 128);
  ASSERT_EQ(config.window(3), 256);
  double expected = 0;
  for (int64_t layer = 0; layer < config.n_layer; ++layer) {
    expected +=
        2.0 * (2 * 64 * 64 * config.head_dim()) *
        static_cast<double>(pairs_by_diagonals(tiles, config.window(layer) / 64) * batch * config.n_head);
  }
  const std::vector<StepEvent> events = record_training_step({.config = config, .batch = batch});
  EXPECT_EQ(flops_of(events, "attention_forward", StepPhase::kForward), expected);
  EXPECT_EQ(flops_of(events, "attention_backward", StepPhase::kBackward), 3.5 * expected);
  EXPECT_EQ(count_of(events, "attention_forward", StepPhase::kForward), config.n_layer);
}

// The recording is the real call sequence: a profiled CPU step has the same op names with the same counts.
TEST(StepModel, RecordedOpsMatchTheProfiledCpuStepRowByRow) {
  const GPTConfig config = GPTConfig::from_depth(2, 256, 128);
  const int64_t batch = 2;
  GPT model(config, Device::kCpu, DType::kF32);
  model.init_weights(7);
  model.refresh_compute_weights();
  model.plan(batch, config.sequence_len);
  std::vector<int32_t> tokens(static_cast<size_t>(batch * config.sequence_len));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i * 37) % 256);
  DeviceBuffer buffer(Device::kCpu, 2 * static_cast<int64_t>(tokens.size() * sizeof(int32_t)));
  const TensorView ids(buffer.data(), {batch, config.sequence_len}, DType::kI32, Device::kCpu);
  const TensorView targets(static_cast<int32_t*>(buffer.data()) + tokens.size(), {batch, config.sequence_len},
                           DType::kI32, Device::kCpu);
  upload(ids, tokens.data());
  upload(targets, tokens.data());
  SingleCommunicator single(Device::kCpu);
  DataParallelOptimizer optimizer(
      nanochat_param_groups(config, model.layout(), OptimizerHyperparameters{}, 1.0, 0.0), model.layout(),
      model.params(), model.grads(), single, StepRecordingOptions{}.bucket_bytes,
      {model.compute_copy(), model.compute_layout().copy_offset});
  TrainingStep step(model, optimizer, 1);
  StepRequest request;
  request.next_micro_batch = [&](int64_t) -> absl::StatusOr<MicroBatch> { return MicroBatch{ids, targets}; };
  ASSERT_TRUE(step.run(request).ok());  // the recording prices the second of two steps
  ops::reset_op_profile();
  ops::set_op_profiling(true);
  ASSERT_TRUE(step.run(request).ok());
  ops::set_op_profiling(false);
  const std::vector<ops::OpTime> measured = ops::op_profile();

  StepRecordingOptions recording{.config = config, .batch = batch};
  recording.device = Device::kCpu;
  const StepPrediction prediction =
      predict_step(record_training_step(recording), *gpu_spec("h100"), config, batch, 1, 1);
  const std::vector<ComparedRow> rows = compare_with_measured(prediction, measured);
  ASSERT_EQ(rows.size(), measured.size());
  for (const ComparedRow& row : rows) {
    EXPECT_EQ(row.predicted_calls, row.measured_calls) << row.name;
    EXPECT_GT(row.predicted_ms, 0) << row.name;
  }
}

// Muon matrices per shape of a depth-4 model without GQA: (C, C) q, k, v, proj per layer; (4C, C) fc and
// (C, 4C) proj per layer; the value gates (n_kv_head, 12) on the value-embedding layers.
std::vector<int64_t> muon_matrices_per_shape(const GPTConfig& c) {
  int64_t gates = 0;
  for (int64_t layer = 0; layer < c.n_layer; ++layer)
    gates += c.has_value_embed(layer);
  return {4 * c.n_layer, c.n_layer, c.n_layer, gates};
}

// The bytes the all-gathers save by gathering the bf16 compute copies of the GEMM matrices (half of their
// fp32 bytes) on `world` ranks, from the architecture: the Muon stacks of (C, C) matrices (q, k, v, proj:
// 4 per layer) and of fc and mlp proj (one per layer each), every stack padded to `world` slots; lm_head
// (AdamW, in an elementwise bucket of its own: it never shares one with tensors gathered fp32).
int64_t bf16_gather_savings(const GPTConfig& c, int world) {
  const auto slots = [world](int64_t matrices) { return (matrices + world - 1) / world * world; };
  const int64_t C = c.n_embd;
  const int64_t elements =
      slots(4 * c.n_layer) * C * C + 2 * slots(c.n_layer) * 4 * C * C + c.padded_vocab_size() * C;
  return 2 * elements;  // 4 bytes each in the reduce-scatters, 2 in the all-gathers
}

TEST(StepModel, DataParallelStepHasZeroOneCollectivesAndRankZerosMuonWork) {
  const GPTConfig config = small_config();
  for (const int world : {1, 8}) {
    StepRecordingOptions options{.config = config, .batch = 2};
    options.world_size = world;
    const std::vector<StepEvent> events = record_training_step(options);
    std::map<std::string, int64_t> issued_bytes, issued_count;
    int64_t waited = 0, waited_in_forward = 0;
    for (const StepEvent& event : events) {
      if (event.phase == StepPhase::kPreviousStep) continue;
      if (event.kind == StepEvent::Kind::kCollectiveIssued) {
        issued_bytes[collective_name(event.collective.kind)] += event.collective.bytes;
        issued_count[collective_name(event.collective.kind)] += 1;
      }
      waited += event.kind == StepEvent::Kind::kCollectiveWaited;
      waited_in_forward +=
          event.kind == StepEvent::Kind::kCollectiveWaited && event.phase == StepPhase::kForward;
    }
    // Rank 0 owns the first matrix of every stack of `world` matrices: 3 GEMMs x 5 Polar Express iterations
    // for each.
    int64_t stacks = 0;
    for (const int64_t matrices : muon_matrices_per_shape(config))
      stacks += (matrices + world - 1) / world;
    EXPECT_EQ(count_of(events, "matmul", StepPhase::kOptimizer), 15 * stacks) << world;
    // The step's scalars stay on the device: no read-back op, one add of the loss per micro-batch.
    EXPECT_EQ(count_of(events, "sum_loss", StepPhase::kForward), 0);
    EXPECT_EQ(count_of(events, "squared_norm", StepPhase::kOptimizer), 0);
    EXPECT_EQ(count_of(events, "add_mean_loss", StepPhase::kForward), 1);
    if (world == 1) {
      EXPECT_TRUE(issued_count.empty());  // one rank: the single engine copies, nothing goes on a link
      continue;
    }
    const int64_t buckets = issued_count["reduce_scatter"];
    EXPECT_GT(buckets, 0);
    EXPECT_EQ(count_of(events, "add_squared_norm", StepPhase::kOptimizer), buckets);
    EXPECT_EQ(issued_count["all_gather"], buckets);
    EXPECT_EQ(issued_count["all_reduce"], 1);  // the loss, gradient norm and stop votes
    EXPECT_EQ(issued_bytes["all_reduce"], 4 * 8);
    // Each reduction and the scalars' all-reduce are waited for in the step; the previous step's gathers by
    // this step's forward, layer by layer; this step's gathers by the next forward.
    EXPECT_EQ(waited, 2 * buckets + 1);
    EXPECT_EQ(waited_in_forward, buckets);
    EXPECT_GE(issued_bytes["reduce_scatter"], 4 * ParamLayout(config).total_numel());
    EXPECT_EQ(issued_bytes["reduce_scatter"] - issued_bytes["all_gather"],
              bf16_gather_savings(config, world));
  }
}

GpuSpec round_gpu() {
  GpuSpec gpu;
  gpu.name = "h200";  // for MFU's peak
  gpu.tensor_flops = 1e15;
  gpu.fp32_flops = 1e14;
  gpu.memory_bytes_per_s = 1e12;
  gpu.link_bytes_per_s = 1e11;
  gpu.sms = 10;
  gpu.gemm_efficiency = 0.5;
  gpu.own_gemm_efficiency = 0.4;
  gpu.attention_forward_efficiency = 0.25;
  gpu.attention_backward_efficiency = 0.2;
  gpu.fp32_efficiency = 0.5;
  gpu.memory_efficiency = 0.5;
  gpu.link_efficiency = 0.5;
  gpu.link_latency_seconds = 1e-5;
  gpu.kernel_floor_seconds = 1e-6;
  gpu.host_sync_seconds = 1e-5;
  return gpu;
}

TEST(StepModel, OpTimeIsTheSlowestOfItsRoofs) {
  const GpuSpec gpu = round_gpu();
  OpCost gemm;
  gemm.kind = CostClass::kGemm;
  gemm.tensor_flops = 1e12;
  gemm.bytes = 1e6;
  gemm.gemm_rows = 128 * 10;  // 10 x 10 tiles on 10 SMs: full waves
  gemm.gemm_cols = 128 * 10;
  EXPECT_DOUBLE_EQ(predict_op(gemm, gpu).seconds, 1e12 / (1e15 * 0.5));
  EXPECT_EQ(predict_op(gemm, gpu).bound, Bound::kTensor);
  gemm.gemm_cols = 128;  // 10 tiles, one wave: full
  EXPECT_DOUBLE_EQ(gemm_wave_fill(gemm.gemm_rows, gemm.gemm_cols, gpu.sms), 1.0);
  EXPECT_DOUBLE_EQ(gemm_wave_fill(128 * 11, 128, gpu.sms), 11.0 / 20.0);  // a second wave of one tile
  OpCost ours = gemm;  // our fused MLP GEMM: its own efficiency, the same wave fill
  ours.kind = CostClass::kOwnGemm;
  EXPECT_DOUBLE_EQ(predict_op(ours, gpu).seconds, 1e12 / (1e15 * 0.4));
  OpCost stream;
  stream.bytes = 1e9;
  stream.vector_flops = 1e9;
  EXPECT_DOUBLE_EQ(predict_op(stream, gpu).seconds, 1e9 / (1e12 * 0.5));
  EXPECT_EQ(predict_op(stream, gpu).bound, Bound::kMemory);
  OpCost tiny;
  tiny.bytes = 8;
  tiny.kernels = 3;
  tiny.host_sync = true;
  EXPECT_DOUBLE_EQ(predict_op(tiny, gpu).seconds, 3e-6 + 1e-5);
  EXPECT_EQ(predict_op(tiny, gpu).bound, Bound::kLaunch);
  const CollectiveCall gather{0, CollectiveKind::kAllGather, 8000000, 8};
  EXPECT_DOUBLE_EQ(collective_seconds(gather, gpu), 1e-5 + 7.0 / 8 * 8e6 / (1e11 * 0.5));
}

// The loss's exponentials and divisions run on the special-function units, at a rate of their own; every
// launch adds its tail to the slowest roof.
TEST(StepModel, SpecialFunctionsAndKernelTailsArePriced) {
  GpuSpec gpu = round_gpu();
  gpu.sfu_ops_per_s = 1e12;
  gpu.kernel_tail_seconds = 2e-6;
  OpCost loss;
  loss.bytes = 1e6;         // 2 us at 5e11 B/s
  loss.vector_flops = 1e9;  // 20 us at 5e13 FLOP/s
  loss.sfu_ops = 1e9;       // 2 ms at 5e11 a second
  loss.kernels = 2;
  EXPECT_DOUBLE_EQ(predict_op(loss, gpu).seconds, 1e9 / (1e12 * 0.5) + 2 * 2e-6);
  EXPECT_EQ(predict_op(loss, gpu).bound, Bound::kSfu);
  loss.sfu_ops = 0;
  EXPECT_DOUBLE_EQ(predict_op(loss, gpu).seconds, 1e9 / (1e14 * 0.5) + 2 * 2e-6);
  EXPECT_EQ(predict_op(loss, gpu).bound, Bound::kFp32);
  // The loss op as recorded carries its SFU work: three instructions per logit forward, three more back.
  const OpCost recorded = cost::softcap_cross_entropy_forward_backward(
      TensorView(nullptr, {4}, DType::kF32, Device::kCuda),
      TensorView(nullptr, {4}, DType::kF32, Device::kCuda),
      TensorView(nullptr, {4, 1000}, DType::kBF16, Device::kCuda),
      TensorView(nullptr, {4}, DType::kI32, Device::kCuda), 15.0, 1.0);
  EXPECT_DOUBLE_EQ(recorded.sfu_ops, 6 * 4 * 1000);
}

StepEvent op_event(double bytes) {
  StepEvent event;
  event.op = "copy";
  event.cost.bytes = bytes;
  return event;
}

TEST(StepModel, OnlyCommunicationNotHiddenBehindComputeIsExposed) {
  const GpuSpec gpu = round_gpu();  // copies at 5e11 B/s: 5e8 bytes take 1 ms
  StepEvent issue;
  issue.kind = StepEvent::Kind::kCollectiveIssued;
  // 2 ms on the link between 2 GPUs: latency 10 us + 1/2 x 199 MB / 5e10 B/s.
  issue.collective = {0, CollectiveKind::kReduceScatter, 199000000, 2};
  StepEvent wait;
  wait.kind = StepEvent::Kind::kCollectiveWaited;
  wait.collective.id = 0;
  // 1 ms of compute, the collective issued, 0.5 ms more compute, then the wait: 1.5 ms stalled.
  const std::vector<StepEvent> events = {op_event(5e8), issue, op_event(2.5e8), wait, op_event(5e8)};
  const GPTConfig config = small_config();
  const StepPrediction p = predict_step(events, gpu, config, 1, 2, 1);
  EXPECT_NEAR(p.exposed_comm_seconds, 1.5e-3, 1e-12);  // 1e-12 s: double rounding of ms-sized sums
  EXPECT_NEAR(p.step_seconds, 4e-3, 1e-12);
  EXPECT_NEAR(p.compute_seconds, 2.5e-3, 1e-12);
  EXPECT_NEAR(p.comm_seconds, 2e-3, 1e-12);
}

// The previous step's events run on the clocks but count nowhere: its all-gather costs this step only the
// part its forward waits for.
TEST(StepModel, PreviousStepMovesTheClocksOnly) {
  const GpuSpec gpu = round_gpu();
  StepEvent previous_op = op_event(5e8);  // 1 ms
  previous_op.phase = StepPhase::kPreviousStep;
  StepEvent gather;
  gather.kind = StepEvent::Kind::kCollectiveIssued;
  gather.phase = StepPhase::kPreviousStep;
  gather.collective = {0, CollectiveKind::kAllGather, 199000000, 2};  // 2 ms, as above
  StepEvent wait;
  wait.kind = StepEvent::Kind::kCollectiveWaited;
  wait.collective.id = 0;
  // The step starts at 1 ms; 0.5 ms of compute, then the wait until the gather ends at 3 ms; 1 ms more.
  const std::vector<StepEvent> events = {previous_op, gather, op_event(2.5e8), wait, op_event(5e8)};
  const StepPrediction p = predict_step(events, gpu, small_config(), 1, 2, 1);
  EXPECT_NEAR(p.step_seconds, 3e-3, 1e-12);  // 1e-12 s: double rounding of ms-sized sums
  EXPECT_NEAR(p.exposed_comm_seconds, 1.5e-3, 1e-12);
  EXPECT_NEAR(p.compute_seconds, 1.5e-3, 1e-12);
  EXPECT_EQ(p.comm_seconds, 0);  // the gather is the previous step's
  ASSERT_EQ(p.rows.size(), 1u);
  EXPECT_EQ(p.rows[0].calls, 2);
  EXPECT_EQ(p.launches, 2);
  ASSERT_EQ(p.phases.size(), 1u);
  EXPECT_EQ(p.phases[0].phase, StepPhase::kForward);
}

TEST(StepModel, JsonLineParsesAndAgreesWithItself) {
  const GPTConfig config = small_config();
  StepRecordingOptions options{.config = config, .batch = 4};
  options.world_size = 2;
  options.grad_accum_steps = 3;
  const StepPrediction p = predict_step(record_training_step(options), *gpu_spec("h200"), config, 4, 2, 3);
  const std::string json = prediction_json({config, 4, 2, 3}, p);
  simdjson::dom::parser parser;
  simdjson::dom::element record;
  ASSERT_EQ(parser.parse(json).get(record), simdjson::SUCCESS) << json;
  EXPECT_EQ(std::string_view(record["gpu"]), "h200");
  EXPECT_EQ(int64_t(record["tokens_per_step"]), 4 * 256 * 3 * 2);
  const double step_ms = double(record["step_ms"]), tokens_per_s = double(record["tokens_per_s"]);
  const double mfu = double(record["mfu_percent"]);
  // The JSON rounds step_ms to 1 us and tokens/s to 0.1: relative 1e-3 covers both at these sizes.
  EXPECT_NEAR(tokens_per_s, 4 * 256 * 3 * 2 / (step_ms / 1e3), 1e-3 * tokens_per_s);
  // MFU as the trainer defines it, against the H200 datasheet's 989 TFLOP/s dense bf16, over 2 GPUs.
  EXPECT_NEAR(mfu, 100 * tokens_per_s * static_cast<double>(flops_per_token(config)) / (989e12 * 2),
              1e-2);  // printed with two decimals
  double kernel_ms = 0;
  for (simdjson::dom::element row : record["kernels"].get_array()) {
    if (!bool(row["collective"])) kernel_ms += double(row["ms"]);
  }
  EXPECT_NEAR(kernel_ms, double(record["compute_ms"]), 1e-3 * kernel_ms);  // rows rounded to 0.1 us each
  EXPECT_NEAR(step_ms, double(record["compute_ms"]) + double(record["exposed_comm_ms"]), 2e-3);
}

TEST(StepModel, ComparisonKeepsRowsOnlyOneSideHas) {
  StepPrediction prediction;
  prediction.rows = {{"matmul", false, 10, 0, 0, 0, 2e-3, Bound::kTensor},
                     {"fill", false, 1, 0, 0, 0, 1e-5, Bound::kLaunch},
                     {"all_gather", true, 3, 0, 0, 0, 1e-3, Bound::kLink}};
  const std::vector<ComparedRow> rows =
      compare_with_measured(prediction, {{"matmul", 10, 2.5}, {"new_fused_op", 4, 0.7}});
  ASSERT_EQ(rows.size(), 3u);  // matmul, fill, new_fused_op; the collective is not an op
  EXPECT_EQ(rows[0].name, "matmul");
  EXPECT_DOUBLE_EQ(rows[0].predicted_ms, 2.0);
  EXPECT_DOUBLE_EQ(rows[0].measured_ms, 2.5);
  EXPECT_EQ(rows[1].name, "fill");
  EXPECT_EQ(rows[1].measured_calls, 0);
  EXPECT_EQ(rows[2].name, "new_fused_op");
  EXPECT_EQ(rows[2].predicted_calls, 0);
  EXPECT_EQ(rows[2].measured_calls, 4);
  EXPECT_NE(format_comparison(rows).find("new_fused_op"), std::string::npos);
}

TEST(GpuSpecs, NamesAndDevices) {
  ASSERT_TRUE(gpu_spec("H200"));
  EXPECT_EQ(gpu_spec("h200")->tensor_flops, 989e12);
  EXPECT_EQ(gpu_spec("gb10")->memory_bytes_per_s, 273e9);
  EXPECT_FALSE(gpu_spec("a100"));
  EXPECT_EQ(gpu_spec_for_device("NVIDIA H100 80GB HBM3")->name, "h100");
  EXPECT_EQ(gpu_spec_for_device("NVIDIA GB10")->name, "gb10");
  EXPECT_FALSE(gpu_spec_for_device("NVIDIA H200 NVL"));  // another bandwidth: no spec rather than a wrong one
}

}  // namespace
}  // namespace nanoforge
