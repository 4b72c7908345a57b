// The kernels of emulator_test_kernels.h: each is the smallest CUDA code that shows one behaviour of the
// emulator (a race between warps or lanes, a deadlock, divergent warp calls, __trap, fresh shared memory, the
// shared-memory opt-in, wmma's element mapping and products, ldmatrix and cp.async). Written in plain CUDA,
// launched through kernels/cuda/launch.cuh as the backend's kernels are.
#include <cuda_bf16.h>
#include <mma.h>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mma_ptx.cuh"
#include "tests/emulator/emulator_test_kernels.h"

namespace nanoforge::emulator_test {
namespace {

using cuda::launch_kernel;

__global__ void record_indices_kernel(uint32_t* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  out[block * threads + thread] += block * 4096 + thread + 1;
}

__global__ void fill_kernel(float* out, int64_t count, float value) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    out[i] = value;
}

template <bool kSynchronized>
__global__ void exchange_between_warps_kernel(float* out) {
  __shared__ float slots[32];
  const int warp = static_cast<int>(threadIdx.x) / 32, warps = static_cast<int>(blockDim.x) / 32;
  if (threadIdx.x % 32 == 0) slots[warp] = static_cast<float>(100 * blockIdx.x + warp);
  if constexpr (kSynchronized) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = slots[(warp + 1) % warps];
}

template <bool kSynchronized>
__global__ void exchange_between_lanes_kernel(float* out) {
  __shared__ float slots[32];
  slots[threadIdx.x] = static_cast<float>(threadIdx.x) + 0.5f;
  if constexpr (kSynchronized) __syncwarp();
  out[threadIdx.x] = slots[(threadIdx.x + 1) % 32];
}

__global__ void warp_intrinsics_kernel(int* out, unsigned* ballots) {
  const int lane = static_cast<int>(threadIdx.x);
  const int value = 10 * lane;
  out[4 * lane + 0] = __shfl_sync(0xffffffffu, value, 3);
  out[4 * lane + 1] = __shfl_up_sync(0xffffffffu, value, 1, 8);
  out[4 * lane + 2] = __shfl_down_sync(0xffffffffu, value, 2, 16);
  out[4 * lane + 3] = __shfl_xor_sync(0xffffffffu, value, 5);
  ballots[lane] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  ballots[32 + lane] = static_cast<unsigned>(__any_sync(0xffffffffu, lane == 7));
  ballots[64 + lane] = static_cast<unsigned>(__all_sync(0xffffffffu, lane < 32));
}

__global__ void deadlock_kernel() {
  if (threadIdx.x % 32 < 16) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

__global__ void divergent_warp_calls_kernel() {
  if (threadIdx.x % 2 == 0) {
    (void)__shfl_xor_sync(0xffffffffu, 1.0f, 1);
  } else {
    __syncwarp();
  }
}

__global__ void barrier_after_exit_kernel() {
  if (threadIdx.x >= 32) return;
  __syncthreads();
}

__global__ void trap_kernel() {
  if (blockIdx.x == 1 && threadIdx.x == 5) __trap();
}

__global__ void read_fresh_shared_memory_kernel(float* out, int floats) {
  NANOFORGE_DYNAMIC_SHARED(float, fresh, 16);
  for (int i = static_cast<int>(threadIdx.x); i < floats; i += static_cast<int>(blockDim.x))
    out[i] = fresh[i];
}

__global__ void use_shared_memory_kernel(int* out, size_t bytes) {
  // Named apart from `fresh`: under nvcc every extern __shared__ array of a namespace is one symbol.
  NANOFORGE_DYNAMIC_SHARED(unsigned char, block_bytes, 16);
  if (threadIdx.x == 0) {
    block_bytes[bytes - 1] = 42;
    *out = block_bytes[bytes - 1];
  }
}

using Accumulator = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;

__global__ void fragment_positions_kernel(const float* tables, int* rows, int* cols) {
  Accumulator fragment;
  nvcuda::wmma::load_matrix_sync(fragment, tables, 16, nvcuda::wmma::mem_row_major);
  for (int i = 0; i < Accumulator::num_elements; ++i)
    rows[threadIdx.x * Accumulator::num_elements + i] = static_cast<int>(fragment.x[i]);
  nvcuda::wmma::load_matrix_sync(fragment, tables + 256, 16, nvcuda::wmma::mem_row_major);
  for (int i = 0; i < Accumulator::num_elements; ++i)
    cols[threadIdx.x * Accumulator::num_elements + i] = static_cast<int>(fragment.x[i]);
}

__global__ void tile_mma_kernel(float* d, const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c) {
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major>
      a_fragment;
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major>
      b_fragment;
  Accumulator accumulator;
  nvcuda::wmma::load_matrix_sync(a_fragment, a, 16);
  nvcuda::wmma::load_matrix_sync(b_fragment, b, 16);
  nvcuda::wmma::load_matrix_sync(accumulator, c, 16, nvcuda::wmma::mem_row_major);
  nvcuda::wmma::mma_sync(accumulator, a_fragment, b_fragment, accumulator);
  nvcuda::wmma::store_matrix_sync(d, accumulator, 16, nvcuda::wmma::mem_row_major);
}

__global__ void ptx_tile_mma_kernel(float* d, const __nv_bfloat16* a, const __nv_bfloat16* b,
                                    const float* c) {
  __shared__ __align__(16) __nv_bfloat16 a_tile[16 * 16];
  const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
  for (int i = lane; i < 256; i += 32)
    a_tile[i] = a[i];
  __syncwarp();
  // Matrix i of the four 8x8 is rows (i % 2) * 8 .., columns (i / 2) * 8 ..: A's register order.
  const int matrix = lane / 8;
  uint32_t a_registers[4];
  cuda::ptx::ldmatrix_x4(a_registers, &a_tile[(lane % 8 + (matrix % 2) * 8) * 16 + (matrix / 2) * 8]);
  uint32_t b_registers[2];
  for (int i = 0; i < 2; ++i)
    b_registers[i] = *reinterpret_cast<const uint32_t*>(&b[g * 16 + 2 * t + 8 * i]);
  float c_registers[4], d_registers[4];
  for (int i = 0; i < 4; ++i)
    c_registers[i] = c[(g + (i / 2) * 8) * 8 + 2 * t + i % 2];
  cuda::ptx::mma_m16n8k16_bf16(d_registers, a_registers, b_registers, c_registers);
  for (int i = 0; i < 4; ++i)
    d[(g + (i / 2) * 8) * 8 + 2 * t + i % 2] = d_registers[i];
}

// Lane l writes r[0..3] of ldmatrix x4 (or x4.trans) over a 16x16 b16 tile in dynamic shared memory, matrix
// i being rows (i % 2) * 8 .., columns (i / 2) * 8 ..
template <bool kTranspose>
__global__ void ldmatrix_registers_kernel(uint32_t* out, const uint16_t* tile) {
  // Named apart from the float arrays below: under nvcc every extern __shared__ array of a namespace is one
  // symbol.
  NANOFORGE_DYNAMIC_SHARED(uint16_t, ldmatrix_tile, 16);
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < 256; i += 32)
    ldmatrix_tile[i] = tile[i];
  __syncwarp();
  const int matrix = lane / 8;
  const uint16_t* row = &ldmatrix_tile[(lane % 8 + (matrix % 2) * 8) * 16 + (matrix / 2) * 8];
  uint32_t r[4];
  if constexpr (kTranspose) {
    cuda::ptx::ldmatrix_x4_trans(r, row);
  } else {
    cuda::ptx::ldmatrix_x4(r, row);
  }
  for (int i = 0; i < 4; ++i)
    out[lane * 4 + i] = r[i];
}

__device__ void copy_four(float* to, const float* from) {
  for (int i = 0; i < 4; ++i)
    to[i] = from[i];
}

// 64 threads; thread i copies floats 4i .. 4i+3 of source (group 0) and of source + 256 (group 1, zeros
// for odd i) into shared memory, and records its chunks around the waits (see emulator_test_kernels.h).
__global__ void async_copy_stages_kernel(float* out, const float* source) {
  NANOFORGE_DYNAMIC_SHARED(float, staged, 16);
  const int i = static_cast<int>(threadIdx.x);
  float* record = out + i * 16;
  cuda::ptx::cp_async_16(staged + 4 * i, source + 4 * i, true);
  cuda::ptx::cp_async_commit_group();
  cuda::ptx::cp_async_16(staged + 256 + 4 * i, source + 256 + 4 * i, i % 2 == 0);
  cuda::ptx::cp_async_commit_group();
  copy_four(record, staged + 4 * i);
  cuda::ptx::cp_async_wait_group<1>();
  copy_four(record + 4, staged + 4 * i);
  copy_four(record + 8, staged + 256 + 4 * i);
  cuda::ptx::cp_async_wait_group<0>();
  copy_four(record + 12, staged + 256 + 4 * i);
}

template <bool kSynchronized>
__global__ void async_copy_exchange_kernel(float* out, const float* source) {
  NANOFORGE_DYNAMIC_SHARED(float, staged, 16);
  const int i = static_cast<int>(threadIdx.x);
  cuda::ptx::cp_async_16(staged + 4 * i, source + 4 * i, true);
  cuda::ptx::cp_async_commit_group();
  cuda::ptx::cp_async_wait_group<0>();
  if constexpr (kSynchronized) __syncthreads();
  copy_four(out + 4 * i, staged + 4 * ((i + 32) % 64));
}

__global__ void fragment_load_kernel(const float* tile) {
  Accumulator fragment;
  nvcuda::wmma::load_matrix_sync(fragment, tile, 16, nvcuda::wmma::mem_row_major);
}

}  // namespace

void record_indices(uint32_t* out, dim3 grid, dim3 block, cudaStream_t stream) {
  launch_kernel<record_indices_kernel>(grid, block, 0, stream)(out);
}

void fill(float* out, int64_t count, float value, cudaStream_t stream) {
  launch_kernel<fill_kernel>(4, 64, 0, stream)(out, count, value);
}

void exchange_between_warps(float* out, int blocks, int threads, bool synchronized) {
  if (synchronized) {
    launch_kernel<exchange_between_warps_kernel<true>>(blocks, threads)(out);
  } else {
    launch_kernel<exchange_between_warps_kernel<false>>(blocks, threads)(out);
  }
}

void exchange_between_lanes(float* out, bool synchronized) {
  if (synchronized) {
    launch_kernel<exchange_between_lanes_kernel<true>>(1, 32)(out);
  } else {
    launch_kernel<exchange_between_lanes_kernel<false>>(1, 32)(out);
  }
}

void warp_intrinsics(int* out, unsigned* ballots) {
  launch_kernel<warp_intrinsics_kernel>(1, 32)(out, ballots);
}

void deadlock(int threads) {
  launch_kernel<deadlock_kernel>(1, threads)();
}

void divergent_warp_calls() {
  launch_kernel<divergent_warp_calls_kernel>(1, 32)();
}

void barrier_after_exit(int threads) {
  launch_kernel<barrier_after_exit_kernel>(1, threads)();
}

void trap(int blocks) {
  launch_kernel<trap_kernel>(blocks, 32)();
}

void read_fresh_shared_memory(float* out, int floats) {
  launch_kernel<read_fresh_shared_memory_kernel>(1, 64, floats * sizeof(float))(out, floats);
}

void use_shared_memory(int* out, size_t bytes) {
  launch_kernel<use_shared_memory_kernel>(1, 32, bytes)(out, bytes);
}

cudaError_t allow_shared_memory(int bytes) {
  return cudaFuncSetAttribute(use_shared_memory_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

void fragment_positions(int* rows, int* cols) {
  float tables[512];
  for (int i = 0; i < 256; ++i) {
    tables[i] = static_cast<float>(i / 16);
    tables[256 + i] = static_cast<float>(i % 16);
  }
  float* device_tables = nullptr;
  NANOFORGE_CUDA_CHECK(cudaMalloc(&device_tables, sizeof(tables)));
  NANOFORGE_CUDA_CHECK(cudaMemcpy(device_tables, tables, sizeof(tables), cudaMemcpyHostToDevice));
  launch_kernel<fragment_positions_kernel>(1, 32)(device_tables, rows, cols);
  NANOFORGE_CUDA_CHECK(cudaFree(device_tables));
}

void tile_mma(float* d, const uint16_t* a, const uint16_t* b, const float* c) {
  launch_kernel<tile_mma_kernel>(1, 32)(d, reinterpret_cast<const __nv_bfloat16*>(a),
                                        reinterpret_cast<const __nv_bfloat16*>(b), c);
}

void ptx_tile_mma(float* d, const uint16_t* a, const uint16_t* b, const float* c) {
  launch_kernel<ptx_tile_mma_kernel>(1, 32)(d, reinterpret_cast<const __nv_bfloat16*>(a),
                                            reinterpret_cast<const __nv_bfloat16*>(b), c);
}

void ldmatrix_registers(uint32_t* out, const uint16_t* tile, bool transpose) {
  if (transpose) {
    launch_kernel<ldmatrix_registers_kernel<true>>(1, 32, 512)(out, tile);
  } else {
    launch_kernel<ldmatrix_registers_kernel<false>>(1, 32, 512)(out, tile);
  }
}

void async_copy_stages(float* out, const float* source) {
  launch_kernel<async_copy_stages_kernel>(1, 64, 512 * sizeof(float))(out, source);
}

void async_copy_exchange(float* out, const float* source, bool synchronized) {
  if (synchronized) {
    launch_kernel<async_copy_exchange_kernel<true>>(1, 64, 256 * sizeof(float))(out, source);
  } else {
    launch_kernel<async_copy_exchange_kernel<false>>(1, 64, 256 * sizeof(float))(out, source);
  }
}

void misaligned_fragment_load(const float* tile, size_t offset_bytes) {
  launch_kernel<fragment_load_kernel>(
      1, 32)(reinterpret_cast<const float*>(reinterpret_cast<const char*>(tile) + offset_bytes));
}

}  // namespace nanoforge::emulator_test
