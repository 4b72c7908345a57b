// Ring reductions with NCCL's rounding (nccl_ring_reduce.h). Values are widened to double to be combined and
// rounded back to the data type after every step, so that a bf16 sum loses what NCCL's bf16 adds lose.
#include "emulator/nccl_ring_reduce.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace nanoforge::emulator {
namespace {

// The value of type T at p (possibly unaligned).
template <class T>
T read(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Stores `v` at p (possibly unaligned).
template <class T>
void write(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

double load(const unsigned char* p, ncclDataType_t type) {
  switch (type) {
    case ncclFloat32:
      return read<float>(p);
    case ncclFloat64:
      return read<double>(p);
    case ncclBfloat16:
      return __bfloat162float(read<__nv_bfloat16>(p));
    case ncclInt32:
      return read<int32_t>(p);
    case ncclUint32:
      return read<uint32_t>(p);
    case ncclInt8:
      return read<int8_t>(p);
    case ncclUint8:
      return *p;
    case ncclUint64:
      return static_cast<double>(read<uint64_t>(p));
    default:
      return static_cast<double>(read<int64_t>(p));
  }
}

// What `value` becomes when stored in `type` (round to nearest for floating types).
double round_to(double value, ncclDataType_t type) {
  switch (type) {
    case ncclFloat32:
      return static_cast<float>(value);
    case ncclBfloat16:
      return __bfloat162float(__float2bfloat16_rn(static_cast<float>(value)));
    default:
      return value;
  }
}

void store(unsigned char* p, ncclDataType_t type, double value) {
  switch (type) {
    case ncclFloat32:
      write(p, static_cast<float>(value));
      break;
    case ncclFloat64:
      write(p, value);
      break;
    case ncclBfloat16:
      write(p, __float2bfloat16_rn(static_cast<float>(value)));
      break;
    case ncclInt32:
    case ncclUint32:
      write(p, static_cast<int32_t>(static_cast<int64_t>(value)));
      break;
    case ncclInt8:
    case ncclUint8:
      *p = static_cast<unsigned char>(static_cast<int64_t>(value));
      break;
    default:
      write(p, static_cast<int64_t>(value));
      break;
  }
}

bool floating(ncclDataType_t type) {
  return type == ncclFloat32 || type == ncclFloat64 || type == ncclBfloat16;
}

double combine(double a, double b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd:
      return a * b;
    case ncclMax:
      return std::max(a, b);
    case ncclMin:
      return std::min(a, b);
    default:
      return a + b;
  }
}

}  // namespace

size_t nccl_type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

ChunkRange ring_chunk(size_t count, int ranks, int chunk) {
  const size_t per_chunk = (count + static_cast<size_t>(ranks) - 1) / static_cast<size_t>(ranks);
  const size_t begin = std::min(count, per_chunk * static_cast<size_t>(chunk));
  return {begin, std::min(count, begin + per_chunk)};
}

void ring_reduce(const unsigned char* const* contributions, int ranks, size_t offset, size_t count,
                 size_t total, ncclDataType_t type, ncclRedOp_t op, unsigned char* result) {
  const size_t bytes = nccl_type_bytes(type);
  // ncclAvg of floating types: NCCL's PreMulSum, each contribution scaled by 1/n (rounded to the type).
  const bool premultiply = op == ncclAvg && floating(type);
  const double scale = round_to(1.0 / ranks, type == ncclFloat64 ? ncclFloat64 : ncclFloat32);
  auto contribution = [&](int rank, size_t element) {
    const double value = load(contributions[rank] + element * bytes, type);
    return premultiply ? round_to(value * scale, type) : value;
  };
  for (int chunk = 0; chunk < ranks; ++chunk) {
    const ChunkRange range = ring_chunk(total, ranks, chunk);
    const size_t begin = std::max(range.begin, offset), end = std::min(range.end, offset + count);
    for (size_t element = begin; element < end; ++element) {
      // The chunk's sum starts at rank chunk + 1 and travels the ring, ending at rank `chunk`.
      const int first = (chunk + 1) % ranks;
      double total_value = contribution(first, element);
      for (int step = 1; step < ranks; ++step)
        total_value = round_to(combine(total_value, contribution((first + step) % ranks, element), op), type);
      if (op == ncclAvg && !floating(type)) total_value = std::trunc(total_value / ranks);
      store(result + (element - offset) * bytes, type, total_value);
    }
  }
}

}  // namespace nanoforge::emulator
