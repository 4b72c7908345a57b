// nanoforge HDF5 token shards: write/read round trips (uint16 and uint32 tokens), the reader maps the tokens
// in place, the file's layout as another HDF5 reader (h5py) sees it, the writer's atomic finish and its
// input checks, the checksum formula, and finding a split's files.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>

#include "data/shards/open_shard.h"
#include "data/shards/shard_hdf5.h"
#include "data/shards/shard_set.h"
#include "data/shards/shard_token_scan.h"
#include "data/shards/shard_writer.h"
#include "h5/file.h"
#include "support/mapped_file.h"
#include "tests/data/shards/shard_test_files.h"

namespace nanoforge {
namespace {

using testing::kTestBos;
using testing::kTestTokenizerHash;
using testing::kTestVocab;
using testing::TempDir;

// Writes documents (given without BOS) and returns the path.
std::string write_shard(const TempDir& dir, const std::string& name,
                        const std::vector<std::vector<int32_t>>& texts, int64_t vocab, int32_t bos) {
  const std::string path = dir.file(name);
  auto writer = ShardWriter::create(path, {vocab, bos, kTestTokenizerHash});
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (const auto& text : texts)
    EXPECT_TRUE(writer->append_document(text).ok());
  const absl::Status finished = writer->finish();
  EXPECT_TRUE(finished.ok()) << finished;
  return path;
}

std::vector<int32_t> all_tokens(const TokenShard& shard) {
  std::vector<int32_t> tokens;
  for (int64_t d = 0; d < shard.doc_count(); ++d) {
    std::vector<int32_t> doc(static_cast<size_t>(shard.doc_length(d)));
    EXPECT_TRUE(shard.copy_document_prefix(d, shard.doc_length(d), doc.data()).ok());
    tokens.insert(tokens.end(), doc.begin(), doc.end());
  }
  return tokens;
}

TEST(ShardFormat, RoundTripUint16TokensAreMappedInPlace) {
  TempDir dir;
  const std::vector<std::vector<int32_t>> texts = {{10, 11, 12}, {}, {999, 0, 1, 2, 3}, {500}};
  const std::string path = write_shard(dir, "train_00000.h5", texts, kTestVocab, kTestBos);
  ASSERT_TRUE(std::filesystem::exists(path));

  ShardOpenOptions options;
  options.expect = {kTestVocab, kTestBos, std::string(kTestTokenizerHash)};
  auto shard = open_token_shard(path, options);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->format(), ShardFormat::kNanoforgeHdf5);
  EXPECT_EQ(shard->bytes_per_token(), 2);
  EXPECT_EQ(shard->vocab_size(), kTestVocab);
  EXPECT_EQ(shard->bos_id(), kTestBos);
  EXPECT_EQ(shard->tokenizer_hash(), kTestTokenizerHash);
  EXPECT_EQ(shard->doc_count(), 4);
  EXPECT_EQ(shard->token_count(), 4 + 3 + 0 + 5 + 1);
  EXPECT_TRUE(shard->tokens_memory_mapped());
  EXPECT_EQ(std::vector<int64_t>(shard->doc_offsets().begin(), shard->doc_offsets().end()),
            (std::vector<int64_t>{0, 4, 5, 11, 13}));
  EXPECT_EQ(all_tokens(*shard),
            (std::vector<int32_t>{kTestBos, 10, 11, 12, kTestBos, kTestBos, 999, 0, 1, 2, 3, kTestBos, 500}));

  // The token span points into a mapping of the file itself: at the dataset's offset, page-aligned.
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  auto layout = file->dataset_layout(kShardTokensDataset);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->file_offset % kShardAlignmentBytes, 0);
  std::ifstream raw(path, std::ios::binary);
  raw.seekg(layout->file_offset);
  std::vector<uint16_t> on_disk(static_cast<size_t>(shard->token_count()));
  raw.read(reinterpret_cast<char*>(on_disk.data()), static_cast<std::streamsize>(on_disk.size() * 2));
  const std::span<const uint16_t> mapped = shard->tokens<uint16_t>();
  EXPECT_EQ(std::vector<uint16_t>(mapped.begin(), mapped.end()), on_disk);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mapped.data()) % 4096, 0u) << "tokens should start on a mapped page";
}

TEST(ShardFormat, RoundTripUint32TokensForLargeVocabularies) {
  TempDir dir;
  const int64_t vocab = 100000;
  const int32_t bos = 99999;
  const std::vector<std::vector<int32_t>> texts = {{65535, 65536, 70000}, {0, 99998}};
  const std::string path = write_shard(dir, "big.h5", texts, vocab, bos);
  auto shard = open_token_shard(path, {});
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->bytes_per_token(), 4);
  EXPECT_TRUE(shard->tokens_memory_mapped());
  EXPECT_EQ(all_tokens(*shard), (std::vector<int32_t>{bos, 65535, 65536, 70000, bos, 0, 99998}));
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  auto layout = file->dataset_layout(kShardTokensDataset);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->element_bytes, 4);
  EXPECT_FALSE(layout->is_signed);
}

TEST(ShardFormat, VocabularyOf65536StillFitsUint16) {
  TempDir dir;
  const std::string path = write_shard(dir, "edge.h5", {{65535}}, 65536, 0);
  auto shard = open_token_shard(path, {});
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->bytes_per_token(), 2);
  EXPECT_EQ(all_tokens(*shard), (std::vector<int32_t>{0, 65535}));
}

// The layout h5py and any HDF5 reader see, read back with the HDF5 C API directly.
TEST(ShardFormat, LayoutIsPlainHdf5ThatH5pyReadsAsIs) {
  TempDir dir;
  const std::string path = write_shard(dir, "layout.h5", {{1, 2, 3}, {4}}, kTestVocab, kTestBos);
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);

  hid_t tokens = H5Dopen2(file, "/tokens", H5P_DEFAULT);
  ASSERT_GE(tokens, 0);
  hid_t token_type = H5Dget_type(tokens);
  EXPECT_GT(H5Tequal(token_type, H5T_STD_U16LE), 0) << "tokens must be little-endian uint16";
  hid_t token_plist = H5Dget_create_plist(tokens);
  EXPECT_EQ(H5Pget_layout(token_plist), H5D_CONTIGUOUS);
  EXPECT_EQ(H5Pget_nfilters(token_plist), 0);
  hid_t token_space = H5Dget_space(tokens);
  ASSERT_EQ(H5Sget_simple_extent_ndims(token_space), 1);
  hsize_t token_count = 0;
  H5Sget_simple_extent_dims(token_space, &token_count, nullptr);
  EXPECT_EQ(token_count, 6u);
  EXPECT_EQ(H5Dget_offset(tokens) % 4096, 0u);
  std::vector<uint16_t> values(token_count);
  ASSERT_GE(H5Dread(tokens, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  EXPECT_EQ(values, (std::vector<uint16_t>{kTestBos, 1, 2, 3, kTestBos, 4}));

  hid_t offsets = H5Dopen2(file, "/doc_offsets", H5P_DEFAULT);
  ASSERT_GE(offsets, 0);
  hid_t offset_type = H5Dget_type(offsets);
  EXPECT_GT(H5Tequal(offset_type, H5T_STD_I64LE), 0) << "doc_offsets must be little-endian int64";
  std::vector<int64_t> offset_values(3);
  ASSERT_GE(H5Dread(offsets, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offset_values.data()), 0);
  EXPECT_EQ(offset_values, (std::vector<int64_t>{0, 4, 6}));

  // Integer attributes are int64 scalars; strings are fixed-length UTF-8 (h5py reads them as bytes):
  // nanoforge reads no variable-length data from files.
  for (const char* name :
       {"format_version", "vocab_size", "bos_id", "token_count", "doc_count", "token_checksum"}) {
    hid_t attribute = H5Aopen(file, name, H5P_DEFAULT);
    ASSERT_GE(attribute, 0) << name;
    hid_t type = H5Aget_type(attribute);
    EXPECT_GT(H5Tequal(type, H5T_STD_I64LE), 0) << name;
    H5Tclose(type);
    H5Aclose(attribute);
  }
  for (const char* name : {"format", "tokenizer_hash"}) {
    hid_t attribute = H5Aopen(file, name, H5P_DEFAULT);
    ASSERT_GE(attribute, 0) << name;
    hid_t type = H5Aget_type(attribute);
    EXPECT_EQ(H5Tget_class(type), H5T_STRING) << name;
    EXPECT_EQ(H5Tis_variable_str(type), 0) << name;
    EXPECT_EQ(H5Tget_cset(type), H5T_CSET_UTF8) << name;
    H5Tclose(type);
    H5Aclose(attribute);
  }
  H5Sclose(token_space);
  H5Pclose(token_plist);
  H5Tclose(token_type);
  H5Tclose(offset_type);
  H5Dclose(offsets);
  H5Dclose(tokens);
  H5Fclose(file);

  auto reader = H5File::open_read(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(*reader->read_string_attribute("/", "format"), kShardFormatName);
  EXPECT_EQ(*reader->read_int_attribute("/", "format_version"), kShardFormatVersion);
  EXPECT_EQ(*reader->read_int_attribute("/", "token_count"), 6);
  EXPECT_EQ(*reader->read_int_attribute("/", "doc_count"), 2);
  const std::vector<uint16_t> tokens_again = {kTestBos, 1, 2, 3, kTestBos, 4};
  EXPECT_EQ(static_cast<uint64_t>(*reader->read_int_attribute("/", "token_checksum")),
            token_checksum(std::span<const uint16_t>(tokens_again)));
}

TEST(ShardFormat, ChecksumIsTheDocumentedWeightedSum) {
  const std::vector<uint16_t> tokens = {3, 0, 5, 65535};
  // sum of t_i (2i + 1) = 3*1 + 0*3 + 5*5 + 65535*7
  EXPECT_EQ(token_checksum(std::span<const uint16_t>(tokens)), uint64_t{3 + 25 + 65535 * 7});
  // Across the 64 Ki-token block boundary and with 32-bit tokens, against a plain loop modulo 2^64.
  std::vector<uint32_t> long_tokens(200000);
  uint64_t expected = 0;
  for (size_t i = 0; i < long_tokens.size(); ++i) {
    long_tokens[i] = static_cast<uint32_t>(i * 2654435761u);
    expected += static_cast<uint64_t>(long_tokens[i]) * (2 * i + 1);
  }
  EXPECT_EQ(token_checksum(std::span<const uint32_t>(long_tokens)), expected);
  // Swapping two different tokens changes it.
  std::vector<uint16_t> swapped = tokens;
  std::swap(swapped[0], swapped[2]);
  EXPECT_NE(token_checksum(std::span<const uint16_t>(swapped)),
            token_checksum(std::span<const uint16_t>(tokens)));
}

TEST(ShardFormat, TokenScanFindsTheFirstOutOfVocabularyToken) {
  std::vector<uint16_t> tokens(100000, 5);
  tokens[70001] = 1000;
  tokens[90000] = 2000;
  const TokenScanResult scan = scan_tokens(std::span<const uint16_t>(tokens), 1000);
  EXPECT_EQ(scan.first_out_of_vocab, 70001);
  EXPECT_EQ(scan.out_of_vocab_value, 1000u);
  EXPECT_EQ(find_first_at_or_above(std::span<const uint16_t>(tokens), 1001), 90000);
  std::vector<int64_t> positions;
  find_token_positions(std::span<const uint16_t>(tokens), 2000, positions);
  EXPECT_EQ(positions, (std::vector<int64_t>{90000}));
}

TEST(ShardWriter, NothingUnderTheFinalNameBeforeFinishAndNoLeftovers) {
  TempDir dir;
  const std::string path = dir.file("train_00000.h5");
  auto writer = ShardWriter::create(path, {kTestVocab, kTestBos, kTestTokenizerHash});
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->append_document(std::vector<int32_t>{1, 2, 3}).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(writer->token_count(), 4);
  EXPECT_EQ(writer->doc_count(), 1);
  ASSERT_TRUE(writer->finish().ok());
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(writer->finish().ok()) << "a second finish must fail";
  EXPECT_FALSE(writer->append_document(std::vector<int32_t>{1}).ok()) << "no append after finish";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename().string(), "train_00000.h5") << "temporary file left behind";
  }
  EXPECT_EQ(files, 1);
}

TEST(ShardWriter, FailedFinishLeavesNoFile) {
  TempDir dir;
  const std::string path = dir.file("gone/train_00000.h5");
  std::filesystem::create_directory(dir.file("gone"));
  auto writer = ShardWriter::create(path, {kTestVocab, kTestBos, kTestTokenizerHash});
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->append_document(std::vector<int32_t>{1, 2}).ok());
  std::filesystem::remove(dir.file("gone"));  // the directory disappears before finish
  const absl::Status finished = writer->finish();
  EXPECT_FALSE(finished.ok());
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(ShardWriter, RejectsBadTokensAndKeepsTheShardUnchanged) {
  TempDir dir;
  auto writer = ShardWriter::create(dir.file("x.h5"), {kTestVocab, kTestBos, kTestTokenizerHash});
  ASSERT_TRUE(writer.ok());
  const absl::Status too_big =
      writer->append_document(std::vector<int32_t>{1, static_cast<int32_t>(kTestVocab)});
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.message().find("outside the vocabulary"), std::string::npos) << too_big;
  EXPECT_NE(too_big.message().find("x.h5"), std::string::npos) << too_big;
  EXPECT_FALSE(writer->append_document(std::vector<int32_t>{-1}).ok());
  const absl::Status bos_inside = writer->append_document(std::vector<int32_t>{1, kTestBos, 2});
  EXPECT_NE(bos_inside.message().find("BOS"), std::string::npos) << bos_inside;
  EXPECT_FALSE(writer->append_document_with_bos(std::vector<int32_t>{1, 2}).ok()) << "must start with BOS";
  EXPECT_FALSE(writer->append_document_with_bos(std::vector<int32_t>{}).ok());
  EXPECT_EQ(writer->doc_count(), 0);
  EXPECT_EQ(writer->token_count(), 0);
  const absl::Status empty = writer->finish();
  EXPECT_EQ(empty.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(empty.message().find("empty"), std::string::npos) << empty;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.h5")));

  EXPECT_FALSE(
      ShardWriter::create(dir.file("y.h5"), {kTestVocab, static_cast<int32_t>(kTestVocab), ""}).ok());
  EXPECT_FALSE(ShardWriter::create(dir.file("y.h5"), {0, 0, ""}).ok());
  EXPECT_FALSE(ShardWriter::create(dir.file("missing_dir/y.h5"), {kTestVocab, kTestBos, ""}).ok());
}

TEST(ShardFiles, ListsASplitInNameOrder) {
  TempDir dir;
  for (const char* name :
       {"train_00001.h5", "train_00000.h5", "val_00000.h5", "fineweb_train_000001.bin",
        "fineweb_val_000000.bin", "train_00002.h5.partial-12", "notes.txt", "trainer.h5"}) {
    std::ofstream(dir.file(name)) << "x";
  }
  auto train = list_shard_files(dir.path(), "train");
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(*train, (std::vector<std::string>{dir.file("fineweb_train_000001.bin"),
                                              dir.file("train_00000.h5"), dir.file("train_00001.h5")}));
  auto val = list_shard_files(dir.path(), "val");
  ASSERT_TRUE(val.ok());
  EXPECT_EQ(val->size(), 2u);
  auto files = list_shard_files(dir.file("val_00000.h5") + "," + dir.file("train_00000.h5"), "train");
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 2u) << "files are taken as given";
  auto none = list_shard_files(dir.path(), "test");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find(dir.path()), std::string::npos);
  EXPECT_EQ(list_shard_files(dir.file("nowhere"), "train").status().code(), absl::StatusCode::kNotFound);
}

TEST(ShardSet, NumbersDocumentsAcrossShardsAndFingerprintsThem) {
  TempDir dir;
  const auto paths = testing::write_synthetic_shards(dir, {{3, 5}, {2}, {4, 4, 1}});
  ShardOpenOptions options;
  auto set = ShardSet::open(paths, options);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->shard_count(), 3);
  EXPECT_EQ((*set)->doc_count(), 6);
  EXPECT_EQ((*set)->token_count(), 3 + 5 + 2 + 4 + 4 + 1);
  const auto at = [&](int64_t doc) {
    const ShardSet::DocLocation location = (*set)->locate(doc);
    return std::vector<int64_t>{location.shard, location.doc, location.length};
  };
  EXPECT_EQ(at(0), (std::vector<int64_t>{0, 0, 3}));
  EXPECT_EQ(at(1), (std::vector<int64_t>{0, 1, 5}));
  EXPECT_EQ(at(2), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(at(5), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ((*set)->describe(), "3 shards, 6 documents, 19 tokens");

  auto same = ShardSet::open(paths, options);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)->fingerprint(), (*set)->fingerprint());
  auto fewer = ShardSet::open({paths[0], paths[1]}, options);
  ASSERT_TRUE(fewer.ok());
  EXPECT_NE((*fewer)->fingerprint(), (*set)->fingerprint());
}

}  // namespace
}  // namespace nanoforge
