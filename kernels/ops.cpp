// The op dispatcher: checks that an op's tensors share one device, then runs the CUDA function or the CPU
// template for the dtype (f32 or f64), timing the call when op profiling is on — or, while this thread
// records (kernels/op_recorder.h), hands the call to the recorder and runs nothing. The ops of
// kernels/op_list.inc are dispatched by one generated body; those that route by hand follow it.
#include "kernels/ops.h"

#include <initializer_list>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/op_profile.h"
#include "kernels/op_recorder.h"
#ifdef NANOFORGE_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cudnn_attention.h"
#endif

namespace nanoforge::ops {
namespace {

// Where a call runs: its tensors' device and, for the CPU, their float dtype (the template's T).
struct Placement {
  Device device = Device::kCpu;
  DType dtype = DType::kI32;  // kI32 when the call has no float tensor
};

// An op argument's tensor (a HeadSlice's is the tensor it slices), or nullptr for one that is no tensor.
const TensorView* tensor_of(const TensorView& t) {
  return &t;
}
const TensorView* tensor_of(const HeadSlice& slice) {
  return &slice.whole;
}
const TensorView* tensor_of(const AmaxOutput& amax) {
  return amax.wanted() ? &amax.value : nullptr;
}
template <class NotATensor>
const TensorView* tensor_of(const NotATensor& /*value*/) {
  return nullptr;
}

// All of an op's tensors live on one device. On the CPU every floating-point tensor of one call must also
// share a dtype (the kernel's T); CUDA kernels mix bf16 activations with fp32 statistics and check their own.
template <class... Args>
Placement placement(const char* op, const Args&... args) {
  const std::initializer_list<const TensorView*> tensors{tensor_of(args)...};
  const TensorView* first = nullptr;
  const TensorView* first_float = nullptr;
  for (const TensorView* t : tensors) {
    if (t == nullptr) continue;
    if (first == nullptr) first = t;
    NANOFORGE_CHECK(t->device == first->device, "{}: tensors on different devices ({} and {})", op,
                    first->describe(), t->describe());
    if (t->dtype == DType::kI32) continue;
    if (first_float == nullptr) first_float = t;
    NANOFORGE_CHECK(first->device != Device::kCpu || t->dtype == first_float->dtype,
                    "{}: CPU tensors of one op share a float dtype ({} and {})", op, first_float->describe(),
                    t->describe());
  }
  return {first->device, first_float != nullptr ? first_float->dtype : DType::kI32};
}

// Returns fn(T{}) with T the CPU element type for `dtype`.
template <class Return, class Fn>
Return on_cpu(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(float{});
    case DType::kF64:
      return fn(double{});
    default:
      NANOFORGE_CHECK(false, "{}: the CPU backend computes in f32 or f64, not {}", op, dtype_name(dtype));
      __builtin_unreachable();
  }
}

#ifdef NANOFORGE_HAVE_CUDA
#define NANOFORGE_CUDA_CALL(name, Return, args) cuda::name args
#else
// A CUDA tensor in a build without the CUDA backend (every op has a CUDA kernel when it is built).
template <class Return>
[[noreturn]] Return missing_cuda_op(const char* op) {
  NANOFORGE_CHECK(false, "{}: this nanoforge was built without the CUDA backend (-DNANOFORGE_CUDA=ON)", op);
  __builtin_unreachable();
}
#define NANOFORGE_CUDA_CALL(name, Return, args) missing_cuda_op<Return>(#name)
#endif

// One op call: while this thread records, record(recorder) and a default value (0 for squared_norm, an empty
// LossSum for sum_loss); otherwise run(), timed when profiling is on (kernels/op_profile.h).
template <class Return, class Record, class Run>
Return call(const char* op, Device device, Record&& record, Run&& run) {
  if (OpRecorder* recorder = op_recorder()) {
    record(*recorder);
    return Return();
  }
  ScopedOpTimer timer(op, device);
  return run();
}

}  // namespace

// Op `name` with `args`, on `device`: recorded, or cuda::name, or cpu::name<T> for the CPU dtype.
#define NANOFORGE_CALL(name, Return, args, device, cpu_dtype)                                               \
  call<Return>(                                                                                             \
      #name, device, [&](OpRecorder& recorder) { recorder.name args; },                                     \
      [&]() -> Return {                                                                                     \
        if (device == Device::kCuda) return NANOFORGE_CUDA_CALL(name, Return, args);                        \
        return on_cpu<Return>(cpu_dtype, #name, [&](auto zero) { return cpu::name<decltype(zero)> args; }); \
      })
// A call that runs on the GPU only (a CUDA variant, or an op the CPU composes from other ops).
#define NANOFORGE_CUDA_ONLY_CALL(name, args)                                   \
  call<void>(                                                                  \
      #name, Device::kCuda, [&](OpRecorder& recorder) { recorder.name args; }, \
      [&] { NANOFORGE_CUDA_CALL(name, void, args); })
#define NANOFORGE_ARGUMENTS(...) __VA_ARGS__

// Every op of the list that is not routed by hand.
#define NANOFORGE_OP(name, Return, params, args)                          \
  Return name params {                                                    \
    const Placement where = placement(#name, NANOFORGE_ARGUMENTS args);   \
    return NANOFORGE_CALL(name, Return, args, where.device, where.dtype); \
  }
#define NANOFORGE_ROUTED_OP(name, Return, params, args)
#include "kernels/op_list.inc"

// ---- routed by hand ----

// i32 tensors (token ids) are filled and copied on the CPU by the int32_t templates.
void fill(TensorView t, double value) {
  if (t.device == Device::kCpu && t.dtype == DType::kI32) {
    return call<void>(
        "fill", Device::kCpu, [&](OpRecorder& recorder) { recorder.fill(t, value); },
        [&] { cpu::fill<int32_t>(t, value); });
  }
  NANOFORGE_CALL(fill, void, (t, value), t.device, t.dtype);
}

void copy(TensorView dst, TensorView src) {
  NANOFORGE_CHECK(dst.dtype == src.dtype, "copy: dtypes differ ({} vs {})", dst.describe(), src.describe());
  const Placement where = placement("copy", dst, src);
  if (where.device == Device::kCpu && dst.dtype == DType::kI32) {
    return call<void>(
        "copy", Device::kCpu, [&](OpRecorder& recorder) { recorder.copy(dst, src); },
        [&] { cpu::copy<int32_t>(dst, src); });
  }
  NANOFORGE_CALL(copy, void, (dst, src), where.device, where.dtype);
}

// Two dtypes: the CPU's template is convert<Dst, Src>; the same dtype is a copy.
void convert(TensorView dst, TensorView src) {
  check_same_shape(dst, src, "convert");
  NANOFORGE_CHECK(dst.device == src.device, "convert: tensors on different devices ({} and {})",
                  dst.describe(), src.describe());
  if (dst.dtype == src.dtype) return copy(dst, src);
  const auto record = [&](OpRecorder& recorder) { recorder.convert(dst, src); };
  if (dst.device == Device::kCuda) {
    return call<void>("convert", Device::kCuda, record,
                      [&] { NANOFORGE_CUDA_CALL(convert, void, (dst, src)); });
  }
  if (dst.dtype == DType::kF32 && src.dtype == DType::kF64)
    return call<void>("convert", Device::kCpu, record, [&] { cpu::convert<float, double>(dst, src); });
  if (dst.dtype == DType::kF64 && src.dtype == DType::kF32)
    return call<void>("convert", Device::kCpu, record, [&] { cpu::convert<double, float>(dst, src); });
  NANOFORGE_CHECK(false, "convert on the CPU: f32 <-> f64 only, not {} to {}", src.describe(),
                  dst.describe());
}

int64_t attention_workspace_bytes(Device device, DType dtype, [[maybe_unused]] int64_t batch, int64_t seq,
                                  [[maybe_unused]] int64_t heads, [[maybe_unused]] int64_t kv_heads,
                                  [[maybe_unused]] int64_t head_dim, int64_t window) {
  if (device == Device::kCuda) {
#ifdef NANOFORGE_HAVE_CUDA
    return cuda::attention_workspace_bytes(batch, seq, heads, kv_heads, head_dim,
                                           window);  // a size, not timed
#else
    if (op_recorder() != nullptr) return 0;  // recorded ops never touch their workspace
    return missing_cuda_op<int64_t>("attention_workspace_bytes");
#endif
  }
  return cpu::attention_workspace_bytes(dtype, seq, window);
}

// cuDNN's attention on the GPU where settings.attention chooses it, recorded under its own name.
void attention_forward(TensorView out, TensorView lse, HeadSlice q, HeadSlice k, HeadSlice v, int64_t window,
                       double scale, TensorView workspace, const KernelSettings& settings) {
  const Placement where = placement("attention_forward", out, lse, q, k, v, workspace);
  if (where.device == Device::kCuda && settings.attention == AttentionImplementation::kCudnn) {
    return NANOFORGE_CUDA_ONLY_CALL(cudnn_attention_forward,
                                    (out, lse, q, k, v, window, scale, workspace, settings));
  }
  NANOFORGE_CALL(attention_forward, void, (out, lse, q, k, v, window, scale, workspace, settings),
                 where.device, where.dtype);
}

void attention_backward(HeadSlice d_q, HeadSlice d_k, HeadSlice d_v, TensorView d_out, HeadSlice q,
                        HeadSlice k, HeadSlice v, TensorView out, TensorView lse, int64_t window,
                        double scale, TensorView workspace, const KernelSettings& settings) {
  const Placement where = placement("attention_backward", d_q, d_k, d_v, d_out, q, k, v, out, lse, workspace);
  if (where.device == Device::kCuda && settings.attention == AttentionImplementation::kCudnn) {
    return NANOFORGE_CUDA_ONLY_CALL(cudnn_attention_backward, (d_q, d_k, d_v, d_out, q, k, v, out, lse,
                                                               window, scale, workspace, settings));
  }
  NANOFORGE_CALL(attention_backward, void,
                 (d_q, d_k, d_v, d_out, q, k, v, out, lse, window, scale, workspace, settings), where.device,
                 where.dtype);
}

// Our fused GEMM where settings.mlp_gemm chooses it on the GPU; otherwise the GEMM and the pass as two ops
// (each profiled and recorded under its own name).
void linear_relu_squared_forward(TensorView act, TensorView x, TensorView w, const KernelSettings& settings) {
  const Device device = placement("linear_relu_squared_forward", act, x, w).device;
  if (device == Device::kCuda && settings.mlp_gemm == MlpGemm::kFused) {
    return NANOFORGE_CUDA_ONLY_CALL(linear_relu_squared_forward, (act, x, w, settings));
  }
  NANOFORGE_CHECK(act.data != x.data, "linear_relu_squared_forward: act must not alias x");
  matmul(act, x, Transpose::kNo, w, Transpose::kYes, 1.0, 0.0);
  relu_squared_forward(act, act, AmaxOutput());
}

void relu_squared_linear_backward(TensorView d_pre, TensorView d_y, TensorView w, TensorView act,
                                  const KernelSettings& settings) {
  const Device device = placement("relu_squared_linear_backward", d_pre, d_y, w, act).device;
  if (device == Device::kCuda && settings.mlp_gemm == MlpGemm::kFused) {
    return NANOFORGE_CUDA_ONLY_CALL(relu_squared_linear_backward, (d_pre, d_y, w, act, settings));
  }
  NANOFORGE_CHECK(d_pre.data != d_y.data && d_pre.data != act.data,
                  "relu_squared_linear_backward: d_pre must alias neither d_y nor act");
  matmul(d_pre, d_y, Transpose::kNo, w, Transpose::kNo, 1.0, 0.0);
  relu_squared_backward(d_pre, d_pre, act);
}

// The FP8 ops mix code tensors with float ones: the CPU template's T is the float tensor's (x, out), and an
// empty output view has no device. Their shapes are checked here, for both backends.
namespace {
void check_one_device(const char* op, Device device, std::initializer_list<const TensorView*> tensors) {
  for (const TensorView* t : tensors) {
    if (t->data == nullptr) continue;
    NANOFORGE_CHECK(t->device == device, "{}: {} is not on {}", op, t->describe(), device_name(device));
  }
}
bool is_fp8(const TensorView& t) {
  return t.dtype == DType::kF8E4M3 || t.dtype == DType::kF8E5M2;
}
void check_one_f32(const char* op, const char* name, const TensorView& t) {
  NANOFORGE_CHECK(t.data != nullptr && t.dtype == DType::kF32 && t.numel() == 1, "{}: {} {} must be one f32",
                  op, name, t.describe());
}
}  // namespace

void fp8_quantize(TensorView q, TensorView q_transposed, TensorView inv_scale, TensorView amax,
                  Fp8Amax amax_source, TensorView x, int64_t first_column) {
  constexpr const char* kOp = "fp8_quantize";
  check_one_device(kOp, x.device, {&q, &q_transposed, &inv_scale, &amax});
  const bool has_q = q.data != nullptr, has_t = q_transposed.data != nullptr;
  NANOFORGE_CHECK(has_q || has_t, "fp8_quantize: no output (q and q_transposed are both empty)");
  NANOFORGE_CHECK(x.rank == 2, "fp8_quantize: x {} must be a matrix", x.describe());
  const TensorView& shaped = has_q ? q : q_transposed;
  NANOFORGE_CHECK(is_fp8(shaped) && shaped.rank == 2, "fp8_quantize: {} is no FP8 matrix", shaped.describe());
  const int64_t rows = x.shape[0], cols = has_q ? q.shape[1] : q_transposed.shape[0];
  NANOFORGE_CHECK(!has_q || q.shape[0] == rows, "fp8_quantize: q {} for x {}", q.describe(), x.describe());
  NANOFORGE_CHECK(!has_t || (q_transposed.rank == 2 && q_transposed.shape[0] == cols &&
                             q_transposed.shape[1] == rows && q_transposed.dtype == shaped.dtype),
                  "fp8_quantize: q_transposed {} for {} x {} codes of {}", q_transposed.describe(), cols,
                  rows, dtype_name(shaped.dtype));
  NANOFORGE_CHECK(first_column >= 0 && first_column + cols <= x.shape[1],
                  "fp8_quantize: columns [{}, {}) outside x {}", first_column, first_column + cols,
                  x.describe());
  check_one_f32(kOp, "inv_scale", inv_scale);
  check_one_f32(kOp, "amax", amax);
  NANOFORGE_CALL(fp8_quantize, void, (q, q_transposed, inv_scale, amax, amax_source, x, first_column),
                 x.device, x.dtype);
}

// Our fused FP8 MLP GEMM where settings.mlp_gemm chooses it on the GPU; otherwise the FP8 GEMM and the pass
// as two ops, as linear_relu_squared_forward and relu_squared_linear_backward.
void fp8_linear_relu_squared_forward(TensorView act, AmaxOutput amax, TensorView x, TensorView x_inv_scale,
                                     TensorView w, TensorView w_inv_scale, const KernelSettings& settings) {
  if (act.device == Device::kCuda && settings.mlp_gemm == MlpGemm::kFused) {
    check_one_device("fp8_linear_relu_squared_forward", act.device,
                     {&amax.value, &x, &x_inv_scale, &w, &w_inv_scale});
    return NANOFORGE_CUDA_ONLY_CALL(fp8_linear_relu_squared_forward,
                                    (act, amax, x, x_inv_scale, w, w_inv_scale, settings));
  }
  fp8_matmul(act, 0, x, x_inv_scale, w, w_inv_scale, 0.0);
  relu_squared_forward(act, act, amax);
}

void fp8_relu_squared_linear_backward(TensorView d_pre, TensorView d_y, TensorView d_y_inv_scale,
                                      TensorView w, TensorView w_inv_scale, TensorView act,
                                      const KernelSettings& settings) {
  if (d_pre.device == Device::kCuda && settings.mlp_gemm == MlpGemm::kFused) {
    check_one_device("fp8_relu_squared_linear_backward", d_pre.device,
                     {&d_y, &d_y_inv_scale, &w, &w_inv_scale, &act});
    return NANOFORGE_CUDA_ONLY_CALL(fp8_relu_squared_linear_backward,
                                    (d_pre, d_y, d_y_inv_scale, w, w_inv_scale, act, settings));
  }
  NANOFORGE_CHECK(d_pre.data != d_y.data && d_pre.data != act.data,
                  "fp8_relu_squared_linear_backward: d_pre must alias neither d_y nor act");
  fp8_matmul(d_pre, 0, d_y, d_y_inv_scale, w, w_inv_scale, 0.0);
  relu_squared_backward(d_pre, d_pre, act);
}

void fp8_matmul(TensorView out, int64_t out_first_column, TensorView a, TensorView a_inv_scale, TensorView b,
                TensorView b_inv_scale, double beta) {
  constexpr const char* kOp = "fp8_matmul";
  check_one_device(kOp, out.device, {&a, &a_inv_scale, &b, &b_inv_scale});
  NANOFORGE_CHECK(out.rank == 2 && a.rank == 2 && b.rank == 2 && is_fp8(a) && is_fp8(b),
                  "fp8_matmul: out {}, a {} and b {} must be matrices, a and b FP8 codes", out.describe(),
                  a.describe(), b.describe());
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
  NANOFORGE_CHECK(
      b.shape[1] == k && out.shape[0] == m && out_first_column >= 0 && out_first_column + n <= out.shape[1],
      "fp8_matmul: {} @ {}^T does not fit columns [{}, {}) of {}", a.describe(), b.describe(),
      out_first_column, out_first_column + n, out.describe());
  check_one_f32(kOp, "a_inv_scale", a_inv_scale);
  check_one_f32(kOp, "b_inv_scale", b_inv_scale);
  NANOFORGE_CALL(fp8_matmul, void, (out, out_first_column, a, a_inv_scale, b, b_inv_scale, beta), out.device,
                 out.dtype);
}

bool softcap_leaves_capped_logits(Device device) {
  return device == Device::kCpu;
}

namespace {
// A step scalar: one f64 on the device of the tensor it sums (its dtype is checked apart from theirs).
void check_step_total(const TensorView& total, const TensorView& source, const char* op) {
  NANOFORGE_CHECK(total.dtype == DType::kF64 && total.numel() == 1 && total.device == source.device,
                  "{}: total {} must be one f64 on the device of {}", op, total.describe(),
                  source.describe());
}
}  // namespace

void add_squared_norm(TensorView total, TensorView x) {
  check_step_total(total, x, "add_squared_norm");
  NANOFORGE_CALL(add_squared_norm, void, (total, x), x.device, x.dtype);
}

void add_mean_loss(TensorView total, TensorView losses, TensorView targets) {
  check_step_total(total, losses, "add_mean_loss");
  const Placement where = placement("add_mean_loss", losses, targets);
  NANOFORGE_CALL(add_mean_loss, void, (total, losses, targets), where.device, where.dtype);
}

}  // namespace nanoforge::ops
