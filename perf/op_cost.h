// What each op of kernels/op_list.inc costs as the CUDA backend runs it — the work its kernels do, the DRAM
// bytes they move, how many kernels it launches — and OpCostRecorder, the op recorder (kernels/op_recorder.h)
// that prices each op a thread calls while it records, so a d20 step is priced on any machine in
// milliseconds. The cost functions are declared from the op list: an op without one does not link.
#pragma once

#include <cstdint>

#include "kernels/op_recorder.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace nanoforge {

// Which peak an op's arithmetic runs against, at which efficiency: the tensor cores (cuBLASLt's GEMMs, its
// FP8 GEMMs at the FP8 rate, our MLP GEMM in bf16 and in FP8, our flash attention, cuDNN's attention) or the
// CUDA cores.
enum class CostClass : uint8_t {
  kGemm,
  kFp8Gemm,
  kOwnGemm,
  kOwnFp8Gemm,
  kAttentionForward,
  kAttentionBackward,
  kCudnnAttentionForward,
  kCudnnAttentionBackward,
  kVector
};

struct OpCost {
  CostClass kind = CostClass::kVector;
  double tensor_flops = 0;  // tensor-core multiply-adds x 2, as the kernels execute them (masked tiles too)
  double vector_flops = 0;  // CUDA-core fp32 operations (transcendentals counted by their instruction cost)
  double sfu_ops = 0;       // special-function-unit instructions (ex2, rcp: __expf, __fdividef) issued
  double bytes = 0;         // DRAM traffic: each operand read or written once (re-reads assumed to hit L2)
  int kernels = 1;          // launches the op makes (each costs at least a kernel's minimum time)
  bool host_sync = false;   // the host waits for a value read back (sum_loss, squared_norm)
  int64_t gemm_rows = 0, gemm_cols = 0;  // a GEMM's output (M, N): how many output tiles fill the GPU
};

// Receives the priced ops: `op` is the op profiler's name of the op.
class OpCostSink {
 public:
  virtual ~OpCostSink() = default;
  virtual void record(const char* op, const OpCost& cost) = 0;
};

// Prices every op recorded on its thread (with ops::ScopedOpRecording) and hands it to the sink.
class OpCostRecorder final : public ops::OpRecorder {
 public:
  explicit OpCostRecorder(OpCostSink& sink) : sink_(sink) {}

#define NANOFORGE_OP(name, Return, params, args) void name params override;
#define NANOFORGE_CUDA_VARIANT NANOFORGE_OP
#include "kernels/op_list.inc"

 private:
  OpCostSink& sink_;
};

// One function per op (and per CUDA variant: cuDNN's attention), with the op's own parameters.
namespace cost {
#define NANOFORGE_OP(name, Return, params, args) OpCost name params;
#define NANOFORGE_CUDA_VARIANT NANOFORGE_OP
#include "kernels/op_list.inc"

// The (query tile, key tile) pairs the flash-attention kernels visit for one (batch, head): 64-row tiles,
// from the first key tile a query tile's window reaches to the diagonal (kernels/cuda/flash_attention*.cu).
int64_t attention_tile_pairs(int64_t seq, int64_t window);
inline constexpr int64_t kAttentionTileRows = 64;
}  // namespace cost

}  // namespace nanoforge
