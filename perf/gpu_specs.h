// The GPUs the performance model predicts for (H200, H100, GB10): what the hardware can do, each number
// with where it comes from (gpu_specs.cpp), and the efficiencies the model assumes of nanoforge's kernels on
// it — assumptions, not measurements, stated so that a measured step can prove them wrong.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace nanoforge {

struct GpuSpec {
  std::string name;         // "h200", as --gpu takes it
  std::string description;  // "NVIDIA H200 SXM (HGX, NVLink 4)"
  // Hardware.
  double tensor_flops = 0;        // dense bf16 tensor-core FLOP/s: perf/peak_flops.h's row (MFU's peak)
  double fp8_tensor_flops = 0;    // dense FP8 (e4m3/e5m2) tensor-core FLOP/s, fp32 accumulation
  double fp32_flops = 0;          // CUDA-core fp32 FLOP/s (an FMA is 2)
  double sfu_ops_per_s = 0;       // special-function-unit instructions (ex2, rcp) a second, all SMs
  double memory_bytes_per_s = 0;  // DRAM bandwidth
  double link_bytes_per_s = 0;    // GPU-to-GPU bandwidth per direction, what NCCL's bus bandwidth approaches
  double link_latency_seconds = 0;  // a collective's fixed cost
  int sms = 0;                      // streaming multiprocessors: a GEMM's output tiles run in waves of this
  // What model.mlp_gemm=auto decides by (kernels/mlp_gemm.h), and bench step's --attention auto (cuDNN 9
  // from sm_90 on).
  int compute_capability_major = 0;
  // Assumed efficiencies of nanoforge's kernels (fractions of the peaks above).
  double gemm_efficiency = 0;                // cuBLASLt on large bf16 GEMMs, before wave quantisation
  double own_gemm_efficiency = 0;            // our mma.sync MLP GEMM (kernels/cuda/mlp_gemm.cu), likewise
  double attention_forward_efficiency = 0;   // the flash-attention forward's tensor-core FLOPs
  double attention_backward_efficiency = 0;  // its backward
  double cudnn_attention_forward_efficiency = 0;   // cuDNN's fused attention (flash FLOPs), forward
  double cudnn_attention_backward_efficiency = 0;  // its backward (FlashAttention-2's five tile GEMMs)
  double fp32_efficiency = 0;                      // CUDA-core-bound kernels (the loss's tanh/exp)
  double memory_efficiency = 0;                    // streaming element-wise kernels
  double link_efficiency = 0;                      // NCCL reduce-scatter / all-gather bus bandwidth
  double kernel_floor_seconds = 0;  // the least time a kernel takes in a busy stream (launch, ramp, tail)
  double kernel_tail_seconds = 0;   // what each launch adds to its roofline time: the last wave's drain
                                    // and the next kernel's ramp, when its SMs idle
  double host_sync_seconds = 0;     // a value read back to the host: the queue drains and refills
};

// The spec for --gpu (h200, h100, gb10; case-insensitive), nullopt for any other name.
std::optional<GpuSpec> gpu_spec(const std::string& name);
// The names gpu_spec knows, for error messages.
std::vector<std::string> gpu_spec_names();
// The spec of a device by its reported name ("NVIDIA H200", "NVIDIA GB10"), through the peak table's rows.
std::optional<GpuSpec> gpu_spec_for_device(const std::string& device_name);

}  // namespace nanoforge
