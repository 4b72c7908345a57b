// The emulated NCCL reduces as NCCL does (emulator/nccl_ring_reduce.h), not as an exact sum: at 3 and 4
// ranks the ring order (chunk c's sum starts at rank c + 1), the rounding to bf16 at every hop and ncclAvg as
// a pre-multiplied sum each give other bits than "add in rank order in fp32, round once, divide". Expected
// values are worked out by hand below, independently of the emulator's code.
#include <cuda_bf16.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "emulator/nccl_ring_reduce.h"

namespace nanoforge::emulator {
namespace {

std::vector<unsigned char> bf16_bytes(const std::vector<float>& values) {
  std::vector<unsigned char> bytes(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const __nv_bfloat16 v = __float2bfloat16_rn(values[i]);
    std::memcpy(&bytes[i * 2], &v, 2);
  }
  return bytes;
}

float bf16_at(const std::vector<unsigned char>& bytes, size_t i) {
  __nv_bfloat16 v;
  std::memcpy(&v, &bytes[i * 2], 2);
  return __bfloat162float(v);
}

TEST(NcclNumerics, Bf16RingRoundingMatchesReference) {
  // Three ranks hold 1, 2^-8, 2^-8 in every element; 3 elements, one per ring chunk.
  const float tiny = 1.0f / 256;
  const std::vector<std::vector<unsigned char>> inputs = {
      bf16_bytes({1, 1, 1}), bf16_bytes({tiny, tiny, tiny}), bf16_bytes({tiny, tiny, tiny})};
  const unsigned char* pointers[3] = {inputs[0].data(), inputs[1].data(), inputs[2].data()};
  std::vector<unsigned char> result(6);
  ring_reduce(pointers, 3, 0, 3, 3, ncclBfloat16, ncclSum, result.data());
  // Chunk 0 starts at rank 1: 2^-8 + 2^-8 = 2^-7, + 1 = 1 + 2^-7 (exact in bf16).
  EXPECT_EQ(bf16_at(result, 0), 1.0f + 1.0f / 128);
  // Chunk 1 starts at rank 2: 2^-8 + 1 rounds to 1 (a tie, to even), + 2^-8 rounds to 1 again.
  EXPECT_EQ(bf16_at(result, 1), 1.0f);
  // Chunk 2 starts at rank 0: 1 + 2^-8 -> 1, + 2^-8 -> 1.
  EXPECT_EQ(bf16_at(result, 2), 1.0f);
  // The exact sum rounded once would be 1 + 2^-7 everywhere: the ring's rounding is what NCCL gives.
}

TEST(NcclNumerics, AverageIsAPremultipliedSumAtThreeAndFourRanks) {
  // Every rank holds the same values, so the ring order does not matter here, only how the average is made.
  const std::vector<float> values = {1.0f, 0.1f, 0.7f, 3.3f, 1e-3f, 5.0f, 0.3f, 123.456f, 7.77f, 0.9f};
  for (const int ranks : {3, 4}) {
    SCOPED_TRACE(ranks);
    std::vector<const unsigned char*> pointers(static_cast<size_t>(ranks),
                                               reinterpret_cast<const unsigned char*>(values.data()));
    std::vector<float> result(values.size());
    ring_reduce(pointers.data(), ranks, 0, values.size(), values.size(), ncclFloat32, ncclAvg,
                reinterpret_cast<unsigned char*>(result.data()));
    const float scale = 1.0f / static_cast<float>(ranks);
    int differs_from_divide = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      float premultiplied = 0, sum = 0;
      for (int r = 0; r < ranks; ++r) {
        premultiplied += values[i] * scale;  // fp32 at each step
        sum += values[i];
      }
      EXPECT_EQ(result[i], premultiplied) << values[i];
      differs_from_divide += result[i] != sum / static_cast<float>(ranks) ? 1 : 0;
    }
    // Else this test could not tell NCCL's average from the sum divided once.
    if (ranks == 3) {
      EXPECT_GT(differs_from_divide, 0);
    }
  }
}

TEST(NcclNumerics, ReduceScatterChunkStartsAtTheNextRank) {
  // Four ranks, one element per output chunk: rank d's output starts at rank d + 1 and ends at rank d.
  const float big = 16777216.0f;  // 2^24: adding 1 to it is lost in fp32, adding 2 is not
  const std::vector<std::vector<float>> inputs = {
      {big, 1, 1, 1}, {1, big, 1, 1}, {1, 1, big, 1}, {1, 1, 1, big}};
  const unsigned char* pointers[4];
  for (int r = 0; r < 4; ++r)
    pointers[r] = reinterpret_cast<const unsigned char*>(inputs[static_cast<size_t>(r)].data());
  for (int d = 0; d < 4; ++d) {
    float out = 0;
    ring_reduce(pointers, 4, static_cast<size_t>(d), 1, 4, ncclFloat32, ncclSum,
                reinterpret_cast<unsigned char*>(&out));
    // Ranks d+1, d+2, d+3 add their 1s first (3), then rank d adds 2^24: exact, 2^24 + 3 -> 2^24 + 4 (even).
    EXPECT_EQ(out, big + 4.0f) << d;
  }
}

}  // namespace
}  // namespace nanoforge::emulator
