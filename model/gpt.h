// GPT: nanochat's model — forward to the mean loss, backward to the gradients of every parameter — over one
// flat parameter buffer, one flat gradient buffer (same layout, see param_layout.h) and an activation arena
// planned once per (B, T). It calls only kernels/ops.h, so it runs on any backend the tensors live on.
//
// On the GPU it trains in mixed precision (docs/model.md, "On the GPU"): parameters and gradients stay fp32
// (the master weights the optimizer, data parallelism and checkpoints see), activations are bf16, and the
// GEMM matrices are read from a bf16 copy (model/compute_weights.h) that refresh_compute_weights() renews.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/device_buffer.h"
#include "kernels/kernel_settings.h"
#include "model/activations.h"
#include "model/compute_weights.h"
#include "model/fp8_linear.h"
#include "model/fp8_linears.h"
#include "model/gpt_config.h"
#include "model/model_weights.h"
#include "model/param_layout.h"

namespace nanoforge {

class GPT {
 public:
  // The config must be valid (GPTConfig::validate()). dtype is the activation type: on the CPU f32 (training)
  // or f64 (gradient checks), and the parameters have it too; on the GPU bf16, with fp32 parameters and
  // gradients. Parameters start at zero: call init_weights or load them.
  GPT(const GPTConfig& config, Device device, DType dtype);

  // What the constructor allocates, measured without allocating: the parameters, the gradients, the GPU's
  // bf16 GEMM matrices and the rotary tables.
  struct MemoryBytes {
    int64_t params = 0, grads = 0, compute_weights = 0, rotary_tables = 0;
  };
  static MemoryBytes memory_bytes(const GPTConfig& config, Device device, DType dtype);

  const GPTConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }              // activations
  DType param_dtype() const { return param_dtype_; }  // params(), grads()

  // The kernels this model's ops run on the GPU (attention, MLP GEMM, deterministic reductions), passed to
  // every op that reads them; the defaults until set. Two models in one process may differ.
  // The first settings with fp8 on make the next plan() allocate the FP8 scratch, kept from then on, so
  // turning FP8 off for an evaluation and on again allocates nothing. FP8 needs f32 or bf16 activations.
  void set_kernel_settings(const ops::KernelSettings& settings);
  const ops::KernelSettings& kernel_settings() const { return kernel_settings_; }

  // Writes params() (and counts as weights_changed()).
  void init_weights(uint64_t seed);

  // The GPU's bf16 copies of the GEMM matrices must match the fp32 parameters: call refresh_compute_weights()
  // after every change to params() — an optimizer step, a load, init_weights — before the next forward(),
  // except after a DataParallelOptimizer step given compute_copy(), which gathers the copies itself.
  // forward() refuses to run on copies older than the last weights_changed() (init_weights and
  // load_model_weights call it; call it after writing params() some other way). On the CPU there are no
  // copies, and both calls only keep the count.
  void refresh_compute_weights();
  void weights_changed() { ++weights_version_; }
  int64_t compute_weight_bytes() const { return compute_buffer_.bytes(); }

  TensorView params() const { return view_of(params_); }  // flat, layout order
  TensorView grads() const { return view_of(grads_); }
  TensorView param(const std::string& name) const { return param_view(params_, layout_.at(name)); }
  TensorView grad(const std::string& name) const { return param_view(grads_, layout_.at(name)); }
  const ModelWeights& weights() const { return weights_; }  // the parameters themselves (fp32 on the GPU)
  const ModelWeights& weight_grads() const { return weight_grads_; }
  // What forward and backward read: weights(), with the GEMM matrices' bf16 copies on the GPU.
  const ModelWeights& compute_weights() const { return compute_weights_; }
  // The bf16 copies as one flat buffer (empty on the CPU) and where each matrix sits in it: data parallelism
  // gathers the copies there directly (optim/data_parallel_optimizer.h).
  TensorView compute_copy() const;
  const ComputeWeightLayout& compute_layout() const { return compute_layout_; }

  // Plans (and allocates) the activations for batches of (batch, seq), seq <= config.max_positions():
  // training rows are sequence_len; evaluation prompts may be longer, as in nanochat, where the long layers'
  // window (sequence_len) then cuts.
  void plan(int64_t batch, int64_t seq);
  int64_t activation_bytes() const { return activation_buffer_.bytes(); }

  // FP8 training (nanochat's base_train --fp8, KernelSettings::fp8): every Linear base_train's filter accepts
  // runs its three GEMMs in FP8 with tensorwise scales (model/fp8_linear.h).
  bool fp8() const { return kernel_settings_.fp8; }
  // The filter's verdict on this model's Linears (what FP8 converts).
  const Fp8Linears& fp8_linears() const { return fp8_linears_; }

  // ids, targets: (B, T) i32 on the model's device, targets -1 ignored. Returns the mean cross-entropy over
  // the targets that are not ignored (NaN when all are, as PyTorch does). On the GPU the compute copies must
  // be current (refresh_compute_weights).
  double forward(TensorView ids, TensorView targets);
  // forward() for training: the loss pass also writes the gradient of loss_scale * (the mean loss) with
  // respect to the logits over them (one pass over the logits: ops::softcap_cross_entropy_forward_backward),
  // so the logits are gone afterwards (capped_logits() refuses) and backward() must follow.
  double forward_for_backward(TensorView ids, TensorView targets, double loss_scale = 1.0);
  // The same pass without reading the loss back: a training step keeps it on the device
  // (ops::add_mean_loss of token_losses()). Nothing else differs — the loss kernel counts the targets that
  // are not -1 on the device — so the host never waits for the GPU here.
  void forward_for_backward_without_readback(TensorView ids, TensorView targets, double loss_scale = 1.0);
  // Adds the gradient of loss_scale * (the last forward_for_backward's mean loss) to grads(). Once per
  // forward_for_backward.
  void backward();
  // Called during every forward before it first reads the parameters of [from, total_numel) — the embeddings
  // and scalars, then each block, then lm_head: `from` only decreases (the reverse of the gradients' order) —
  // so a data-parallel step can make layer i wait only for layer i's weights. An empty function turns it off.
  void set_weights_needed_callback(std::function<void(int64_t)> callback) {
    weights_needed_ = std::move(callback);
  }
  // Called during backward() each time more gradients are final, with n: the first n elements of grads() are
  // (the buffer is in backward order, so they complete as a growing prefix). Data parallelism starts reducing
  // them then. An empty function turns it off.
  void set_gradient_ready_callback(std::function<void(int64_t)> callback) {
    gradient_ready_ = std::move(callback);
  }
  void zero_grad();

  // The logits (B*T, vocab_size) of the last forward in the activation dtype, as the loss left them: capped
  // on the CPU, raw on the GPU (ops::softcap_leaves_capped_logits); forward_for_backward() leaves their
  // gradient instead. capped_logits() reads them capped on any device, after forward().
  TensorView logits() const { return activations_.logits; }
  // Rows [row, row + count) of the last forward's softcapped logits, 15 tanh(x / 15), on the host.
  std::vector<float> capped_logits(int64_t row, int64_t count) const;
  // The last forward's cross-entropy per token (B*T), 0 where the target is ignored (for bits per byte); f32
  // on the GPU.
  TensorView token_losses() const { return activations_.losses; }

 private:
  TensorView view_of(const DeviceBuffer& buffer) const;
  TensorView param_view(const DeviceBuffer& buffer, const ParamInfo& info) const;

  double attention_scale() const;  // 1/sqrt(head dim), the default of FA3 and SDPA that nanochat keeps
  // forward() (no loss_scale) or forward_for_backward(), up to token_losses(); no read-back.
  void forward_pass(TensorView ids, TensorView targets, const double* loss_scale);
  double read_mean_loss() const;  // of the last forward_pass: the host waits for it
  void weights_needed(int64_t from) const {
    if (weights_needed_) weights_needed_(from);
  }
  void block_forward(int64_t layer);
  void block_backward(int64_t layer);
  void lm_head_forward();   // logits = final_norm @ lm_head^T, in FP8 when converted
  void lm_head_backward();  // its input and weight gradients
  // The weight rows of each nanochat Linear inside the fused c_vkq (v, k, q) and whether each is in FP8.
  std::array<LinearSegment, 3> vkq_segments() const;
  // One whole weight of `rows` rows as a single segment, in FP8 when `converted` and fp8().
  std::array<LinearSegment, 1> whole(int64_t rows, bool converted) const {
    return {{{0, rows, fp8() && converted}}};
  }

  GPTConfig config_;
  ParamLayout layout_;
  Device device_;
  DType dtype_, param_dtype_;
  ops::KernelSettings kernel_settings_;
  DeviceBuffer params_, grads_;
  ModelWeights weights_, weight_grads_;  // views into params_ and grads_
  // What forward and backward read: weights_, with the GEMM matrices from compute_buffer_ on the GPU.
  ComputeWeightLayout compute_layout_;
  DeviceBuffer compute_buffer_;
  ModelWeights compute_weights_;
  int64_t weights_version_ = 1;  // the parameters start at zero: no copy has been made of them yet
  int64_t compute_version_ = 0;
  DeviceBuffer rotary_buffer_;
  TensorView rotary_cos_, rotary_sin_;  // (max_positions, D/2)
  DeviceBuffer activation_buffer_;
  Activations activations_;
  bool fp8_scratch_wanted_ = false;  // FP8 was turned on once: plan() takes the FP8 scratch
  Fp8Linears fp8_linears_;           // the filter's verdict; used when fp8()
  Fp8Scratch fp8_scratch_;           // planned with the activations once FP8 was on
  // What the logits buffer holds: the last forward()'s logits, or forward_for_backward()'s gradient until
  // backward() has used it.
  enum class LogitsHold { kNothing, kLogits, kGradient };
  LogitsHold logits_hold_ = LogitsHold::kNothing;
  std::function<void(int64_t)> gradient_ready_;
  std::function<void(int64_t)> weights_needed_;
  std::vector<int64_t> ready_after_layer_;  // grads() elements final once layer i's backward is done
  int64_t ready_after_head_ = 0;            // ... once lm_head's and backout's are
};

}  // namespace nanoforge
