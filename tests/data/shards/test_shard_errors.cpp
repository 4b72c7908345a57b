// A file that is not a sound shard gives an error that names the file and says what is wrong: missing,
// empty, truncated (HDF5's own check and the reader's size check), not a shard, wrong format version,
// attributes or tokens of the wrong type, offsets that do not add up, tokens outside the vocabulary (on open
// and lazily), documents without BOS or with one inside, sizes the file does not hold, old string
// attributes. What a sound shard holds is checked in test_shard_content_errors.cpp.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/shards/open_shard.h"
#include "data/shards/shard_hdf5.h"
#include "h5/file.h"
#include "tests/data/shards/raw_shard.h"
#include "tests/data/shards/shard_test_files.h"

namespace nanoforge {
namespace {

using testing::expect_error;
using testing::kTestBos;
using testing::RawShard;
using testing::structure_only;
using testing::TempDir;
using testing::verifying;
using testing::write_raw;

TEST(ShardErrors, RawShardHelperWritesAValidShard) {
  TempDir dir;
  auto shard = open_token_shard(write_raw(dir, "ok.h5", {}), verifying());
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->doc_count(), 2);
}

TEST(ShardErrors, MissingFile) {
  TempDir dir;
  expect_error(dir.file("absent.h5"), verifying(), absl::StatusCode::kNotFound, "no such file");
}

TEST(ShardErrors, ZeroByteFile) {
  TempDir dir;
  std::ofstream(dir.file("zero.h5")).close();
  expect_error(dir.file("zero.h5"), verifying(), absl::StatusCode::kInvalidArgument, "empty file");
}

TEST(ShardErrors, NotAShardAtAll) {
  TempDir dir;
  std::ofstream(dir.file("text.h5")) << "just some text, not HDF5";
  expect_error(dir.file("text.h5"), verifying(), absl::StatusCode::kInvalidArgument, "not a token shard");
}

TEST(ShardErrors, TruncatedFileIsRefusedByHdf5) {
  TempDir dir;
  const std::string path = write_raw(dir, "cut.h5", {});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 20);
  expect_error(path, verifying(), absl::StatusCode::kDataLoss, "truncated");
}

// A file cut inside its last dataset whose superblock was made to agree (HDF5 then opens it): the reader's
// own size check finds that the dataset's bytes run past the end of the file.
TEST(ShardErrors, DatasetExtentBeyondEndOfFile) {
  TempDir dir;
  RawShard raw;
  raw.tokens.assign(3000, 5);
  raw.tokens[0] = kTestBos;
  raw.offsets = {0, 3000};
  raw.attributes_first = true;
  const std::string path = write_raw(dir, "short.h5", raw);
  std::string last;
  int64_t last_offset = 0;
  {
    auto file = H5File::open_read(path);
    ASSERT_TRUE(file.ok());
    auto tokens = file->dataset_layout(kShardTokensDataset);
    auto offsets = file->dataset_layout(kShardOffsetsDataset);
    ASSERT_TRUE(tokens.ok() && offsets.ok());
    last = tokens->file_offset > offsets->file_offset ? kShardTokensDataset : kShardOffsetsDataset;
    last_offset = std::max(tokens->file_offset, offsets->file_offset);
  }
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path));
  ASSERT_GT(size, last_offset) << "the last dataset's data should end the file";
  const int64_t new_size = last_offset + 4;
  // The superblock (version 0) stores the end-of-file address as 8 little-endian bytes among its first 64.
  std::fstream stream(path, std::ios::in | std::ios::out | std::ios::binary);
  char head[64];
  stream.read(head, sizeof(head));
  int patched = 0;
  for (int at = 8; at + 8 <= 64; at += 8) {
    int64_t value = 0;
    std::memcpy(&value, head + at, 8);
    if (value == size) {
      std::memcpy(head + at, &new_size, 8);
      ++patched;
    }
  }
  ASSERT_EQ(patched, 1) << "could not find the end-of-file address in the superblock";
  stream.seekp(0);
  stream.write(head, sizeof(head));
  stream.close();
  std::filesystem::resize_file(path, static_cast<uintmax_t>(new_size));
  expect_error(path, verifying(), absl::StatusCode::kDataLoss, "truncated: dataset " + last);
}

TEST(ShardErrors, Hdf5FileThatIsNotAShard) {
  TempDir dir;
  RawShard raw;
  raw.write_format = false;
  expect_error(write_raw(dir, "other.h5", raw), verifying(), absl::StatusCode::kInvalidArgument,
               "not a nanoforge token shard");
  raw.write_format = true;
  raw.format = "something-else";
  expect_error(write_raw(dir, "other2.h5", raw), verifying(), absl::StatusCode::kInvalidArgument,
               "format attribute is \"something-else\"");
}

TEST(ShardErrors, NewerFormatVersion) {
  TempDir dir;
  RawShard raw;
  raw.version = 2;
  expect_error(write_raw(dir, "v2.h5", raw), verifying(), absl::StatusCode::kFailedPrecondition,
               "newer nanoforge");
}

TEST(ShardErrors, AttributeOfTheWrongType) {
  TempDir dir;
  RawShard raw;
  raw.vocab_as_string = true;
  expect_error(write_raw(dir, "typed.h5", raw), verifying(), absl::StatusCode::kInvalidArgument,
               "attribute vocab_size on / must be one integer value");
}

TEST(ShardErrors, TokensOfTheWrongType) {
  TempDir dir;
  RawShard raw;
  raw.tokens_as_int32 = true;
  expect_error(write_raw(dir, "signed.h5", raw), verifying(), absl::StatusCode::kInvalidArgument,
               "32-bit signed integers");
}

TEST(ShardErrors, OffsetsNotIncreasing) {
  TempDir dir;
  RawShard raw;
  raw.offsets = {0, 3, 3, 5};
  expect_error(write_raw(dir, "flat.h5", raw), structure_only(), absl::StatusCode::kDataLoss,
               "not increasing");
  raw.offsets = {0, 4, 2, 5};
  expect_error(write_raw(dir, "back.h5", raw), structure_only(), absl::StatusCode::kDataLoss,
               "not increasing");
}

TEST(ShardErrors, OffsetsNotEndingAtTheTokenCount) {
  TempDir dir;
  RawShard raw;
  raw.offsets = {0, 3, 4};
  expect_error(write_raw(dir, "short_offsets.h5", raw), structure_only(), absl::StatusCode::kDataLoss,
               "end at the token count 5");
  raw.offsets = {1, 3, 5};
  expect_error(write_raw(dir, "late_start.h5", raw), structure_only(), absl::StatusCode::kDataLoss,
               "first document offset is 1");
}

TEST(ShardErrors, CountAttributesDisagreeWithDatasets) {
  TempDir dir;
  RawShard raw;
  raw.token_count = 6;
  expect_error(write_raw(dir, "count.h5", raw), structure_only(), absl::StatusCode::kDataLoss,
               "/tokens holds 5 values but the attribute token_count says 6");
  raw.token_count.reset();
  raw.doc_count = 1;
  expect_error(write_raw(dir, "docs.h5", raw), structure_only(), absl::StatusCode::kDataLoss,
               "/doc_offsets holds 3 values but the attribute doc_count says 2");
}

TEST(ShardErrors, TokenOutsideTheVocabularyOnOpenAndLazily) {
  TempDir dir;
  RawShard raw;
  raw.tokens = {kTestBos, 1, 2, kTestBos, 1234};
  const std::string path = write_raw(dir, "oov.h5", raw);
  expect_error(path, verifying(), absl::StatusCode::kDataLoss,
               "token 1234 at position 4 is outside the vocabulary (vocab_size 1000)");
  // Without the full check the shard opens, and the loader's per-document copy finds it.
  auto shard = open_token_shard(path, structure_only());
  ASSERT_TRUE(shard.ok()) << shard.status();
  std::vector<int32_t> out(3);
  EXPECT_TRUE(shard->copy_document_prefix(0, 3, out.data()).ok());
  const absl::Status lazy = shard->copy_document_prefix(1, 2, out.data());
  EXPECT_EQ(lazy.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(lazy.message().find(path), std::string::npos) << lazy;
  EXPECT_NE(lazy.message().find("token 1234 at position 4 (document 1) is outside the vocabulary"),
            std::string::npos)
      << lazy;
}

TEST(ShardErrors, DocumentWithoutBos) {
  TempDir dir;
  RawShard raw;
  raw.tokens = {kTestBos, 1, 2, 9, 3};
  const std::string path = write_raw(dir, "nobos.h5", raw);
  expect_error(path, verifying(), absl::StatusCode::kDataLoss,
               "document 1 (tokens 3..5) starts with token 9, not BOS");
  auto shard = open_token_shard(path, structure_only());
  ASSERT_TRUE(shard.ok());
  std::vector<int32_t> out(2);
  const absl::Status lazy = shard->copy_document_prefix(1, 2, out.data());
  EXPECT_NE(lazy.message().find("starts with token 9, not BOS"), std::string::npos) << lazy;
}

// The shard format promises BOS starts every document and appears nowhere else; the probe's shard with a BOS
// inside a document was accepted. Refused on open and, without the full check, when a batch copies it.
TEST(ShardErrors, BosInsideADocument) {
  TempDir dir;
  RawShard raw;
  raw.tokens = {kTestBos, 1, kTestBos, kTestBos, 3};
  const std::string path = write_raw(dir, "inner_bos.h5", raw);
  expect_error(path, verifying(), absl::StatusCode::kDataLoss,
               "document 0 holds BOS 7 inside it, at position 2");
  auto shard = open_token_shard(path, structure_only());
  ASSERT_TRUE(shard.ok()) << shard.status();
  std::vector<int32_t> out(3);
  const absl::Status status = shard->copy_document_prefix(0, 3, out.data());
  EXPECT_NE(status.message().find("document 0 holds BOS 7 inside it, at position 2"), std::string::npos)
      << status;
}

// The probe's shard whose dataset claims 2^40 tokens it never wrote ended in bad_alloc in bench, eval and
// train: now a clean error from the dataset's size against the file's, before anything is allocated.
TEST(ShardErrors, DatasetClaimingMoreTokensThanTheFileHolds) {
  TempDir dir;
  const std::string path = write_raw(dir, "claims.h5", RawShard{});
  {
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(H5Ldelete(file, kShardTokensDataset, H5P_DEFAULT), 0);
    const hsize_t dims[1] = {hsize_t{1} << 40}, chunk[1] = {4096};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t properties = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(properties, 1, chunk);
    hid_t dataset =
        H5Dcreate2(file, kShardTokensDataset, H5T_STD_U16LE, space, H5P_DEFAULT, properties, H5P_DEFAULT);
    ASSERT_GE(dataset, 0);
    H5Dclose(dataset);
    H5Pclose(properties);
    H5Sclose(space);
    H5Adelete(file, "token_count");
    hid_t scalar = H5Screate(H5S_SCALAR);
    const int64_t claimed = int64_t{1} << 40;
    hid_t attribute = H5Acreate2(file, "token_count", H5T_STD_I64LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, H5T_NATIVE_INT64, &claimed);
    H5Aclose(attribute);
    H5Sclose(scalar);
    H5Fclose(file);
  }
  for (const ShardOpenOptions& options : {verifying(), structure_only()})
    expect_error(path, options, absl::StatusCode::kDataLoss, "claims 1099511627776 elements");
}

// Shards written by an earlier prep (or h5py's default str) keep their strings in libhdf5's global heap,
// which nanoforge no longer reads; the error says how to rewrite them.
TEST(ShardErrors, VariableLengthStringAttributesAreRefusedWithTheFix) {
  TempDir dir;
  const std::string path = write_raw(dir, "vlen.h5", RawShard{});
  {
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Adelete(file, "format");
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    const char* text = kShardFormatName;
    hid_t attribute = H5Acreate2(file, "format", type, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, type, &text);
    H5Aclose(attribute);
    H5Tclose(type);
    H5Sclose(scalar);
    H5Fclose(file);
  }
  expect_error(path, verifying(), absl::StatusCode::kInvalidArgument, "python3 tools/upgrade_h5.py strings");
}

}  // namespace
}  // namespace nanoforge
