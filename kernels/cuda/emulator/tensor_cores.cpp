// wmma fragment operations on the emulator (tensor_cores.h): each is one warp call whose last lane moves the
// whole 16x16 tile through the launch's random element-to-lane mapping. mma_sync multiplies bf16 values
// exactly in fp32 and adds in k order, rounding each addition to nearest or, in the truncating mode, toward
// zero (this file is compiled with -frounding-math so that the rounding mode is honoured).
#include "kernels/cuda/emulator/tensor_cores.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cfenv>
#include <cstring>
#include <numeric>
#include <random>

#include "kernels/cuda/emulator/emulator.h"
#include "kernels/cuda/emulator/execution.h"

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
      device_error(
          fmt::format("{} ({} fragment): lane 0 passes pointer {} and ldm {}, lane {} passes {} and "
                      "{}; every lane must pass the same arguments",
                      call.name, kind_name(first.kind), first.pointer, first.ldm, lane, other.pointer,
                      other.ldm),
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
  // bf16 x bf16 products are exact in fp32; only the additions round.
  const bool truncate = settings().mma_rounding == MmaRounding::kTruncate;
  const int previous = std::fegetround();
  if (truncate) std::fesetround(FE_TOWARDZERO);
  float d[kTile][kTile];
  for (int m = 0; m < kTile; ++m) {
    for (int n = 0; n < kTile; ++n) {
      float sum = c[m][n];
      for (int k = 0; k < kTile; ++k)
        sum += a[m][k] * b[k][n];
      d[m][n] = sum;
    }
  }
  if (truncate) std::fesetround(previous);
  for (int lane = 0; lane < kLanes; ++lane) {
    const auto& record = *static_cast<const MmaRecord*>(call.records[lane]);
    for (int i = 0; i < kElements; ++i)
      record.d[i] = d[at_c[lane][i].row][at_c[lane][i].col];
  }
}

}  // namespace

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
