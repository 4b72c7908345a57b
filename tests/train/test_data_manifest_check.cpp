// A run starts only on a data set that is as prep wrote it: a manifest edited after prep (a count changed, a
// shard's CRC-32 replaced) is refused by the manifest's own checksum, and a shard whose bytes changed where
// no other check looks (the padding between HDF5 objects), or anywhere else, is refused by its CRC-32 before
// it is opened (no parser, ours or libhdf5's, reads a byte of it). Each refusal names the file; the first
// three trained without a word before. A data set of format 1 (before the checksum) still starts, its shards
// checked by their CRC-32s.
#include <hdf5.h>

#include <fstream>
#include <functional>

#include "data/shards/shard_manifest.h"
#include "tests/train/training_fixture.h"
#include "train/run_setup.h"

namespace nanoforge {
namespace {

using namespace test;

// A copy of the sentences' data set that a test may damage, and a recipe training on it.
struct DataSetCopy {
  std::string dir;
  Recipe recipe;
};

DataSetCopy copy_of_sentence_shards(const std::string& name) {
  const std::string dir = temp_dir(name) + "/shards";
  fs::copy(sentence_shards(), dir);
  Recipe recipe = small_recipe();
  recipe.data.train = recipe.data.val = dir;
  return {dir, recipe};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The manifest with the first line starting with `key` changed by `edit`.
void edit_manifest_line(const std::string& dir, const std::string& key,
                        const std::function<std::string(const std::string&)>& edit) {
  std::string text = read_bytes(dir + "/" + kShardManifestName);
  const size_t at = text.find("\n" + key) + 1;
  ASSERT_NE(at, 0u) << key << " not in the manifest";
  const size_t end = text.find('\n', at);
  text.replace(at, end - at, edit(text.substr(at, end - at)));
  write_bytes(dir + "/" + kShardManifestName, text);
}

// Where the shard's token bytes start in its file.
int64_t tokens_offset(const std::string& shard) {
  const hid_t file = H5Fopen(shard.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t tokens = H5Dopen2(file, "/tokens", H5P_DEFAULT);
  const auto offset = static_cast<int64_t>(H5Dget_offset(tokens));
  H5Dclose(tokens);
  H5Fclose(file);
  return offset;
}

void expect_refused(const Recipe& recipe, const std::vector<std::string>& fragments) {
  const absl::StatusOr<RunSetup> setup = set_up_run(recipe, 1, Device::kCpu);
  ASSERT_FALSE(setup.ok()) << "the run would have trained on it";
  EXPECT_EQ(setup.status().code(), absl::StatusCode::kDataLoss) << setup.status();
  for (const std::string& fragment : fragments)
    EXPECT_NE(setup.status().message().find(fragment), std::string::npos)
        << fragment << " not in " << setup.status();
}

TEST(DataManifestCheck, AnUntouchedDataSetStarts) {
  const DataSetCopy copy = copy_of_sentence_shards("manifest_untouched");
  const absl::StatusOr<RunSetup> setup = set_up_run(copy.recipe, 1, Device::kCpu);
  EXPECT_TRUE(setup.ok()) << setup.status();
}

TEST(DataManifestCheck, InputDocumentsEditedInTheManifestIsRefused) {
  const DataSetCopy copy = copy_of_sentence_shards("manifest_input_documents");
  edit_manifest_line(copy.dir, "input_documents ", [](const std::string& line) {
    return "input_documents " + std::to_string(std::stoll(line.substr(16)) + 1);
  });
  expect_refused(copy.recipe, {"data.train: " + copy.dir + "/manifest.txt", "prepare the data set again"});
}

TEST(DataManifestCheck, AShardCrcEditedInTheManifestIsRefused) {
  const DataSetCopy copy = copy_of_sentence_shards("manifest_shard_crc");
  edit_manifest_line(copy.dir, "shard train_00000.h5 ", [](std::string line) {
    const size_t crc = line.find(' ', std::string("shard train_00000.h5 ").size()) + 1;
    return line.replace(crc, 8, "deadbeef");
  });
  expect_refused(copy.recipe, {"data.train: " + copy.dir + "/manifest.txt", "prepare the data set again"});
}

TEST(DataManifestCheck, ShardBytesNoOtherCheckReadsAreRefusedByTheirCrc) {
  const DataSetCopy copy = copy_of_sentence_shards("manifest_shard_padding");
  const std::string shard = copy.dir + "/train_00000.h5";
  const int64_t padding = tokens_offset(shard) - 1;  // objects start on 4096-byte boundaries: zeros before
  std::string bytes = read_bytes(shard);
  ASSERT_EQ(bytes[static_cast<size_t>(padding)], '\0');
  bytes[static_cast<size_t>(padding)] = '\x5a';
  write_bytes(shard, bytes);
  ASSERT_TRUE(ShardSet::open({shard}, {}).ok()) << "the shard reads as ever: only its CRC-32 tells";
  expect_refused(copy.recipe, {"data.train: " + shard + ": CRC-32 ", copy.dir + "/manifest.txt"});
}

TEST(DataManifestCheck, ADamagedShardIsRefusedByItsCrcBeforeAnyParserReadsIt) {
  const DataSetCopy copy = copy_of_sentence_shards("manifest_shard_signature");
  const std::string shard = copy.dir + "/val_00000.h5";
  std::string bytes = read_bytes(shard);
  bytes[1] = 'X';  // the HDF5 signature, "\x89HDF\r\n\x1a\n"
  write_bytes(shard, bytes);
  expect_refused(copy.recipe, {"data.val: " + shard + ": CRC-32 ", "copy it again"});
}

// A data set prepared before the manifest had its own checksum (format 1) still starts, and its shards are
// still checked by their CRC-32s.
TEST(DataManifestCheck, AFormatOneDataSetStartsAndItsShardCrcsAreChecked) {
  const DataSetCopy copy = copy_of_sentence_shards("manifest_format_1");
  const std::string manifest_path = copy.dir + "/" + kShardManifestName;
  absl::StatusOr<ShardManifest> manifest = ShardManifest::parse(read_bytes(manifest_path), manifest_path);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  manifest->format_version = 1;
  write_bytes(manifest_path, manifest->to_text());
  ASSERT_TRUE(read_bytes(manifest_path).starts_with("nanoforge-shards 1\n"));
  const absl::StatusOr<RunSetup> setup = set_up_run(copy.recipe, 1, Device::kCpu);
  EXPECT_TRUE(setup.ok()) << setup.status();
  edit_manifest_line(copy.dir, "shard train_00000.h5 ", [](std::string line) {
    const size_t crc = line.find(' ', std::string("shard train_00000.h5 ").size()) + 1;
    return line.replace(crc, 8, "deadbeef");
  });
  expect_refused(copy.recipe, {"data.train: " + copy.dir + "/train_00000.h5: CRC-32 ",
                               "but " + manifest_path + " lists deadbeef"});
}

}  // namespace
}  // namespace nanoforge
