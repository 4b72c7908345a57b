// What the input tests share: gzip and zstd compression of test files (zlib and libzstd, the libraries the
// readers decompress with), and the parquet files that write_parquet_fixtures.py makes with pyarrow.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <string>
#include <string_view>

#include "tests/data/tokenizer/tokenizer_test_util.h"
#include "tests/program_run.h"
#include "tests/test_paths.h"

namespace nanoforge::testing {

// One gzip member holding `text`.
inline std::string gzip_bytes(std::string_view text) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);  // +16: gzip header
  std::string out(deflateBound(&stream, text.size()) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

// One zstd frame holding `text`, with a content checksum as the zstd program writes by default.
inline std::string zstd_bytes(std::string_view text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  const size_t size = ZSTD_compress2(context, out.data(), out.size(), text.data(), text.size());
  ZSTD_freeCCtx(context);
  EXPECT_FALSE(ZSTD_isError(size));
  out.resize(size);
  return out;
}

// The directory of write_parquet_fixtures.py's files (made once per test binary), or "" with `why` set
// when this build's Python cannot write parquet.
inline std::string parquet_fixtures(std::string& why) {
  static std::string reason;
  static const std::string dir = [] {
    const std::string out = fresh_temp_dir("parquet_fixtures");
    const nanoforge::test::ProgramRun run = nanoforge::test::run_command(
        std::string(nanoforge::test::python()) + " " +
        nanoforge::test::source_path("tests/data/documents/write_parquet_fixtures.py") + " " + out + " 2>&1");
    if (run.exit_code != 0) {
      reason = std::string(nanoforge::test::python()) + " cannot write the parquet test files: " + run.output;
      return std::string();
    }
    return out;
  }();
  why = reason;
  return dir;
}

}  // namespace nanoforge::testing
