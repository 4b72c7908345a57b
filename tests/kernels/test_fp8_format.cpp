// kernels/fp8_format.h against PyTorch's float8 dtypes (tests/kernels/golden/fp8_table.txt, written by
// tools/dev/make_fp8_table.py): all 256 codes of e4m3 and e5m2, nanochat's clamp-then-cast quantisation of
// the ties, their neighbours, overflow, NaN, infinities and subnormals, and fp8.py's float64 tensorwise
// scale. Every comparison is bitwise: these are the exact numerics the FP8 parity rests on.
#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/fp8_format.h"
#include "tests/test_paths.h"

namespace {

using nanoforge::fp8::Format;

struct TableRow {
  std::uint32_t a;
  std::uint32_t b;
};

// The rows of one kind ("decode", "encode", "scale") of one format ("e4m3", "e5m2").
std::vector<TableRow> table_rows(const std::string& format, const std::string& kind) {
  std::ifstream in(nanoforge::test::source_path("tests/kernels/golden/fp8_table.txt"));
  EXPECT_TRUE(in) << "tests/kernels/golden/fp8_table.txt is missing";
  std::vector<TableRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string row_format, row_kind;
    TableRow row{};
    if (!(fields >> row_format >> row_kind >> std::hex >> row.a >> row.b)) continue;  // the comment line
    if (row_format == format && row_kind == kind) rows.push_back(row);
  }
  return rows;
}

class Fp8Format : public ::testing::TestWithParam<Format> {
 protected:
  std::string name() const { return std::string(nanoforge::fp8::traits(GetParam()).name); }
};

TEST_P(Fp8Format, EveryCodeDecodesToTorchsValue) {
  const std::vector<TableRow> rows = table_rows(name(), "decode");
  ASSERT_EQ(rows.size(), 256u);
  for (const TableRow& row : rows) {
    const float value = nanoforge::fp8::decode(static_cast<std::uint8_t>(row.a), GetParam());
    const float expected = std::bit_cast<float>(row.b);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(value)) << name() << " code " << row.a;
    } else {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(value), row.b) << name() << " code " << row.a;
    }
  }
}

TEST_P(Fp8Format, EncodingMatchesTorchOnTiesOverflowAndSpecials) {
  const std::vector<TableRow> rows = table_rows(name(), "encode");
  ASSERT_GT(rows.size(), 1000u);
  int nan_inputs = 0;
  for (const TableRow& row : rows) {
    const float input = std::bit_cast<float>(row.a);
    const std::uint8_t code = nanoforge::fp8::encode(input, GetParam());
    if (std::isnan(input)) {
      // PyTorch's NaN code carries no meaning in its sign; both formats must still give a NaN.
      ++nan_inputs;
      EXPECT_TRUE(std::isnan(nanoforge::fp8::decode(code, GetParam())));
      continue;
    }
    EXPECT_EQ(code, row.b) << name() << " input " << input << " (bits " << std::hex << row.a << ")";
  }
  EXPECT_EQ(nan_inputs, 2);
}

TEST_P(Fp8Format, EveryFiniteCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    const float value = nanoforge::fp8::decode(static_cast<std::uint8_t>(code), GetParam());
    if (!std::isfinite(value)) continue;
    if (value == 0.0f) {
      EXPECT_EQ(nanoforge::fp8::encode(value, GetParam()), code);  // +0 and -0 keep their sign
      continue;
    }
    EXPECT_EQ(nanoforge::fp8::encode(value, GetParam()), code) << name() << " value " << value;
  }
}

TEST_P(Fp8Format, InfinityAndOverflowSaturateToTheLargestFiniteValue) {
  const float max_finite = nanoforge::fp8::traits(GetParam()).max_finite;
  for (const float x : {max_finite * 1.5f, 1e30f, INFINITY}) {
    EXPECT_EQ(nanoforge::fp8::decode(nanoforge::fp8::encode(x, GetParam()), GetParam()), max_finite) << x;
    EXPECT_EQ(nanoforge::fp8::decode(nanoforge::fp8::encode(-x, GetParam()), GetParam()), -max_finite) << x;
  }
}

TEST_P(Fp8Format, ScaleIsFp8MaxOverAmaxInFloat64) {
  const std::vector<TableRow> rows = table_rows(name(), "scale");
  ASSERT_GT(rows.size(), 100u);
  bool saw_zero = false;
  for (const TableRow& row : rows) {
    const float amax = std::bit_cast<float>(row.a);
    saw_zero = saw_zero || amax == 0.0f;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(nanoforge::fp8::tensorwise_scale(amax, GetParam())), row.b)
        << name() << " amax " << amax;
  }
  EXPECT_TRUE(saw_zero);  // amax = 0: the 1e-12 floor gives a finite scale, not a division by zero
  EXPECT_TRUE(std::isfinite(nanoforge::fp8::tensorwise_scale(0.0f, GetParam())));
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Format, ::testing::Values(Format::kE4m3, Format::kE5m2),
                         [](const auto& info) {
                           return std::string(nanoforge::fp8::traits(info.param).name);
                         });

}  // namespace
