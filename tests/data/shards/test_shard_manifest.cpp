// A data set's manifest as text: what to_text writes parses back to the same bytes; in format 2 its last line
// checks every byte above it, so a change to any line (a count, a shard's CRC-32, the command) is refused;
// format 1 (no checksum) is still read, with its document counts checked against each other; a newer format
// is refused saying so.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/shards/shard_manifest.h"

namespace nanoforge {
namespace {

ShardManifest two_shard_manifest(int format_version) {
  ShardManifest manifest;
  manifest.format_version = format_version;
  manifest.tokenizer_hash = "e183fa281c527f30";
  manifest.vocab_size = 2048;
  manifest.bos_id = 2039;
  manifest.shard_tokens = 4000;
  manifest.val_docs = 51;
  manifest.text_split = "paragraphs";
  manifest.text_column = "text";
  manifest.command_line = "nanoforge prep --input c.jsonl --tokenizer tok --out o";
  manifest.inputs = {"114797 1796536678887719217 00000000deadbeef c.jsonl"};
  manifest.input_documents = 205;
  manifest.input_documents_hash = 0x0123456789abcdefull;
  manifest.empty_documents = 4;
  manifest.text_bytes = 36310;
  manifest.shards = {{"val_00000.h5", 37280, 0xa5887098, 51, 4005, 0x13c2798e4},
                     {"train_00000.h5", 52000, 0x11223344, 150, 6000, 0x99}};
  return manifest;
}

TEST(ShardManifestText, ReadsBackWhatItWrites) {
  const std::string text = two_shard_manifest(kShardManifestVersion).to_text();
  EXPECT_TRUE(text.starts_with("nanoforge-shards 2\n"));
  EXPECT_NE(text.find("\ninput_documents_hash 0123456789abcdef\n"), std::string::npos) << text;
  EXPECT_NE(text.rfind("\nmanifest_checksum "), std::string::npos) << text;
  const absl::StatusOr<ShardManifest> parsed = ShardManifest::parse(text, "m.txt");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->to_text(), text);
  EXPECT_EQ(parsed->input_documents_hash, 0x0123456789abcdefull);
}

TEST(ShardManifestText, AnyEditedLineIsRefusedByItsChecksum) {
  const std::string text = two_shard_manifest(kShardManifestVersion).to_text();
  const size_t checksum_line = text.rfind("manifest_checksum ");
  // One character changed in every line above the checksum (a digit or letter to another).
  for (size_t line = 0; line < checksum_line; line = text.find('\n', line) + 1) {
    std::string edited = text;
    const size_t at = edited.find_last_not_of('\n', edited.find('\n', line) - 1);
    edited[at] = edited[at] == '1' ? '2' : '1';
    const absl::StatusOr<ShardManifest> parsed = ShardManifest::parse(edited, "m.txt");
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << edited.substr(line, 40);
    if (line > 0) {  // the first line names the format, checked before the checksum
      EXPECT_NE(parsed.status().message().find("m.txt: its manifest_checksum is "), std::string::npos)
          << parsed.status();
    }
  }
  std::string cut = text.substr(0, checksum_line);
  EXPECT_NE(ShardManifest::parse(cut, "m.txt")
                .status()
                .message()
                .find("its last line is not its "
                      "manifest_checksum"),
            std::string::npos);
  std::string wrong = text;
  wrong.replace(checksum_line + 18, 8, "deadbeef");
  EXPECT_NE(ShardManifest::parse(wrong, "m.txt").status().message().find("prepare the data set again"),
            std::string::npos);
}

TEST(ShardManifestText, FormatOneIsReadWithItsCountsChecked) {
  const std::string text = two_shard_manifest(1).to_text();
  EXPECT_TRUE(text.starts_with("nanoforge-shards 1\n"));
  EXPECT_EQ(text.find("manifest_checksum"), std::string::npos);
  EXPECT_EQ(text.find("input_documents_hash"), std::string::npos);
  const absl::StatusOr<ShardManifest> parsed = ShardManifest::parse(text, "m.txt");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->format_version, 1);
  EXPECT_EQ(parsed->to_text(), text);
  // Without a checksum, the documents still add up: those read = those in shards + the empty ones.
  std::string edited = text;
  edited.replace(edited.find("input_documents 205"), 19, "input_documents 206");
  const absl::Status refused = ShardManifest::parse(edited, "m.txt").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(refused.message().find("m.txt: input_documents 206 is not the documents of its shards (201) plus "
                                   "empty_documents (4)"),
            std::string::npos)
      << refused;
}

TEST(ShardManifestText, ANewerFormatIsRefusedSayingSo) {
  std::string text = two_shard_manifest(kShardManifestVersion).to_text();
  text.replace(0, 18, "nanoforge-shards 3");
  const absl::Status refused = ShardManifest::parse(text, "m.txt").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("m.txt: shard manifest format 3; this nanoforge reads formats 1 to 2"),
            std::string::npos)
      << refused;
}

}  // namespace
}  // namespace nanoforge
