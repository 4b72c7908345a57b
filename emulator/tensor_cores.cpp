// wmma fragment operations and the inline-PTX mma.sync and ldmatrix (plain and .trans) on the emulator
// (tensor_cores.h): each is one warp call; wmma goes through the launch's random element-to-lane mapping, PTX
// through the ISA's layouts. Products multiply bf16 (or FP8) values exactly in fp32 and add in k order,
// rounding each addition to nearest or, in the truncating mode, toward zero (-frounding-math keeps the
// compiler from assuming the default mode).
#include "emulator/tensor_cores.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cfenv>
#include <cstring>
#include <numeric>
#include <random>

#include "emulator/emulator.h"
#include "emulator/execution.h"
#include "emulator/runtime.h"

namespace nanoforge::emulator {
namespace {

constexpr int kLanes = 32;
constexpr int kElements = 8;
constexpr int kTile = 16;
constexpr int kKinds = 5;
constexpr unsigned kFullWarp = 0xffffffffu;

struct Position {
  uint8_t row, col;
};

// The current launch's mappings: lane l, element i of a fragment of kind k holds tile element at[k][l][i].
struct Mappings {
  uint64_t seed = ~uint64_t{0};
  Position at[kKinds][kLanes][kElements];
};

const Position (&mapping(FragmentKind kind))[kLanes][kElements] {
  thread_local Mappings mappings;
  const uint64_t seed = launch_seed();
  if (mappings.seed != seed) {
    mappings.seed = seed;
    std::mt19937_64 random(seed ^ 0x9E3779B97F4A7C15ull);
    for (int k = 0; k < kKinds; ++k) {
      std::array<int, kTile * kTile> order;
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), random);
      for (int l = 0; l < kLanes; ++l) {
        for (int i = 0; i < kElements; ++i) {
          const int position = order[static_cast<size_t>(l * kElements + i)];
          mappings.at[k][l][i] = {static_cast<uint8_t>(position / kTile),
                                  static_cast<uint8_t>(position % kTile)};
        }
      }
    }
  }
  return mappings.at[static_cast<int>(kind)];
}

const char* kind_name(FragmentKind kind) {
  switch (kind) {
    case FragmentKind::kMatrixARowMajor:
      return "matrix_a (row_major)";
    case FragmentKind::kMatrixAColMajor:
      return "matrix_a (col_major)";
    case FragmentKind::kMatrixBRowMajor:
      return "matrix_b (row_major)";
    case FragmentKind::kMatrixBColMajor:
      return "matrix_b (col_major)";
    case FragmentKind::kAccumulator:
      return "accumulator";
  }
  return "?";
}

size_t element_bytes(ElementType type) {
  return type == ElementType::kBf16 ? 2 : 4;
}

struct MemoryRecord {
  FragmentKind kind;
  ElementType type;
  void* elements;
  const void* pointer;
  unsigned ldm;
  bool column_major;
};

// The check of load_matrix_sync / store_matrix_sync across lanes: every lane passes the same arguments.
const MemoryRecord& check_memory_call(const WarpCall& call) {
  const auto& first = *static_cast<const MemoryRecord*>(call.records[0]);
  for (int lane = 1; lane < kLanes; ++lane) {
    const auto& other = *static_cast<const MemoryRecord*>(call.records[lane]);
    if (other.pointer != first.pointer || other.ldm != first.ldm ||
        other.column_major != first.column_major || other.kind != first.kind) {
      device_error(fmt::format("{} ({} fragment): lane 0 passes pointer {} and ldm {}, lane {} passes {} and "
                               "{}; every lane must pass the same arguments",
                               call.name, kind_name(first.kind), first.pointer, first.ldm, lane,
                               other.pointer, other.ldm),
                   call.site);
    }
  }
  return first;
}

size_t offset_of(const MemoryRecord& record, Position p) {
  return record.column_major ? size_t{p.col} * record.ldm + p.row : size_t{p.row} * record.ldm + p.col;
}

// The warp call of a load or a store only checks that the lanes agree; each lane moves its own elements
// (mine()), a load as soon as the lane arrives and a store only once every lane has, which is as early and as
// late as CUDA allows: shared memory written by other lanes before a load, or read by them after a store, is
// only there in time if a __syncwarp orders it.
void complete_memory_call(WarpCall& call) {
  check_memory_call(call);
}

void check_lane_arguments(const MemoryRecord& record, const char* name, std::source_location site) {
  if (reinterpret_cast<uintptr_t>(record.pointer) % 32 != 0) {
    device_error(fmt::format("{} ({} fragment): pointer {} is not 256-bit (32-byte) aligned", name,
                             kind_name(record.kind), record.pointer),
                 site);
  }
  if (record.ldm * element_bytes(record.type) % 16 != 0) {
    device_error(fmt::format("{} ({} fragment): ldm {} is not a multiple of 16 bytes ({} elements)", name,
                             kind_name(record.kind), record.ldm, 16 / element_bytes(record.type)),
                 site);
  }
}

// d (m x n) = a (m x k) b (k x n) + c, row-major: bf16 x bf16 products are exact in fp32, and only the
// additions, in k order from c, round: to nearest, or toward zero in the truncating mode.
void multiply_add(float* d, const float* a, const float* b, const float* c, int m, int n, int k) {
  const bool truncate = settings().mma_rounding == MmaRounding::kTruncate;
  const int previous = std::fegetround();
  if (truncate) std::fesetround(FE_TOWARDZERO);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float sum = c[i * n + j];
      for (int p = 0; p < k; ++p)
        sum += a[i * k + p] * b[p * n + j];
      d[i * n + j] = sum;
    }
  }
  if (truncate) std::fesetround(previous);
}

struct MmaRecord {
  float* d;
  const __nv_bfloat16* a;
  FragmentKind a_kind;
  const __nv_bfloat16* b;
  FragmentKind b_kind;
  const float* c;
};

void complete_mma(WarpCall& call) {
  float a[kTile][kTile], b[kTile][kTile], c[kTile][kTile];
  const auto& first = *static_cast<const MmaRecord*>(call.records[0]);
  const auto& at_a = mapping(first.a_kind);
  const auto& at_b = mapping(first.b_kind);
  const auto& at_c = mapping(FragmentKind::kAccumulator);
  for (int lane = 0; lane < kLanes; ++lane) {
    const auto& record = *static_cast<const MmaRecord*>(call.records[lane]);
    for (int i = 0; i < kElements; ++i) {
      a[at_a[lane][i].row][at_a[lane][i].col] = __bfloat162float(record.a[i]);
      b[at_b[lane][i].row][at_b[lane][i].col] = __bfloat162float(record.b[i]);
      c[at_c[lane][i].row][at_c[lane][i].col] = record.c[i];
    }
  }
  float d[kTile][kTile];
  multiply_add(&d[0][0], &a[0][0], &b[0][0], &c[0][0], kTile, kTile, kTile);
  for (int lane = 0; lane < kLanes; ++lane) {
    const auto& record = *static_cast<const MmaRecord*>(call.records[lane]);
    for (int i = 0; i < kElements; ++i)
      record.d[i] = d[at_c[lane][i].row][at_c[lane][i].col];
  }
}

float low(uint32_t pair) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(pair & 0xFFFFu)));
}
float high(uint32_t pair) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(pair >> 16)));
}

struct PtxMmaRecord {
  float* d;
  const uint32_t* a;
  const uint32_t* b;
  const float* c;
};

// mma.m16n8k16 with the PTX ISA's layouts (mma_ptx.cuh): g = lane / 4, t = lane % 4.
void complete_ptx_mma(WarpCall& call) {
  constexpr int kM = 16, kN = 8, kK = 16;
  float a[kM][kK], b[kK][kN], c[kM][kN], d[kM][kN];
  for (int lane = 0; lane < kLanes; ++lane) {
    const auto& r = *static_cast<const PtxMmaRecord*>(call.records[lane]);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i % 2) * 8, col = 2 * t + (i / 2) * 8;
      a[row][col] = low(r.a[i]);
      a[row][col + 1] = high(r.a[i]);
    }
    for (int i = 0; i < 2; ++i) {
      b[2 * t + i * 8][g] = low(r.b[i]);
      b[2 * t + i * 8 + 1][g] = high(r.b[i]);
    }
    for (int i = 0; i < 4; ++i)
      c[g + (i / 2) * 8][2 * t + i % 2] = r.c[i];
  }
  multiply_add(&d[0][0], &a[0][0], &b[0][0], &c[0][0], kM, kN, kK);
  for (int lane = 0; lane < kLanes; ++lane) {
    const auto& r = *static_cast<const PtxMmaRecord*>(call.records[lane]);
    for (int i = 0; i < 4; ++i)
      r.d[i] = d[lane / 4 + (i / 2) * 8][2 * (lane % 4) + i % 2];
  }
}

struct PtxFp8MmaRecord {
  float* d;
  const uint32_t* a;
  const uint32_t* b;
  const float* c;
  bool a_is_e5m2;
};

// Byte `index` of a register as the value of its FP8 code (cuda_fp8.h's conversion, exact in fp32).
float fp8_value(uint32_t codes, int index, bool e5m2) {
  const auto code = static_cast<__nv_fp8_storage_t>((codes >> (8 * index)) & 0xFFu);
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, e5m2 ? __NV_E5M2 : __NV_E4M3)));
}

// mma.m16n8k32 on FP8 codes with the PTX ISA's layouts (mma_ptx.cuh): g = lane / 4, t = lane % 4, byte j of
// a register is k = 4t + j (+ 16 for a[2], a[3] and b[1]). FP8 x FP8 products are exact in fp32; the sums
// round as multiply_add's.
void complete_ptx_fp8_mma(WarpCall& call) {
  constexpr int kM = 16, kN = 8, kK = 32;
  const bool a_is_e5m2 = static_cast<const PtxFp8MmaRecord*>(call.records[0])->a_is_e5m2;
  float a[kM][kK], b[kK][kN], c[kM][kN], d[kM][kN];
  for (int lane = 0; lane < kLanes; ++lane) {
    const auto& r = *static_cast<const PtxFp8MmaRecord*>(call.records[lane]);
    if (r.a_is_e5m2 != a_is_e5m2) device_error("mma.sync.m16n8k32: lanes disagree on A's type", call.site);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i % 2) * 8, col = 4 * t + (i / 2) * 16;
      for (int j = 0; j < 4; ++j)
        a[row][col + j] = fp8_value(r.a[i], j, a_is_e5m2);
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 4; ++j)
        b[4 * t + i * 16 + j][g] = fp8_value(r.b[i], j, false);
    }
    for (int i = 0; i < 4; ++i)
      c[g + (i / 2) * 8][2 * t + i % 2] = r.c[i];
  }
  multiply_add(&d[0][0], &a[0][0], &b[0][0], &c[0][0], kM, kN, kK);
  for (int lane = 0; lane < kLanes; ++lane) {
    const auto& r = *static_cast<const PtxFp8MmaRecord*>(call.records[lane]);
    for (int i = 0; i < 4; ++i)
      r.d[i] = d[lane / 4 + (i / 2) * 8][2 * (lane % 4) + i % 2];
  }
}

struct LdmatrixRecord {
  uint32_t* r;
  const void* row;
};

// Element `column` (0..7, 2 bytes each) of the row that lane `lane` names.
uint16_t ldmatrix_element(const WarpCall& call, int lane, int column) {
  const auto* row =
      static_cast<const unsigned char*>(static_cast<const LdmatrixRecord*>(call.records[lane])->row);
  uint16_t element;
  std::memcpy(&element, row + 2 * column, sizeof(element));
  return element;
}

// ldmatrix x4: lanes 8i .. 8i+7 name rows 0..7 of matrix i (16-byte aligned shared memory). Lane l gets, in
// register i, elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i, low half first; with
// .trans, elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4): those of the transposed matrix.
void complete_ldmatrix(WarpCall& call, bool transpose) {
  for (int lane = 0; lane < kLanes; ++lane) {
    const auto* row = static_cast<const LdmatrixRecord*>(call.records[lane])->row;
    if (reinterpret_cast<uintptr_t>(row) % 16 != 0) {
      device_error(fmt::format("{}: lane {} passes row address {}, which is not 16-byte aligned", call.name,
                               lane, row),
                   call.site);
    }
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    auto* r = static_cast<LdmatrixRecord*>(call.records[lane])->r;
    const int g = lane / 4, t = lane % 4;
    for (int matrix = 0; matrix < 4; ++matrix) {
      const int first_row = matrix * 8;
      const uint16_t low = transpose ? ldmatrix_element(call, first_row + 2 * t, g)
                                     : ldmatrix_element(call, first_row + g, 2 * t);
      const uint16_t high = transpose ? ldmatrix_element(call, first_row + 2 * t + 1, g)
                                      : ldmatrix_element(call, first_row + g, 2 * t + 1);
      r[matrix] = uint32_t{low} | uint32_t{high} << 16;
    }
  }
}

void complete_ldmatrix_plain(WarpCall& call) {
  complete_ldmatrix(call, false);
}

void complete_ldmatrix_trans(WarpCall& call) {
  complete_ldmatrix(call, true);
}

}  // namespace

void ptx_mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                      std::source_location site) {
  WarpCall call{.name = "mma.sync.m16n8k16", .mask = kFullWarp, .site = site, .complete = &complete_ptx_mma};
  PtxMmaRecord record{d, a, b, c};
  warp_call(call, &record);
}

void ptx_mma_m16n8k32_fp8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                          bool a_is_e5m2, std::source_location site) {
  const DeviceProfile& profile = device_profile();
  if (profile.major * 10 + profile.minor < 89) {
    device_error(fmt::format("mma.sync.m16n8k32 on FP8 needs compute capability 8.9 or newer; this GPU is {}",
                             profile.architecture),
                 site);
  }
  WarpCall call{
      .name = "mma.sync.m16n8k32.fp8", .mask = kFullWarp, .site = site, .complete = &complete_ptx_fp8_mma};
  PtxFp8MmaRecord record{d, a, b, c, a_is_e5m2};
  warp_call(call, &record);
}

void ptx_ldmatrix_x4(uint32_t (&r)[4], const void* row, std::source_location site) {
  WarpCall call{.name = "ldmatrix.x4", .mask = kFullWarp, .site = site, .complete = &complete_ldmatrix_plain};
  LdmatrixRecord record{r, row};
  warp_call(call, &record);
}

void ptx_ldmatrix_x4_trans(uint32_t (&r)[4], const void* row, std::source_location site) {
  WarpCall call{
      .name = "ldmatrix.x4.trans", .mask = kFullWarp, .site = site, .complete = &complete_ldmatrix_trans};
  LdmatrixRecord record{r, row};
  warp_call(call, &record);
}

void fragment_load(FragmentKind kind, ElementType type, void* elements, const void* pointer, unsigned ldm,
                   bool column_major, std::source_location site) {
  MemoryRecord record{kind, type, elements, pointer, ldm, column_major};
  check_lane_arguments(record, "wmma::load_matrix_sync", site);
  const auto& at = mapping(kind)[lane_id()];
  const size_t bytes = element_bytes(type);
  for (int i = 0; i < kElements; ++i) {
    std::memcpy(static_cast<unsigned char*>(elements) + i * bytes,
                static_cast<const unsigned char*>(pointer) + offset_of(record, at[i]) * bytes, bytes);
  }
  WarpCall call{
      .name = "wmma::load_matrix_sync", .mask = kFullWarp, .site = site, .complete = &complete_memory_call};
  warp_call(call, &record);
}

void fragment_store(const float* elements, float* pointer, unsigned ldm, bool column_major,
                    std::source_location site) {
  MemoryRecord record{FragmentKind::kAccumulator,
                      ElementType::kF32,
                      const_cast<float*>(elements),
                      pointer,
                      ldm,
                      column_major};
  check_lane_arguments(record, "wmma::store_matrix_sync", site);
  WarpCall call{
      .name = "wmma::store_matrix_sync", .mask = kFullWarp, .site = site, .complete = &complete_memory_call};
  warp_call(call, &record);
  const auto& at = mapping(FragmentKind::kAccumulator)[lane_id()];
  for (int i = 0; i < kElements; ++i)
    pointer[offset_of(record, at[i])] = elements[i];
}

void fragment_mma(float* d, const __nv_bfloat16* a, FragmentKind a_kind, const __nv_bfloat16* b,
                  FragmentKind b_kind, const float* c, std::source_location site) {
  WarpCall call{.name = "wmma::mma_sync", .mask = kFullWarp, .site = site, .complete = &complete_mma};
  MmaRecord record{d, a, a_kind, b, b_kind, c};
  warp_call(call, &record);
}

}  // namespace nanoforge::emulator
