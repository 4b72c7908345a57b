// GPT forward and backward, one op call per step of nanochat's gpt.py (see docs/model.md for the math).
// The residual stream of block i is built in place in layers[i].residual: mixed input, then + attention,
// then + MLP (GEMMs with beta = 1), so no separate residual adds are needed. Both passes read
// compute_weights_: on the CPU the parameters themselves, on the GPU the same with bf16 GEMM matrices; weight
// gradients always go to the parameter-dtype buffer (f32 GEMM outputs from bf16 operands on the GPU).
#include "model/gpt.h"

#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "kernels/host_transfer.h"
#include "kernels/ops.h"
#include "model/init.h"
#include "model/rotary_tables.h"

namespace nanoforge {
namespace {

using ops::Accumulate;
using ops::AmaxOutput;
using ops::Fp8Amax;
using ops::Transpose;

// The amax output for the op that writes a Linear's input: the Linear's slot when it runs in FP8 (its
// forward then finds the amax given), else none.
AmaxOutput input_amax(const Fp8AmaxSlots& slots, bool fp8_linear) {
  return fp8_linear ? AmaxOutput{slots.x} : AmaxOutput();
}

// d_weight += d_y^T x.
void add_weight_gradient(TensorView d_weight, TensorView d_y, TensorView x) {
  ops::matmul(d_weight, d_y, Transpose::kYes, x, Transpose::kNo, 1.0, 1.0);
}

// A (B, T, heads, D) tensor as (B*T, heads*D) for GEMMs.
TensorView as_rows(TensorView t) {
  return t.reshaped({t.shape[0] * t.shape[1], t.shape[2] * t.shape[3]});
}

// The parameters' dtype: fp32 master weights on the GPU, the activation dtype on the CPU.
DType parameter_dtype(Device device, DType dtype) {
  return device == Device::kCuda ? DType::kF32 : dtype;
}

// cos and sin (max_positions, D/2), in the statistics dtype (f32 on the GPU).
std::pair<TensorView, TensorView> take_rotary_tables(const GPTConfig& config, ArenaAllocator& arena) {
  const TensorView cos = arena.take({config.max_positions(), config.head_dim() / 2});
  return {cos, arena.take({config.max_positions(), config.head_dim() / 2})};
}

}  // namespace

GPT::MemoryBytes GPT::memory_bytes(const GPTConfig& config, Device device, DType dtype) {
  const ParamLayout layout(config);
  MemoryBytes bytes;
  bytes.params = layout.total_numel() * dtype_bytes(parameter_dtype(device, dtype));
  bytes.grads = bytes.params;
  if (device == Device::kCuda) bytes.compute_weights = compute_weight_layout(layout, dtype).bytes;
  ArenaAllocator measure(device, statistics_dtype(dtype));
  take_rotary_tables(config, measure);
  bytes.rotary_tables = measure.used_bytes();
  return bytes;
}

GPT::GPT(const GPTConfig& config, Device device, DType dtype)
    : config_(config),
      layout_(config),
      device_(device),
      dtype_(dtype),
      param_dtype_(parameter_dtype(device, dtype)),
      fp8_linears_(Fp8Linears::of(config)) {
  const absl::Status valid = config.validate();
  NANOFORGE_CHECK(valid.ok(), "GPT: invalid config: {}", valid.ToString());
  if (device == Device::kCuda) {
    NANOFORGE_CHECK(dtype == DType::kBF16, "GPT on CUDA trains with bf16 activations, not {}",
                    dtype_name(dtype));
  } else {
    NANOFORGE_CHECK(dtype == DType::kF32 || dtype == DType::kF64,
                    "GPT on the CPU computes in f32 or f64, not {}", dtype_name(dtype));
  }
  params_ = DeviceBuffer(device, layout_.total_numel() * dtype_bytes(param_dtype_));
  grads_ = DeviceBuffer(device, layout_.total_numel() * dtype_bytes(param_dtype_));
  weights_ = model_weights(config, layout_, params_.data(), param_dtype_, device);
  compute_weights_ = weights_;
  if (device == Device::kCuda) {
    compute_layout_ = compute_weight_layout(layout_, dtype);
    compute_buffer_ = DeviceBuffer(device, compute_layout_.bytes);
    compute_weights_ = with_compute_matrices(weights_, config, layout_, compute_layout_, compute_buffer_);
  }
  // Where the buffer's prefix of final gradients ends after each part of the backward pass (layout order is
  // lm_head, the blocks from last to first, then the scalars (backout_lambda among them) and embeddings).
  ready_after_head_ = layout_.at(layer_param(config.n_layer - 1, "mlp.c_proj")).offset;
  for (int64_t layer = 0; layer < config.n_layer; ++layer) {
    ready_after_layer_.push_back(layer > 0 ? layout_.at(layer_param(layer - 1, "mlp.c_proj")).offset
                                           : layout_.at("resid_lambdas").offset);
  }
  weight_grads_ = model_weights(config, layout_, grads_.data(), param_dtype_, device);
  const RotaryTables tables = rotary_tables(config.max_positions(), config.head_dim(), kRotaryBase);
  ArenaAllocator measure(device, statistics_dtype(dtype));
  take_rotary_tables(config, measure);
  rotary_buffer_ = DeviceBuffer(device, measure.used_bytes());
  ArenaAllocator arena(rotary_buffer_, statistics_dtype(dtype));
  std::tie(rotary_cos_, rotary_sin_) = take_rotary_tables(config, arena);
  upload(rotary_cos_, tables.cos.data());
  upload(rotary_sin_, tables.sin.data());
}

void GPT::init_weights(uint64_t seed) {
  init_parameters(config_, layout_, seed, params());
  weights_changed();
}

void GPT::refresh_compute_weights() {
  if (device_ == Device::kCuda) refresh_compute_copy(compute_layout_, params(), compute_buffer_);
  compute_version_ = weights_version_;
}

TensorView GPT::compute_copy() const {
  if (compute_buffer_.bytes() == 0) return TensorView();
  return TensorView(compute_buffer_.data(), {compute_buffer_.bytes() / dtype_bytes(compute_layout_.dtype)},
                    compute_layout_.dtype, device_);
}

TensorView GPT::view_of(const DeviceBuffer& buffer) const {
  return TensorView(buffer.data(), {layout_.total_numel()}, param_dtype_, device_);
}

TensorView GPT::param_view(const DeviceBuffer& buffer, const ParamInfo& info) const {
  void* data = static_cast<char*>(buffer.data()) + info.offset * dtype_bytes(param_dtype_);
  return TensorView(data, std::span<const int64_t>(info.shape), param_dtype_, device_);
}

void GPT::plan(int64_t batch, int64_t seq) {
  NANOFORGE_CHECK(batch >= 1 && seq >= 2 && seq <= config_.max_positions(),
                  "GPT::plan: need batch >= 1 and 2 <= seq <= max_positions {}, got ({}, {})",
                  config_.max_positions(), batch, seq);
  if (activations_.batch == batch && activations_.seq == seq) return;
  ArenaAllocator measure(device_, dtype_);
  plan_activations(config_, batch, seq, measure, activations_);
  if (fp8_scratch_wanted_) plan_fp8_scratch(config_, fp8_linears_, batch * seq, measure, fp8_scratch_);
  activation_buffer_ = DeviceBuffer();  // release the old plan before allocating the new one
  activation_buffer_ = DeviceBuffer(device_, measure.used_bytes());
  ArenaAllocator arena(activation_buffer_, dtype_);
  plan_activations(config_, batch, seq, arena, activations_);
  fp8_scratch_ = Fp8Scratch();
  if (fp8_scratch_wanted_) plan_fp8_scratch(config_, fp8_linears_, batch * seq, arena, fp8_scratch_);
}

void GPT::set_kernel_settings(const ops::KernelSettings& settings) {
  NANOFORGE_CHECK(!settings.fp8 || dtype_ != DType::kF64,
                  "GPT: FP8 runs on f32 (CPU) or bf16 (GPU) activations, not f64");
  kernel_settings_ = settings;
  if (settings.fp8 && !fp8_scratch_wanted_) {
    fp8_scratch_wanted_ = true;
    activations_.batch = activations_.seq = 0;  // plan() again, with the FP8 scratch from now on
  }
}

// The lm_head weight and its gradient over every padded row (the views of ModelWeights stop at vocab_size;
// the rows are contiguous from the start).
namespace {
TensorView padded_rows(const TensorView& rows, int64_t padded) {
  return TensorView(rows.data, {padded, rows.shape[1]}, rows.dtype, rows.device);
}
}  // namespace

void GPT::lm_head_forward() {
  Activations& a = activations_;
  const TensorView w = compute_weights_.lm_head;
  // The final norm took x's amax (forward()).
  const Fp8AmaxSlots amax = fp8_scratch_.lm_head_amax();
  if (!(fp8() && fp8_linears_.lm_head) || fp8_scratch_.padded_logits.data == nullptr) {
    fp8_linear_forward(fp8_scratch_, amax, Fp8Amax::kGiven, a.logits, a.final_norm, w,
                       whole(w.shape[0], fp8_linears_.lm_head), Accumulate::kNo);
    return;
  }
  const int64_t padded = config_.padded_vocab_size();
  fp8_linear_forward(fp8_scratch_, amax, Fp8Amax::kGiven, fp8_scratch_.padded_logits, a.final_norm,
                     padded_rows(w, padded), whole(padded, true), Accumulate::kNo);
  ops::copy_columns(a.logits, 0, fp8_scratch_.padded_logits, 0, config_.vocab_size);
}

void GPT::lm_head_backward() {
  Activations& a = activations_;
  const TensorView w = compute_weights_.lm_head, g = weight_grads_.lm_head;
  if (!(fp8() && fp8_linears_.lm_head) || fp8_scratch_.padded_logits.data == nullptr) {
    fp8_linear_backward(fp8_scratch_, fp8_scratch_.lm_head_amax(), a.d_norm, Accumulate::kNo, g, a.logits,
                        a.final_norm, Fp8Input::kPlain, w, whole(w.shape[0], fp8_linears_.lm_head),
                        kernel_settings_);
    return;
  }
  // The padded logits' gradient is 0 past vocab_size (nanochat slices them off before the loss).
  const int64_t padded = config_.padded_vocab_size();
  ops::fill(fp8_scratch_.padded_logits, 0.0);
  ops::copy_columns(fp8_scratch_.padded_logits, 0, a.logits, 0, config_.vocab_size);
  fp8_linear_backward(fp8_scratch_, fp8_scratch_.lm_head_amax(), a.d_norm, Accumulate::kNo,
                      padded_rows(g, padded), fp8_scratch_.padded_logits, a.final_norm, Fp8Input::kPlain,
                      padded_rows(w, padded), whole(padded, true), kernel_settings_);
}

std::array<LinearSegment, 3> GPT::vkq_segments() const {
  const int64_t kv = config_.kv_dim(), q = config_.n_head * config_.head_dim();
  return {{{0, kv, fp8() && fp8_linears_.c_v},
           {kv, kv, fp8() && fp8_linears_.c_k},
           {2 * kv, q, fp8() && fp8_linears_.c_q}}};
}

void GPT::zero_grad() {
  ops::fill(grads(), 0.0);
}

double GPT::forward(TensorView ids, TensorView targets) {
  forward_pass(ids, targets, nullptr);
  return read_mean_loss();
}

double GPT::forward_for_backward(TensorView ids, TensorView targets, double loss_scale) {
  forward_pass(ids, targets, &loss_scale);
  return read_mean_loss();
}

void GPT::forward_for_backward_without_readback(TensorView ids, TensorView targets, double loss_scale) {
  forward_pass(ids, targets, &loss_scale);
}

double GPT::read_mean_loss() const {
  const ops::LossSum loss = ops::sum_loss(activations_.losses, activations_.targets);
  return loss.count > 0 ? loss.sum / static_cast<double>(loss.count)
                        : std::numeric_limits<double>::quiet_NaN();
}

void GPT::forward_pass(TensorView ids, TensorView targets, const double* loss_scale) {
  Activations& a = activations_;
  const ModelWeights& w = compute_weights_;
  NANOFORGE_CHECK(
      device_ != Device::kCuda || compute_version_ == weights_version_,
      "GPT::forward: the bf16 copies of the weight matrices are older than the fp32 weights (changed "
      "by init_weights, a load or an optimizer step); call refresh_compute_weights() after changing "
      "the weights");
  NANOFORGE_CHECK(a.batch > 0, "GPT::forward: call plan(batch, seq) first");
  NANOFORGE_CHECK(
      ids.rank == 2 && ids.shape[0] == a.batch && ids.shape[1] == a.seq && ids.dtype == DType::kI32,
      "GPT::forward: ids {} must be i32 ({}, {}) as planned", ids.describe(), a.batch, a.seq);
  check_same_shape(ids, targets, "GPT::forward");
  const int64_t N = a.batch * a.seq, C = config_.n_embd;
  ops::copy(a.ids, ids.reshaped({N}));
  ops::copy(a.targets, targets.reshaped({N}));

  weights_needed(ready_after_layer_[0]);  // the embeddings and scalars
  ops::embedding_forward(a.embedding, w.wte, a.ids);
  ops::rmsnorm_forward(a.embedding, a.embedding_rstd, a.embedding, 1.0, AmaxOutput());
  ops::smear_forward(a.x0.reshaped({a.batch, a.seq, C}), a.smear_gate,
                     a.embedding.reshaped({a.batch, a.seq, C}), w.smear_gate, w.smear_lambda);
  for (int64_t layer = 0; layer < config_.n_layer; ++layer) {
    weights_needed(layer + 1 < config_.n_layer ? ready_after_layer_[layer + 1] : ready_after_head_);
    block_forward(layer);
  }
  weights_needed(0);  // lm_head

  ops::backout_forward(a.final_norm, a.layers.back().residual, a.layers[config_.backout_layer()].residual,
                       w.backout_lambda);
  ops::rmsnorm_forward(a.final_norm, a.final_rstd, a.final_norm, 1.0,
                       input_amax(fp8_scratch_.lm_head_amax(), fp8() && fp8_linears_.lm_head));
  lm_head_forward();
  if (loss_scale != nullptr) {
    ops::softcap_cross_entropy_forward_backward(a.losses, a.logits_lse, a.logits, a.targets, kLogitSoftcap,
                                                *loss_scale);
    logits_hold_ = LogitsHold::kGradient;
  } else {
    ops::softcap_cross_entropy_forward(a.losses, a.logits_lse, a.logits, a.targets, kLogitSoftcap);
    logits_hold_ = LogitsHold::kLogits;
  }
}

void GPT::block_forward(int64_t layer) {
  Activations& a = activations_;
  LayerActivations& l = a.layers[layer];
  const BlockWeights& w = compute_weights_.blocks[layer];
  const TensorView x_in = layer == 0 ? a.x0 : a.layers[layer - 1].residual;
  // The amax of each FP8 Linear's input comes from the kernel that writes it, except the attention's output.
  const Fp8AmaxSlots vkq_amax = fp8_scratch_.block_amax(layer, BlockLinear::kVkq);
  const Fp8AmaxSlots fc_amax = fp8_scratch_.block_amax(layer, BlockLinear::kMlpFc);
  const Fp8AmaxSlots mlp_proj_amax = fp8_scratch_.block_amax(layer, BlockLinear::kMlpProj);
  // Attention, on norm(resid_lambda * x_in + x0_lambda * x0).
  ops::residual_mix_rmsnorm_forward(l.residual, l.norm1, l.rstd1, x_in, a.x0, w.resid_lambda, w.x0_lambda,
                                    input_amax(vkq_amax, any_fp8(vkq_segments())));
  // v, k and q from one GEMM, then transformed in place inside it (docs/model.md).
  fp8_linear_forward(fp8_scratch_, vkq_amax, Fp8Amax::kGiven, as_rows(l.vkq), l.norm1, w.c_vkq,
                     vkq_segments(), Accumulate::kNo);
  const VkqSlices x = vkq_slices(l.vkq, config_.n_kv_head);
  if (config_.has_value_embed(layer)) {
    ops::value_embed_gate_forward(x.v, l.value_gate, l.norm1, w.ve_gate, w.value_embed, a.ids);
  }
  ops::rotary_rmsnorm_forward(x.q, l.q_rstd, rotary_cos_, rotary_sin_, kQKNormScale);
  ops::rotary_rmsnorm_forward(x.k, l.k_rstd, rotary_cos_, rotary_sin_, kQKNormScale);
  ops::attention_forward(l.attention, l.lse, x.q, x.k, x.v, config_.window(layer), attention_scale(),
                         a.attention_workspace, kernel_settings_);
  fp8_linear_forward(fp8_scratch_, fp8_scratch_.block_amax(layer, BlockLinear::kAttentionProj),
                     Fp8Amax::kCompute, l.residual, as_rows(l.attention), w.c_proj,
                     whole(config_.n_embd, fp8_linears_.c_proj), Accumulate::kYes);
  // MLP.
  ops::rmsnorm_forward(l.norm2, l.rstd2, l.residual, 1.0, input_amax(fc_amax, fp8() && fp8_linears_.mlp_fc));
  const bool mlp_proj_fp8 = fp8() && fp8_linears_.mlp_proj;
  Fp8Amax mlp_proj_x_amax = Fp8Amax::kCompute;
  if (fp8() && fp8_linears_.mlp_fc) {  // the FP8 GEMM with the activation
    fp8_mlp_fc_forward(fp8_scratch_, fc_amax, input_amax(mlp_proj_amax, mlp_proj_fp8), l.fc_act, l.norm2,
                       w.fc, kernel_settings_);
    mlp_proj_x_amax = Fp8Amax::kGiven;
  } else {
    ops::linear_relu_squared_forward(l.fc_act, l.norm2, w.fc, kernel_settings_);
  }
  fp8_linear_forward(fp8_scratch_, mlp_proj_amax, mlp_proj_x_amax, l.residual, l.fc_act, w.mlp_proj,
                     whole(config_.n_embd, fp8_linears_.mlp_proj), Accumulate::kYes);
}

void GPT::backward() {
  Activations& a = activations_;
  const ModelWeights& w = compute_weights_;
  const ModelWeights& g = weight_grads_;
  NANOFORGE_CHECK(logits_hold_ == LogitsHold::kGradient,
                  "GPT::backward: call forward_for_backward first (once per backward)");
  logits_hold_ = LogitsHold::kNothing;
  const int64_t C = config_.n_embd;

  // The logits hold their gradient (forward_for_backward).
  lm_head_backward();
  ops::rmsnorm_backward(a.d_residual, a.d_norm, a.final_norm, a.final_rstd, 1.0, Accumulate::kNo);
  ops::backout_backward(a.d_backout, g.backout_lambda, a.d_residual,
                        a.layers[config_.backout_layer()].residual, w.backout_lambda);
  if (gradient_ready_) gradient_ready_(ready_after_head_);
  ops::fill(a.d_x0, 0.0);
  for (int64_t layer = config_.n_layer - 1; layer >= 0; --layer) {
    // d_residual holds the gradient of this block's output; the backout snapshot adds its share here.
    if (layer == config_.backout_layer()) ops::accumulate(a.d_residual, a.d_backout);
    block_backward(layer);
    if (gradient_ready_) gradient_ready_(ready_after_layer_[layer]);
  }
  // d_residual is now the gradient of x0 through block 0's residual input.
  ops::accumulate(a.d_x0, a.d_residual);
  ops::smear_backward(a.d_norm.reshaped({a.batch, a.seq, C}), g.smear_gate, g.smear_lambda,
                      a.d_x0.reshaped({a.batch, a.seq, C}), a.embedding.reshaped({a.batch, a.seq, C}),
                      a.smear_gate, w.smear_gate, w.smear_lambda);
  ops::rmsnorm_backward(a.d_norm, a.d_norm, a.embedding, a.embedding_rstd, 1.0, Accumulate::kNo);
  ops::embedding_backward(g.wte, a.d_norm, a.ids, kernel_settings_);
  if (gradient_ready_) gradient_ready_(layout_.total_numel());
}

void GPT::block_backward(int64_t layer) {
  Activations& a = activations_;
  LayerActivations& l = a.layers[layer];
  const BlockWeights& w = compute_weights_.blocks[layer];
  const BlockWeights& g = weight_grads_.blocks[layer];
  // MLP: residual += mlp_proj(relu(fc(norm2))^2).
  if (fp8() && fp8_linears_.mlp_proj) {  // the FP8 GEMMs, the input gradient through the activation
    fp8_linear_backward(fp8_scratch_, fp8_scratch_.block_amax(layer, BlockLinear::kMlpProj), a.d_fc,
                        Accumulate::kNo, g.mlp_proj, a.d_residual, l.fc_act, Fp8Input::kReluSquared,
                        w.mlp_proj, whole(config_.n_embd, true), kernel_settings_);
  } else {
    add_weight_gradient(g.mlp_proj, a.d_residual, l.fc_act);
    ops::relu_squared_linear_backward(a.d_fc, a.d_residual, w.mlp_proj, l.fc_act, kernel_settings_);
  }
  fp8_linear_backward(fp8_scratch_, fp8_scratch_.block_amax(layer, BlockLinear::kMlpFc), a.d_norm,
                      Accumulate::kNo, g.fc, a.d_fc, l.norm2, Fp8Input::kPlain, w.fc,
                      whole(config_.mlp_dim(), fp8_linears_.mlp_fc), kernel_settings_);
  ops::rmsnorm_backward(a.d_residual, a.d_norm, l.norm2, l.rstd2, 1.0, Accumulate::kYes);
  // Attention: residual += c_proj(attention(q, k, v)).
  fp8_linear_backward(fp8_scratch_, fp8_scratch_.block_amax(layer, BlockLinear::kAttentionProj),
                      as_rows(a.d_attention), Accumulate::kNo, g.c_proj, a.d_residual, as_rows(l.attention),
                      Fp8Input::kPlain, w.c_proj, whole(config_.n_embd, fp8_linears_.c_proj),
                      kernel_settings_);
  // d_v, d_k, d_q land in d_vkq's head slices, the fused projection's output gradient.
  const VkqSlices x = vkq_slices(l.vkq, config_.n_kv_head), d = vkq_slices(a.d_vkq, config_.n_kv_head);
  ops::attention_backward(d.q, d.k, d.v, a.d_attention, x.q, x.k, x.v, l.attention, l.lse,
                          config_.window(layer), attention_scale(), a.attention_workspace, kernel_settings_);
  ops::rotary_rmsnorm_backward(d.q, x.q, l.q_rstd, rotary_cos_, rotary_sin_, kQKNormScale);
  ops::rotary_rmsnorm_backward(d.k, x.k, l.k_rstd, rotary_cos_, rotary_sin_, kQKNormScale);
  fp8_linear_backward(fp8_scratch_, fp8_scratch_.block_amax(layer, BlockLinear::kVkq), a.d_norm,
                      Accumulate::kNo, g.c_vkq, as_rows(a.d_vkq), l.norm1, Fp8Input::kPlain, w.c_vkq,
                      vkq_segments(), kernel_settings_);
  if (config_.has_value_embed(layer)) {
    ops::value_embed_gate_backward(a.d_norm, g.ve_gate, g.value_embed, d.v, l.norm1, l.value_gate, w.ve_gate,
                                   w.value_embed, a.ids, kernel_settings_);
  }
  // norm1 = norm(residual), residual = resid_lambda * x_in + x0_lambda * x0: d_residual becomes d_x_in.
  const TensorView x_in = layer == 0 ? a.x0 : a.layers[layer - 1].residual;
  ops::residual_mix_rmsnorm_backward(a.d_residual, a.d_x0, g.resid_lambda, g.x0_lambda, a.d_norm, l.norm1,
                                     l.rstd1, x_in, a.x0, w.resid_lambda, w.x0_lambda);
}

std::vector<float> GPT::capped_logits(int64_t row, int64_t count) const {
  NANOFORGE_CHECK(logits_hold_ == LogitsHold::kLogits,
                  "GPT::capped_logits: the logits are read after forward(); forward_for_backward() replaces "
                  "them by their gradient");
  const TensorView rows = activations_.logits.rows(row, count);
  if (ops::softcap_leaves_capped_logits(device_)) return download<float>(rows);
  std::vector<double> raw = download<double>(rows);
  std::vector<float> capped(raw.size());
  for (size_t i = 0; i < raw.size(); ++i)
    capped[i] = static_cast<float>(kLogitSoftcap * std::tanh(raw[i] / kLogitSoftcap));
  return capped;
}

double GPT::attention_scale() const {
  return 1.0 / std::sqrt(static_cast<double>(config_.head_dim()));
}

}  // namespace nanoforge
