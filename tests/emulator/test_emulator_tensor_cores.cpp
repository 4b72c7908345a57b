// The emulator's wmma: each launch holds the 256 elements of an accumulator fragment in a new random
// arrangement over the 32 lanes (8 each, every element once), mma_sync multiplies bf16 tiles exactly and adds
// in fp32, rounding each addition to nearest or, in the truncating mode, toward zero, and loads from a
// pointer that is not 32-byte aligned stop the program.
#include <gtest/gtest.h>

#include <bit>
#include <cfenv>
#include <cmath>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "tests/emulator/emulator_test_kernels.h"
#include "tests/emulator/emulator_test_support.h"

namespace nanoforge::emulator_test {
namespace {

constexpr int kTile = 16;

std::vector<std::pair<int, int>> positions() {
  DeviceArray<int> rows(256), cols(256);
  fragment_positions(rows.get(), cols.get());
  const std::vector<int> r = rows.download(), c = cols.download();
  std::vector<std::pair<int, int>> at(256);
  for (size_t i = 0; i < at.size(); ++i)
    at[i] = {r[i], c[i]};
  return at;
}

TEST(EmulatorTensorCores, EachLaunchArrangesTheFragmentElementsAnew) {
  ScopedSettings s;
  s->schedule_mode =
      emulator::ScheduleMode::kFixed;  // one run per launch: the arrangement is the result here
  const std::vector<std::pair<int, int>> first = positions(), second = positions();
  for (const auto* launch : {&first, &second}) {
    const std::set<std::pair<int, int>> distinct(launch->begin(), launch->end());
    EXPECT_EQ(distinct.size(), 256u) << "every element of the 16x16 tile is held by exactly one lane";
    for (const auto& [row, col] : *launch) {
      EXPECT_TRUE(row >= 0 && row < kTile && col >= 0 && col < kTile);
    }
  }
  EXPECT_NE(first, second) << "two launches held the elements in the same lanes";
}

uint16_t bf16_bits(float value) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(value) >> 16);  // values below are exact in bf16
}

struct Tiles {
  std::vector<float> a, b, c;  // a row-major, b column-major (b[n * 16 + k] = B[k][n]), c row-major
};

Tiles random_tiles() {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-64, 64);
  Tiles t{std::vector<float>(256), std::vector<float>(256), std::vector<float>(256)};
  for (int i = 0; i < 256; ++i) {
    t.a[i] = static_cast<float>(small(rng)) / 8.0f;   // exact in bf16
    t.b[i] = static_cast<float>(small(rng)) / 16.0f;  // exact in bf16
    t.c[i] = std::ldexp(static_cast<float>(small(rng)) + 0.3f, -3);
  }
  return t;
}

// D = A B + C in fp32, adding the products to C in k order with the current rounding mode.
std::vector<float> reference(const Tiles& t) {
  std::vector<float> d(256);
  for (int m = 0; m < kTile; ++m) {
    for (int n = 0; n < kTile; ++n) {
      volatile float sum = t.c[m * kTile + n];
      for (int k = 0; k < kTile; ++k)
        sum = sum + t.a[m * kTile + k] * t.b[n * kTile + k];
      d[m * kTile + n] = sum;
    }
  }
  return d;
}

std::vector<float> emulated_mma(const Tiles& t) {
  std::vector<uint16_t> a(256), b(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = bf16_bits(t.a[i]);
    b[i] = bf16_bits(t.b[i]);
  }
  DeviceArray<uint16_t> a_device(256), b_device(256);
  DeviceArray<float> c_device(256), d_device(256);
  a_device.upload(a);
  b_device.upload(b);
  c_device.upload(t.c);
  tile_mma(d_device.get(), a_device.get(), b_device.get(), c_device.get());
  return d_device.download();
}

// The inline-PTX path: ldmatrix and mma.sync m16n8k16 with the PTX ISA's layouts give A B + C, with the same
// rounding of each addition (the first 8 columns of the wmma test's tiles).
TEST(EmulatorTensorCores, PtxMmaAndLdmatrixFollowThePtxLayouts) {
  ScopedSettings s;
  const Tiles tiles = random_tiles();
  Tiles narrow =
      tiles;  // B and C keep their first 8 columns: B col-major (n * 16 + k), C row-major (m * 8 + n)
  narrow.b.resize(128);
  narrow.c.resize(128);
  for (int m = 0; m < kTile; ++m) {
    for (int n = 0; n < 8; ++n)
      narrow.c[m * 8 + n] = tiles.c[m * kTile + n];
  }
  std::vector<uint16_t> a(256), b(128);
  for (int i = 0; i < 256; ++i)
    a[i] = bf16_bits(tiles.a[i]);
  for (int i = 0; i < 128; ++i)
    b[i] = bf16_bits(narrow.b[i]);
  DeviceArray<uint16_t> a_device(256), b_device(128);
  DeviceArray<float> c_device(128), d_device(128);
  a_device.upload(a);
  b_device.upload(b);
  c_device.upload(narrow.c);
  for (const auto rounding : {emulator::MmaRounding::kNearest, emulator::MmaRounding::kTruncate}) {
    s->mma_rounding = rounding;
    ptx_tile_mma(d_device.get(), a_device.get(), b_device.get(), c_device.get());
    const std::vector<float> got = d_device.download();
    if (rounding == emulator::MmaRounding::kTruncate) std::fesetround(FE_TOWARDZERO);
    const std::vector<float> expected = reference(tiles);
    std::fesetround(FE_TONEAREST);
    for (int m = 0; m < kTile; ++m) {
      for (int n = 0; n < 8; ++n)
        EXPECT_EQ(got[m * 8 + n], expected[m * kTile + n]) << "D(" << m << ", " << n << ")";
    }
  }
}

// ldmatrix x4 gives lane l = 4g + t elements (g, 2t) and (g, 2t + 1) of each 8x8 matrix, low half first;
// .trans gives (2t, g) and (2t + 1, g). The tile holds its own index in each element's bits.
TEST(EmulatorTensorCores, LdmatrixAndItsTransposeFollowThePtxLayouts) {
  ScopedSettings s;
  s->schedule_mode = emulator::ScheduleMode::kCompare;
  std::vector<uint16_t> tile(256);
  for (int i = 0; i < 256; ++i)
    tile[static_cast<size_t>(i)] = static_cast<uint16_t>(i);
  DeviceArray<uint16_t> tile_device(256);
  DeviceArray<uint32_t> registers(128);
  tile_device.upload(tile);
  for (const bool transpose : {false, true}) {
    ldmatrix_registers(registers.get(), tile_device.get(), transpose);
    const std::vector<uint32_t> got = registers.download();
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      for (int i = 0; i < 4; ++i) {
        const int row0 = (i % 2) * 8, col0 = (i / 2) * 8;
        const auto at = [&](int row, int col) {
          return static_cast<uint32_t>((row0 + row) * 16 + col0 + col);
        };
        const uint32_t low = transpose ? at(2 * t, g) : at(g, 2 * t);
        const uint32_t high = transpose ? at(2 * t + 1, g) : at(g, 2 * t + 1);
        EXPECT_EQ(got[static_cast<size_t>(lane * 4 + i)], low | high << 16)
            << (transpose ? "ldmatrix.trans" : "ldmatrix") << " lane " << lane << " register " << i;
      }
    }
  }
}

TEST(EmulatorTensorCores, MmaRoundsEachAdditionToNearestOrTowardZero) {
  ScopedSettings s;
  const Tiles tiles = random_tiles();
  s->mma_rounding = emulator::MmaRounding::kNearest;
  const std::vector<float> nearest = emulated_mma(tiles);
  EXPECT_EQ(nearest, reference(tiles));
  s->mma_rounding = emulator::MmaRounding::kTruncate;
  const std::vector<float> truncated = emulated_mma(tiles);
  std::fesetround(FE_TOWARDZERO);
  const std::vector<float> expected_truncated = reference(tiles);
  std::fesetround(FE_TONEAREST);
  EXPECT_EQ(truncated, expected_truncated);
  EXPECT_NE(truncated, nearest) << "no addition of these tiles rounded differently";
}

// Each schedule of the compare mode runs with another arrangement, so a kernel whose result depends on it is
// caught like a race.
TEST(EmulatorTensorCoresDeathTest, AKernelThatDependsOnTheArrangementIsCaught) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        emulator::settings().schedule_mode = emulator::ScheduleMode::kCompare;
        positions();
      },
      "kernel fragment_positions_kernel .* gives different bits");
}

TEST(EmulatorTensorCoresDeathTest, AFragmentLoadFromAMisalignedPointerStopsTheProgram) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        DeviceArray<float> tile(512);
        misaligned_fragment_load(tile.get(), 16);
        cudaDeviceSynchronize();
      },
      "wmma::load_matrix_sync \\(accumulator fragment\\): pointer .* is not 256-bit \\(32-byte\\) aligned");
}

}  // namespace
}  // namespace nanoforge::emulator_test
