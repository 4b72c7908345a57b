// GPT: nanochat's model — forward to the mean loss, backward to the gradients of every parameter — over one
// flat parameter buffer, one flat gradient buffer (same layout, see param_layout.h) and an activation arena
// planned once per (B, T). It calls only kernels/ops.h, so it runs on any backend the tensors live on.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kernels/device_buffer.h"
#include "model/activations.h"
#include "model/gpt_config.h"
#include "model/model_weights.h"
#include "model/param_layout.h"

namespace nanoforge {

class GPT {
 public:
  // The config must be valid (GPTConfig::validate()). dtype is the parameter and activation type (f32 for
  // training on the CPU, f64 for gradient checks). Parameters start at zero: call init_weights or load them.
  GPT(const GPTConfig& config, Device device, DType dtype);

  const GPTConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }

  void init_weights(uint64_t seed);

  TensorView params() const { return view_of(params_); }  // flat, layout order
  TensorView grads() const { return view_of(grads_); }
  TensorView param(const std::string& name) const { return param_view(params_, layout_.at(name)); }
  TensorView grad(const std::string& name) const { return param_view(grads_, layout_.at(name)); }
  const ModelWeights& weights() const { return weights_; }
  const ModelWeights& weight_grads() const { return weight_grads_; }

  // Plans (and allocates) the activations for batches of (batch, seq), seq <= config.sequence_len.
  void plan(int64_t batch, int64_t seq);
  int64_t activation_bytes() const { return activation_buffer_.bytes(); }

  // ids, targets: (B, T) i32 on the model's device, targets -1 ignored. Returns the mean cross-entropy over
  // the targets that are not ignored (NaN when all are, as PyTorch does).
  double forward(TensorView ids, TensorView targets);
  // Adds the gradient of loss_scale * (the last forward's mean loss) to grads(). One backward per forward.
  void backward(double loss_scale = 1.0);
  // Called during backward() each time more gradients are final, with n: the first n elements of grads() are
  // (the buffer is in backward order, so they complete as a growing prefix). Data parallelism starts reducing
  // them then. An empty function turns it off.
  void set_gradient_ready_callback(std::function<void(int64_t)> callback) {
    gradient_ready_ = std::move(callback);
  }
  void zero_grad();

  // The softcapped logits (B*T, vocab_size) of the last forward; backward() overwrites them.
  TensorView logits() const { return activations_.logits; }
  // The last forward's cross-entropy per token (B*T), 0 where the target is ignored (for bits per byte).
  TensorView token_losses() const { return activations_.losses; }

 private:
  TensorView view_of(const DeviceBuffer& buffer) const;
  TensorView param_view(const DeviceBuffer& buffer, const ParamInfo& info) const;

  double attention_scale() const;  // 1/sqrt(head dim), the default of FA3 and SDPA that nanochat keeps
  void block_forward(int64_t layer);
  void block_backward(int64_t layer);

  GPTConfig config_;
  ParamLayout layout_;
  Device device_;
  DType dtype_;
  DeviceBuffer params_, grads_;
  ModelWeights weights_, weight_grads_;  // views into params_ and grads_
  DeviceBuffer rotary_buffer_;
  TensorView rotary_cos_, rotary_sin_;  // (sequence_len, D/2)
  DeviceBuffer activation_buffer_;
  Activations activations_;
  int64_t valid_targets_ = -1;  // from the last forward; -1 before any
  std::function<void(int64_t)> gradient_ready_;
  std::vector<int64_t> ready_after_layer_;  // grads() elements final once layer i's backward is done
  int64_t ready_after_head_ = 0;            // ... once lm_head's and backout's are
};

}  // namespace nanoforge
