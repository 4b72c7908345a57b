// The GPU table. Hardware numbers are NVIDIA's published figures (sources per line); the dense bf16 peak is
// the peak table's (perf/peak_flops.cpp), so predicted MFU and the trainer's MFU share one denominator.
// Efficiencies are this model's assumptions, each with its reasoning; docs/kernels.md discusses them.
#include "perf/gpu_specs.h"

#include <algorithm>
#include <cctype>

#include "perf/peak_flops.h"

namespace nanoforge {
namespace {

// Efficiencies shared by the Hopper parts (H100 and H200 are the same GH100 die, 132 SMs).
GpuSpec hopper(std::string name, std::string description, double memory_bytes_per_s) {
  GpuSpec spec;
  spec.name = std::move(name);
  spec.description = std::move(description);
  spec.tensor_flops = peak_flops(spec.name)->flops_per_second;  // 989e12: datasheets' 1,979 TFLOPS sparse / 2
  spec.fp8_tensor_flops = 1979e12;  // datasheets: FP8 3,958 TFLOPS with sparsity, half of it dense
  spec.fp32_flops = 67e12;          // H100 SXM / H200 SXM datasheets: FP32 67 TFLOPS
  // 16 ex2/rcp a clock per SM (CUDA C Programming Guide, arithmetic instruction throughput, cc 9.0) x 132
  // SMs x 1.98 GHz boost (H100 SXM datasheet).
  spec.sfu_ops_per_s = 16 * 132 * 1.98e9;
  spec.memory_bytes_per_s = memory_bytes_per_s;
  spec.link_bytes_per_s = 450e9;      // NVLink 4: 900 GB/s per GPU both directions (datasheets), 450 each way
  spec.link_latency_seconds = 20e-6;  // assumed: NCCL ring/NVLS collective start-up on one HGX node
  spec.sms = 132;                     // H100 SXM5 (NVIDIA H100 whitepaper); the H200 is the same die
  spec.compute_capability_major = 9;  // sm_90
  // cuBLASLt bf16 GEMMs of a few thousand per side reach 600-750 TFLOP/s on H100 SXM in public
  // benchmarks: 0.70 of 989.
  spec.gemm_efficiency = 0.70;
  // Our MLP GEMM (kernels/cuda/mlp_gemm.cu) runs on mma.sync, which on Hopper issues at about two thirds of
  // wgmma's rate, from a 3-stage cp.async ring without cuBLASLt's tuning: assumed 0.45, unmeasured.
  spec.own_gemm_efficiency = 0.45;
  // The flash attention (kernels/cuda/flash_attention*.cu, docs/kernels.md "Flash attention"): mma.sync
  // m16n8k16 with S and P in registers, ldmatrix, cp.async double buffering; ~21-26 FLOP per shared-memory
  // byte in the forward where the tensor cores need ~32, and FlashAttention-2 (also mma.sync) reaches ~35 %
  // of an H100's peak forward: 0.35. The backward's seven tile GEMMs (dQ recomputes S and dP) at ~13 FLOP
  // per shared-memory byte: 20-25 % in FlashAttention-2's five-GEMM FLOPs, i.e. ~0.30 of the seven executed.
  // Reasoned from the code, not measured: the least certain numbers of the model.
  spec.attention_forward_efficiency = 0.35;
  spec.attention_backward_efficiency = 0.30;
  // cuDNN 9's fused attention on Hopper is built on wgmma, as FlashAttention-3 is; the FlashAttention-3
  // paper's H100 bf16 benchmarks (head dim 128) show both near 60 % of the peak forward and 45-50 % backward
  // at long sequences, less at short ones and with windows: assumed 0.55 and 0.40, unmeasured here.
  spec.cudnn_attention_forward_efficiency = 0.55;
  spec.cudnn_attention_backward_efficiency = 0.40;
  spec.fp32_efficiency = 0.60;    // assumed: transcendental-heavy code with reductions
  spec.memory_efficiency = 0.85;  // STREAM-like copies reach 85-90 % of HBM bandwidth on Hopper
  spec.link_efficiency = 0.80;    // nccl-tests' bus bandwidth on 8-GPU NVLink 4 nodes: ~360 of 450 GB/s
  // Assumed: a small kernel in a busy stream occupies ~3 us (launch, block ramp-up, tail) in Nsight traces
  // of Hopper training steps; the host round trip of a read-back (copy, synchronise, relaunch) ~20 us.
  spec.kernel_floor_seconds = 3e-6;
  // Assumed: a kernel's last wave leaves SMs idle for about a block's time and the next kernel's blocks
  // ramp up over ~1 us (Nsight traces of Hopper training steps show 1-2 us gaps between dependent kernels).
  spec.kernel_tail_seconds = 1.5e-6;
  spec.host_sync_seconds = 20e-6;
  return spec;
}

GpuSpec gb10() {
  GpuSpec spec;
  spec.name = "gb10";
  spec.description = "NVIDIA GB10 (DGX Spark, LPDDR5x, ConnectX-7)";
  // 125e12, the peak table's (derived there from NVIDIA's "1 PFLOP FP4 with sparsity"); MFU on a Spark is
  // reported against the same number.
  spec.tensor_flops = peak_flops(spec.name)->flops_per_second;
  // 250e12, derived like the bf16 figure: NVIDIA's 1 PFLOP is FP4 with sparsity, so 500 TFLOP/s dense FP4
  // and half that in FP8, twice the bf16 rate. Assumed at full rate with fp32 accumulation (GeForce
  // Blackwell parts halve it; no GB10 measurement says which applies).
  spec.fp8_tensor_flops = 250e12;
  // Derived, not published: 6,144 CUDA cores (DGX Spark specifications) x 2 FLOP per FMA x ~2.5 GHz.
  spec.fp32_flops = 30.7e12;
  // 16 ex2/rcp a clock per SM (CUDA C Programming Guide, cc 12.x) x 48 SMs x ~2.5 GHz, derived likewise.
  spec.sfu_ops_per_s = 16 * 48 * 2.5e9;
  spec.memory_bytes_per_s = 273e9;     // DGX Spark specifications: 128 GB LPDDR5x, 273 GB/s
  spec.link_bytes_per_s = 25e9;        // DGX Spark: ConnectX-7 at 200 Gb/s = 25 GB/s each way
  spec.link_latency_seconds = 30e-6;   // assumed: NCCL over RoCE between two boxes
  spec.sms = 48;                       // 6,144 CUDA cores / 128 per Blackwell SM
  spec.compute_capability_major = 12;  // sm_121
  // No public measurements of these kernels' kind on a GB10: Hopper's GEMM fraction, stated as such. The
  // flash attention needs only ~14 FLOP per shared-memory byte at the GB10's lower tensor rate, which its
  // forward's 18-25 and backward's 13-14 nearly meet; one 4-warp block per SM at head dim 128 and the SFU
  // decide instead (docs/kernels.md): 0.45 forward, 0.35 backward (executed FLOPs), reasoned, not measured.
  spec.gemm_efficiency = 0.70;
  // Our MLP GEMM uses the tensor-core instruction the GB10 has (mma.sync; cuBLASLt has nothing faster
  // there), but a first kernel's tiling: assumed 0.50, unmeasured (docs/kernels.md "The MLP GEMM").
  spec.own_gemm_efficiency = 0.50;
  spec.attention_forward_efficiency = 0.45;
  spec.attention_backward_efficiency = 0.35;
  // No wgmma on sm_12x: cuDNN's attention runs on mma.sync there, as ours does, under the same occupancy
  // and SFU limits: assumed equal to ours, unmeasured.
  spec.cudnn_attention_forward_efficiency = 0.45;
  spec.cudnn_attention_backward_efficiency = 0.35;
  spec.fp32_efficiency = 0.60;
  spec.memory_efficiency = 0.85;
  spec.link_efficiency = 0.80;
  spec.kernel_floor_seconds = 3e-6;
  spec.kernel_tail_seconds = 1.5e-6;  // Hopper's assumption (no GB10 traces yet)
  spec.host_sync_seconds = 20e-6;
  return spec;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

}  // namespace

std::optional<GpuSpec> gpu_spec(const std::string& name) {
  const std::string key = lower(name);
  if (key == "h200")
    return hopper("h200", "NVIDIA H200 SXM (HBM3e, NVLink 4)", 4.8e12);  // datasheet: 4.8 TB/s
  if (key == "h100")
    return hopper("h100", "NVIDIA H100 SXM (HBM3, NVLink 4)", 3.35e12);  // datasheet: 3.35 TB/s
  if (key == "gb10") return gb10();
  return std::nullopt;
}

std::vector<std::string> gpu_spec_names() {
  return {"h200", "h100", "gb10"};
}

std::optional<GpuSpec> gpu_spec_for_device(const std::string& device_name) {
  const std::optional<DevicePeak> peak = peak_flops(device_name);
  if (!peak) return std::nullopt;
  return gpu_spec(peak->label);  // "h200 nvl" and other variants have no spec: their bandwidths differ
}

}  // namespace nanoforge
