// The op dispatcher: checks that an op's tensors share one device, then runs the CPU kernel for the dtype
// (f32 or f64) or the CUDA kernel (kernels/cuda/cuda_ops.h has every op), timing the call when op profiling
// is on — or, while this thread records costs (kernels/op_cost.h), hands the op's cost to the recorder and
// runs nothing. A CUDA tensor in a build without CUDA stops with how to get one.
#include "kernels/ops.h"

#include <atomic>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/op_cost.h"
#include "kernels/op_profile.h"
#ifdef NANOFORGE_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cudnn_attention.h"
#endif
#include "kernels/attention_implementation.h"
#include "kernels/mlp_gemm.h"

namespace nanoforge::ops {
namespace {

// The device all of an op's tensors live on. On the CPU every floating-point tensor of one call must also
// share a dtype (the kernel's T); CUDA kernels mix bf16 activations with fp32 statistics and check their own.
Device common_device(std::initializer_list<const TensorView*> tensors, const char* op) {
  const TensorView& first = **tensors.begin();
  const TensorView* first_float = nullptr;
  for (const TensorView* t : tensors) {
    NANOFORGE_CHECK(t->device == first.device, "{}: tensors on different devices ({} and {})", op,
                    first.describe(), t->describe());
    if (t->dtype == DType::kI32) continue;
    if (first_float == nullptr) first_float = t;
    NANOFORGE_CHECK(first.device != Device::kCpu || t->dtype == first_float->dtype,
                    "{}: CPU tensors of one op share a float dtype ({} and {})", op, first_float->describe(),
                    t->describe());
  }
  return first.device;
}

// Runs fn(T{}) with T the CPU element type for `dtype`.
template <class Fn>
void on_cpu(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      fn(float{});
      return;
    case DType::kF64:
      fn(double{});
      return;
    default:
      NANOFORGE_CHECK(false, "{}: the CPU backend computes in f32 or f64, not {}", op, dtype_name(dtype));
  }
}

#ifndef NANOFORGE_HAVE_CUDA
// A CUDA tensor in a build without the CUDA backend (every op has a CUDA kernel when it is built).
[[noreturn]] void missing_cuda_op(const char* op) {
  NANOFORGE_CHECK(false, "{}: this nanoforge was built without the CUDA backend (-DNANOFORGE_CUDA=ON)", op);
  __builtin_unreachable();
}
#endif

// Runs one op call, timed when profiling is on (kernels/op_profile.h); while costs are recorded, records
// cost() instead and returns a default value (0 for squared_norm, an empty LossSum for sum_loss).
template <class Cost, class Fn>
decltype(auto) timed(const char* op, Device device, Cost&& cost, Fn&& fn) {
  using Result = decltype(fn());
  if (OpCostSink* sink = cost_recording()) {
    sink->record(op, cost());
    if constexpr (std::is_void_v<Result>) {
      return;
    } else {
      return Result{};
    }
  }
  ScopedOpTimer timer(op, device);
  return fn();
}
}  // namespace

// One CPU call for the dtype of `dtype_source`: cpu::op<T>(args...), with its cost cost::op(args...).
#define NANOFORGE_CPU(op, dtype_source, ...)                    \
  timed(                                                        \
      #op, Device::kCpu, [&] { return cost::op(__VA_ARGS__); }, \
      [&] { on_cpu((dtype_source).dtype, #op, [&](auto zero) { cpu::op<decltype(zero)>(__VA_ARGS__); }); })
// One CPU call with a fixed element type (i32 fills and copies).
#define NANOFORGE_CPU_TYPED(op, types, ...) \
  timed(                                    \
      #op, Device::kCpu, [&] { return cost::op(__VA_ARGS__); }, [&] { cpu::op<types>(__VA_ARGS__); })
#ifdef NANOFORGE_HAVE_CUDA
#define NANOFORGE_CUDA(op, ...)                                  \
  timed(                                                         \
      #op, Device::kCuda, [&] { return cost::op(__VA_ARGS__); }, \
      [&]() -> decltype(auto) { return cuda::op(__VA_ARGS__); })
#else
#define NANOFORGE_CUDA(op, ...) \
  timed(                        \
      #op, Device::kCuda, [&] { return cost::op(__VA_ARGS__); }, [&] { missing_cuda_op(#op); })
#endif

namespace {
std::atomic<bool> deterministic_mode{false};
}  // namespace

void set_deterministic(bool on) {
  deterministic_mode.store(on);
}

bool deterministic() {
  return deterministic_mode.load();
}

void fill(TensorView t, double value) {
  if (t.device == Device::kCuda) return NANOFORGE_CUDA(fill, t, value);
  if (t.dtype == DType::kI32) return NANOFORGE_CPU_TYPED(fill, int32_t, t, value);
  NANOFORGE_CPU(fill, t, t, value);
}

void copy(TensorView dst, TensorView src) {
  NANOFORGE_CHECK(dst.dtype == src.dtype, "copy: dtypes differ ({} vs {})", dst.describe(), src.describe());
  if (common_device({&dst, &src}, "copy") == Device::kCuda) return NANOFORGE_CUDA(copy, dst, src);
  if (dst.dtype == DType::kI32) return NANOFORGE_CPU_TYPED(copy, int32_t, dst, src);
  NANOFORGE_CPU(copy, dst, dst, src);
}

void accumulate(TensorView into, TensorView add) {
  if (common_device({&into, &add}, "accumulate") == Device::kCuda)
    return NANOFORGE_CUDA(accumulate, into, add);
  NANOFORGE_CPU(accumulate, into, into, add);
}

void convert(TensorView dst, TensorView src) {
  check_same_shape(dst, src, "convert");
  NANOFORGE_CHECK(dst.device == src.device, "convert: tensors on different devices ({} and {})",
                  dst.describe(), src.describe());
  if (dst.dtype == src.dtype) return copy(dst, src);
  if (dst.device == Device::kCuda) return NANOFORGE_CUDA(convert, dst, src);
  if (dst.dtype == DType::kF32 && src.dtype == DType::kF64)
    return timed(
        "convert", Device::kCpu, [&] { return cost::convert(dst, src); },
        [&] { cpu::convert<float, double>(dst, src); });
  if (dst.dtype == DType::kF64 && src.dtype == DType::kF32)
    return timed(
        "convert", Device::kCpu, [&] { return cost::convert(dst, src); },
        [&] { cpu::convert<double, float>(dst, src); });
  NANOFORGE_CHECK(false, "convert on the CPU: f32 <-> f64 only, not {} to {}", src.describe(),
                  dst.describe());
}

void matmul(TensorView out, TensorView a, Transpose transpose_a, TensorView b, Transpose transpose_b,
            double alpha, double beta) {
  if (common_device({&out, &a, &b}, "matmul") == Device::kCuda) {
    return NANOFORGE_CUDA(matmul, out, a, transpose_a, b, transpose_b, alpha, beta);
  }
  NANOFORGE_CPU(matmul, out, out, a, transpose_a, b, transpose_b, alpha, beta);
}

void embedding_forward(TensorView out, TensorView table, TensorView ids) {
  if (common_device({&out, &table, &ids}, "embedding_forward") == Device::kCuda) {
    return NANOFORGE_CUDA(embedding_forward, out, table, ids);
  }
  NANOFORGE_CPU(embedding_forward, out, out, table, ids);
}

void embedding_backward(TensorView d_table, TensorView d_out, TensorView ids) {
  if (common_device({&d_table, &d_out, &ids}, "embedding_backward") == Device::kCuda) {
    return NANOFORGE_CUDA(embedding_backward, d_table, d_out, ids);
  }
  NANOFORGE_CPU(embedding_backward, d_table, d_table, d_out, ids);
}

void rmsnorm_forward(TensorView out, TensorView rstd, TensorView x, double scale) {
  if (common_device({&out, &rstd, &x}, "rmsnorm_forward") == Device::kCuda) {
    return NANOFORGE_CUDA(rmsnorm_forward, out, rstd, x, scale);
  }
  NANOFORGE_CPU(rmsnorm_forward, x, out, rstd, x, scale);
}

void rmsnorm_backward(TensorView d_x, TensorView d_out, TensorView out, TensorView rstd, double scale,
                      Accumulate mode) {
  if (common_device({&d_x, &d_out, &out, &rstd}, "rmsnorm_backward") == Device::kCuda) {
    return NANOFORGE_CUDA(rmsnorm_backward, d_x, d_out, out, rstd, scale, mode);
  }
  NANOFORGE_CPU(rmsnorm_backward, out, d_x, d_out, out, rstd, scale, mode);
}

void rotary_rmsnorm_forward(HeadSlice x, TensorView rstd, TensorView cos, TensorView sin, double scale) {
  if (common_device({&x.whole, &rstd, &cos, &sin}, "rotary_rmsnorm_forward") == Device::kCuda)
    return NANOFORGE_CUDA(rotary_rmsnorm_forward, x, rstd, cos, sin, scale);
  NANOFORGE_CPU(rotary_rmsnorm_forward, x.whole, x, rstd, cos, sin, scale);
}

void rotary_rmsnorm_backward(HeadSlice d_x, HeadSlice out, TensorView rstd, TensorView cos, TensorView sin,
                             double scale) {
  if (common_device({&d_x.whole, &out.whole, &rstd, &cos, &sin}, "rotary_rmsnorm_backward") == Device::kCuda)
    return NANOFORGE_CUDA(rotary_rmsnorm_backward, d_x, out, rstd, cos, sin, scale);
  NANOFORGE_CPU(rotary_rmsnorm_backward, d_x.whole, d_x, out, rstd, cos, sin, scale);
}

int64_t attention_workspace_bytes(Device device, DType dtype, [[maybe_unused]] int64_t batch, int64_t seq,
                                  [[maybe_unused]] int64_t heads, [[maybe_unused]] int64_t kv_heads,
                                  [[maybe_unused]] int64_t head_dim, int64_t window) {
  if (device == Device::kCuda) {
#ifdef NANOFORGE_HAVE_CUDA
    return cuda::attention_workspace_bytes(batch, seq, heads, kv_heads, head_dim,
                                           window);  // a size, not timed
#else
    if (cost_recording() != nullptr) return 0;  // recorded ops never touch their workspace
    missing_cuda_op("attention_workspace_bytes");
#endif
  }
  return cpu::attention_workspace_bytes(dtype, seq, window);
}

void attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v, int64_t window,
                       double scale, TensorView workspace) {
  if (common_device({&out, &lse, &q.whole, &k.whole, &v.whole, &workspace}, "attention_forward") ==
      Device::kCuda) {
    if (attention_implementation() == AttentionImplementation::kCudnn) {
      return NANOFORGE_CUDA(cudnn_attention_forward, out, lse, q, k, v, window, scale, workspace);
    }
    return NANOFORGE_CUDA(attention_forward, out, lse, q, k, v, window, scale, workspace);
  }
  NANOFORGE_CPU(attention_forward, q.whole, out, lse, q, k, v, window, scale, workspace);
}

void attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                        HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                        double scale, TensorView workspace) {
  if (common_device(
          {&d_q.whole, &d_k.whole, &d_v.whole, &d_out, &q.whole, &k.whole, &v.whole, &out, &lse, &workspace},
          "attention_backward") == Device::kCuda) {
    if (attention_implementation() == AttentionImplementation::kCudnn) {
      return NANOFORGE_CUDA(cudnn_attention_backward, d_q, d_k, d_v, d_out, q, k, v, out, lse, window, scale,
                            workspace);
    }
    return NANOFORGE_CUDA(attention_backward, d_q, d_k, d_v, d_out, q, k, v, out, lse, window, scale,
                          workspace);
  }
  NANOFORGE_CPU(attention_backward, q.whole, d_q, d_k, d_v, d_out, q, k, v, out, lse, window, scale,
                workspace);
}

void relu_squared_forward(TensorView out, TensorView x) {
  if (common_device({&out, &x}, "relu_squared_forward") == Device::kCuda) {
    return NANOFORGE_CUDA(relu_squared_forward, out, x);
  }
  NANOFORGE_CPU(relu_squared_forward, x, out, x);
}

void relu_squared_backward(TensorView d_x, TensorView d_out, TensorView out) {
  if (common_device({&d_x, &d_out, &out}, "relu_squared_backward") == Device::kCuda) {
    return NANOFORGE_CUDA(relu_squared_backward, d_x, d_out, out);
  }
  NANOFORGE_CPU(relu_squared_backward, out, d_x, d_out, out);
}

// Our fused GEMM when chosen on the GPU; otherwise the GEMM and the pass as two ops (each profiled and
// costed under its own name).
void linear_relu_squared_forward(TensorView act, TensorView x, TensorView w) {
  if (common_device({&act, &x, &w}, "linear_relu_squared_forward") == Device::kCuda &&
      mlp_gemm() == MlpGemm::kFused) {
    return NANOFORGE_CUDA(linear_relu_squared_forward, act, x, w);
  }
  NANOFORGE_CHECK(act.data != x.data, "linear_relu_squared_forward: act must not alias x");
  matmul(act, x, Transpose::kNo, w, Transpose::kYes, 1.0, 0.0);
  relu_squared_forward(act, act);
}

void relu_squared_linear_backward(TensorView d_pre, TensorView d_y, TensorView w, TensorView act) {
  if (common_device({&d_pre, &d_y, &w, &act}, "relu_squared_linear_backward") == Device::kCuda &&
      mlp_gemm() == MlpGemm::kFused) {
    return NANOFORGE_CUDA(relu_squared_linear_backward, d_pre, d_y, w, act);
  }
  NANOFORGE_CHECK(d_pre.data != d_y.data && d_pre.data != act.data,
                  "relu_squared_linear_backward: d_pre must alias neither d_y nor act");
  matmul(d_pre, d_y, Transpose::kNo, w, Transpose::kNo, 1.0, 0.0);
  relu_squared_backward(d_pre, d_pre, act);
}

void smear_forward(TensorView out, TensorView gate_sigmoid, TensorView x, TensorView gate_weight,
                   TensorView lambda) {
  if (common_device({&out, &gate_sigmoid, &x, &gate_weight, &lambda}, "smear_forward") == Device::kCuda) {
    return NANOFORGE_CUDA(smear_forward, out, gate_sigmoid, x, gate_weight, lambda);
  }
  NANOFORGE_CPU(smear_forward, x, out, gate_sigmoid, x, gate_weight, lambda);
}

void smear_backward(TensorView d_x, TensorView d_gate_weight, TensorView d_lambda, TensorView d_out,
                    TensorView x, TensorView gate_sigmoid, TensorView gate_weight, TensorView lambda) {
  if (common_device({&d_x, &d_gate_weight, &d_lambda, &d_out, &x, &gate_sigmoid, &gate_weight, &lambda},
                    "smear_backward") == Device::kCuda) {
    return NANOFORGE_CUDA(smear_backward, d_x, d_gate_weight, d_lambda, d_out, x, gate_sigmoid, gate_weight,
                          lambda);
  }
  NANOFORGE_CPU(smear_backward, x, d_x, d_gate_weight, d_lambda, d_out, x, gate_sigmoid, gate_weight, lambda);
}

void value_embed_gate_forward(HeadSlice v, TensorView gate_sigmoid, TensorView u, TensorView gate_weight,
                              TensorView table, TensorView ids) {
  if (common_device({&v.whole, &gate_sigmoid, &u, &gate_weight, &table, &ids}, "value_embed_gate_forward") ==
      Device::kCuda) {
    return NANOFORGE_CUDA(value_embed_gate_forward, v, gate_sigmoid, u, gate_weight, table, ids);
  }
  NANOFORGE_CPU(value_embed_gate_forward, v.whole, v, gate_sigmoid, u, gate_weight, table, ids);
}

void value_embed_gate_backward(TensorView d_u, TensorView d_gate_weight, TensorView d_table, HeadSlice d_v,
                               TensorView u, TensorView gate_sigmoid, TensorView gate_weight,
                               TensorView table, TensorView ids) {
  if (common_device(
          {&d_u, &d_gate_weight, &d_table, &d_v.whole, &u, &gate_sigmoid, &gate_weight, &table, &ids},
          "value_embed_gate_backward") == Device::kCuda) {
    return NANOFORGE_CUDA(value_embed_gate_backward, d_u, d_gate_weight, d_table, d_v, u, gate_sigmoid,
                          gate_weight, table, ids);
  }
  NANOFORGE_CPU(value_embed_gate_backward, u, d_u, d_gate_weight, d_table, d_v, u, gate_sigmoid, gate_weight,
                table, ids);
}

void residual_mix_rmsnorm_forward(TensorView residual, TensorView out, TensorView rstd, TensorView x,
                                  TensorView x0, TensorView resid_lambda, TensorView x0_lambda) {
  if (common_device({&residual, &out, &rstd, &x, &x0, &resid_lambda, &x0_lambda},
                    "residual_mix_rmsnorm_forward") == Device::kCuda) {
    return NANOFORGE_CUDA(residual_mix_rmsnorm_forward, residual, out, rstd, x, x0, resid_lambda, x0_lambda);
  }
  NANOFORGE_CPU(residual_mix_rmsnorm_forward, x, residual, out, rstd, x, x0, resid_lambda, x0_lambda);
}

void residual_mix_rmsnorm_backward(TensorView d_residual, TensorView d_x0, TensorView d_resid_lambda,
                                   TensorView d_x0_lambda, TensorView d_out, TensorView out, TensorView rstd,
                                   TensorView x, TensorView x0, TensorView resid_lambda,
                                   TensorView x0_lambda) {
  if (common_device({&d_residual, &d_x0, &d_resid_lambda, &d_x0_lambda, &d_out, &out, &rstd, &x, &x0,
                     &resid_lambda, &x0_lambda},
                    "residual_mix_rmsnorm_backward") == Device::kCuda) {
    return NANOFORGE_CUDA(residual_mix_rmsnorm_backward, d_residual, d_x0, d_resid_lambda, d_x0_lambda, d_out,
                          out, rstd, x, x0, resid_lambda, x0_lambda);
  }
  NANOFORGE_CPU(residual_mix_rmsnorm_backward, x, d_residual, d_x0, d_resid_lambda, d_x0_lambda, d_out, out,
                rstd, x, x0, resid_lambda, x0_lambda);
}

void backout_forward(TensorView out, TensorView x, TensorView x_backout, TensorView lambda) {
  if (common_device({&out, &x, &x_backout, &lambda}, "backout_forward") == Device::kCuda) {
    return NANOFORGE_CUDA(backout_forward, out, x, x_backout, lambda);
  }
  NANOFORGE_CPU(backout_forward, x, out, x, x_backout, lambda);
}

void backout_backward(TensorView d_x_backout, TensorView d_lambda, TensorView d_out, TensorView x_backout,
                      TensorView lambda) {
  if (common_device({&d_x_backout, &d_lambda, &d_out, &x_backout, &lambda}, "backout_backward") ==
      Device::kCuda) {
    return NANOFORGE_CUDA(backout_backward, d_x_backout, d_lambda, d_out, x_backout, lambda);
  }
  NANOFORGE_CPU(backout_backward, x_backout, d_x_backout, d_lambda, d_out, x_backout, lambda);
}

void softcap_cross_entropy_forward(TensorView losses, TensorView lse, TensorView logits, TensorView targets,
                                   double softcap) {
  if (common_device({&losses, &lse, &logits, &targets}, "softcap_cross_entropy_forward") == Device::kCuda) {
    return NANOFORGE_CUDA(softcap_cross_entropy_forward, losses, lse, logits, targets, softcap);
  }
  NANOFORGE_CPU(softcap_cross_entropy_forward, logits, losses, lse, logits, targets, softcap);
}

void softcap_cross_entropy_forward_backward(TensorView losses, TensorView lse, TensorView logits,
                                            TensorView targets, double softcap, double loss_scale) {
  if (common_device({&losses, &lse, &logits, &targets}, "softcap_cross_entropy_forward_backward") ==
      Device::kCuda) {
    return NANOFORGE_CUDA(softcap_cross_entropy_forward_backward, losses, lse, logits, targets, softcap,
                          loss_scale);
  }
  NANOFORGE_CPU(softcap_cross_entropy_forward_backward, logits, losses, lse, logits, targets, softcap,
                loss_scale);
}

bool softcap_leaves_capped_logits(Device device) {
  return device == Device::kCpu;
}

LossSum sum_loss(TensorView losses, TensorView targets) {
  const Device device = common_device({&losses, &targets}, "sum_loss");
  LossSum result;
  timed(
      "sum_loss", device, [&] { return cost::sum_loss(losses, targets); },
      [&] {
        if (device == Device::kCuda) {
#ifdef NANOFORGE_HAVE_CUDA
          result = cuda::sum_loss(losses, targets);
#else
          missing_cuda_op("sum_loss");
#endif
          return;
        }
        on_cpu(losses.dtype, "sum_loss",
               [&](auto zero) { result = cpu::sum_loss<decltype(zero)>(losses, targets); });
      });
  return result;
}

void adamw_update(TensorView param, TensorView grad, TensorView exp_avg, TensorView exp_avg_sq,
                  const AdamWStep& hyper) {
  if (common_device({&param, &grad, &exp_avg, &exp_avg_sq}, "adamw_update") == Device::kCuda) {
    return NANOFORGE_CUDA(adamw_update, param, grad, exp_avg, exp_avg_sq, hyper);
  }
  NANOFORGE_CPU(adamw_update, param, param, grad, exp_avg, exp_avg_sq, hyper);
}

void muon_nesterov_momentum(TensorView update, TensorView momentum_buffer, TensorView grad, double momentum) {
  if (common_device({&update, &momentum_buffer, &grad}, "muon_nesterov_momentum") == Device::kCuda) {
    return NANOFORGE_CUDA(muon_nesterov_momentum, update, momentum_buffer, grad, momentum);
  }
  NANOFORGE_CPU(muon_nesterov_momentum, grad, update, momentum_buffer, grad, momentum);
}

void muon_equilibrate_rows(TensorView x) {
  if (x.device == Device::kCuda) return NANOFORGE_CUDA(muon_equilibrate_rows, x);
  NANOFORGE_CPU(muon_equilibrate_rows, x, x);
}

void normalize_frobenius(TensorView x, double multiplier, double eps) {
  if (x.device == Device::kCuda) return NANOFORGE_CUDA(normalize_frobenius, x, multiplier, eps);
  NANOFORGE_CPU(normalize_frobenius, x, x, multiplier, eps);
}

void rescale_frobenius(TensorView x, double target_norm, double eps) {
  if (x.device == Device::kCuda) return NANOFORGE_CUDA(rescale_frobenius, x, target_norm, eps);
  NANOFORGE_CPU(rescale_frobenius, x, x, target_norm, eps);
}

void normuon_variance_reduce(TensorView g, TensorView second_moment, double beta2) {
  if (common_device({&g, &second_moment}, "normuon_variance_reduce") == Device::kCuda) {
    return NANOFORGE_CUDA(normuon_variance_reduce, g, second_moment, beta2);
  }
  NANOFORGE_CPU(normuon_variance_reduce, g, g, second_moment, beta2);
}

void cautious_weight_decay_step(TensorView param, TensorView update, double lr, double weight_decay) {
  if (common_device({&param, &update}, "cautious_weight_decay_step") == Device::kCuda) {
    return NANOFORGE_CUDA(cautious_weight_decay_step, param, update, lr, weight_decay);
  }
  NANOFORGE_CPU(cautious_weight_decay_step, param, param, update, lr, weight_decay);
}

double squared_norm(TensorView x) {
  double total = 0;
  timed(
      "squared_norm", x.device, [&] { return cost::squared_norm(x); },
      [&] {
        if (x.device == Device::kCuda) {
#ifdef NANOFORGE_HAVE_CUDA
          total = cuda::squared_norm(x);
#else
          missing_cuda_op("squared_norm");
#endif
          return;
        }
        on_cpu(x.dtype, "squared_norm", [&](auto zero) { total = cpu::squared_norm<decltype(zero)>(x); });
      });
  return total;
}

namespace {
// A step scalar: one f64 on the device of the tensor it sums.
void check_step_total(const TensorView& total, const TensorView& source, const char* op) {
  NANOFORGE_CHECK(total.dtype == DType::kF64 && total.numel() == 1 && total.device == source.device,
                  "{}: total {} must be one f64 on the device of {}", op, total.describe(),
                  source.describe());
}
}  // namespace

void add_squared_norm(TensorView total, TensorView x) {
  check_step_total(total, x, "add_squared_norm");
  if (x.device == Device::kCuda) return NANOFORGE_CUDA(add_squared_norm, total, x);
  timed(
      "add_squared_norm", Device::kCpu, [&] { return cost::add_squared_norm(total, x); },
      [&] {
        on_cpu(x.dtype, "add_squared_norm",
               [&](auto zero) { total.as<double>()[0] += cpu::squared_norm<decltype(zero)>(x); });
      });
}

void add_mean_loss(TensorView total, TensorView losses, TensorView targets) {
  check_step_total(total, losses, "add_mean_loss");
  if (common_device({&losses, &targets}, "add_mean_loss") == Device::kCuda)
    return NANOFORGE_CUDA(add_mean_loss, total, losses, targets);
  timed(
      "add_mean_loss", Device::kCpu, [&] { return cost::add_mean_loss(total, losses, targets); },
      [&] {
        on_cpu(losses.dtype, "add_mean_loss", [&](auto zero) {
          const LossSum loss = cpu::sum_loss<decltype(zero)>(losses, targets);
          total.as<double>()[0] += loss.count > 0 ? loss.sum / static_cast<double>(loss.count)
                                                  : std::numeric_limits<double>::quiet_NaN();
        });
      });
}

}  // namespace nanoforge::ops
