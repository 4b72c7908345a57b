// Parquet input through Arrow: files pyarrow wrote (several row groups, non-ASCII, an empty text, a null, a
// large_string column) read as the same documents as their JSON lines, whatever the number of threads; and
// errors that name the file and the row group. In a build without Arrow, parquet is refused saying how to
// get it.
#include <gtest/gtest.h>

#include "data/documents/documents.h"
#include "data/documents/parquet_documents.h"
#include "tests/data/documents/input_test_files.h"
#include "tests/test_paths.h"

namespace nanoforge {
namespace {

using testing::parquet_fixtures;

struct ReadAll {
  std::vector<Document> documents;
  int64_t null_texts = 0;
  std::string error;
};

ReadAll read_all(const std::string& path, int threads = 0, const std::string& column = "text") {
  DocumentReadOptions options;
  options.threads = threads;
  options.text_column = column;
  ReadAll result;
  auto reader = DocumentReader::open({path}, options);
  if (!reader.ok()) {
    result.error = std::string(reader.status().message());
    return result;
  }
  Document document;
  while (true) {
    auto got = reader->next(document);
    if (!got.ok()) {
      result.error = std::string(got.status().message());
      return result;
    }
    if (!*got) break;
    result.documents.push_back(document);
  }
  EXPECT_EQ(reader->bytes_read(), reader->total_bytes());
  result.null_texts = reader->null_texts();
  return result;
}

std::vector<std::string> texts(const std::vector<Document>& documents) {
  std::vector<std::string> out;
  for (const Document& document : documents)
    out.push_back(document.text);
  return out;
}

#define SKIP_WITHOUT_PARQUET()                                                                   \
  std::string why;                                                                               \
  const std::string dir = parquet_fixtures(why);                                                 \
  if (!parquet_supported()) GTEST_SKIP() << "this build has no Arrow (see RefusedWithoutArrow)"; \
  if (dir.empty()) GTEST_SKIP() << why

TEST(ParquetDocuments, ReadsTheSameDocumentsAsJsonLinesWhateverTheThreadCount) {
  SKIP_WITHOUT_PARQUET();
  const ReadAll json = read_all(dir + "/docs.jsonl");
  ASSERT_EQ(json.error, "");
  ASSERT_EQ(json.documents.size(), 42u);  // 43 rows, one of them null
  for (int threads : {1, 2, 5, 16}) {
    const ReadAll parquet = read_all(dir + "/docs.parquet", threads);
    ASSERT_EQ(parquet.error, "") << threads << " threads";
    EXPECT_EQ(texts(parquet.documents), texts(json.documents)) << threads << " threads";
    EXPECT_EQ(parquet.null_texts, 1);
    // The row in the file, 1-based: row 4 is the null, so the fourth document is row 5.
    EXPECT_EQ(parquet.documents[2].line, 3);
    EXPECT_EQ(parquet.documents[3].line, 5);
    EXPECT_EQ(parquet.documents.back().line, 43);
  }
  const ReadAll large = read_all(dir + "/large.parquet", 2);  // large_string, uncompressed, one row group
  ASSERT_EQ(large.error, "");
  EXPECT_EQ(texts(large.documents), texts(json.documents));
}

TEST(ParquetDocuments, DirectoriesAndGlobsTakeParquetFiles) {
  SKIP_WITHOUT_PARQUET();
  auto globbed = expand_document_paths({dir + "/d*.parquet"});
  ASSERT_TRUE(globbed.ok()) << globbed.status();
  EXPECT_EQ(*globbed, (std::vector<std::string>{dir + "/docs.parquet"}));
  auto listed = expand_document_paths({dir});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 7u);  // the six parquet files and docs.jsonl
}

TEST(ParquetDocuments, ErrorsNameTheFileAndTheRowGroup) {
  SKIP_WITHOUT_PARQUET();
  const std::string corrupt = read_all(dir + "/corrupt.parquet", 3).error;
  EXPECT_NE(corrupt.find(dir + "/corrupt.parquet: row group 3 of 9"), std::string::npos) << corrupt;
  EXPECT_NE(corrupt.find("rows 16..20"), std::string::npos) << corrupt;
  EXPECT_NE(corrupt.find("CRC"), std::string::npos) << corrupt;  // the page checksum caught it
  const std::string no_crc = read_all(dir + "/corrupt_no_crc.parquet", 3).error;
  EXPECT_NE(no_crc.find(dir + "/corrupt_no_crc.parquet: row group 3 of 9"), std::string::npos) << no_crc;
  const std::string truncated = read_all(dir + "/truncated.parquet").error;
  EXPECT_NE(truncated.find(dir + "/truncated.parquet: not a readable parquet file"), std::string::npos)
      << truncated;
  const std::string ints = read_all(dir + "/ints.parquet").error;
  EXPECT_NE(ints.find("column 'text' holds int64, not strings"), std::string::npos) << ints;
  const std::string missing = read_all(dir + "/docs.parquet", 0, "body").error;
  EXPECT_NE(missing.find("no column 'body' (the columns are: id, text)"), std::string::npos) << missing;
  EXPECT_NE(missing.find("--text-column"), std::string::npos) << missing;
  // The documents before the corrupt row group come out first, in order.
  DocumentReadOptions options;
  auto reader = DocumentReader::open({dir + "/corrupt.parquet"}, options);
  ASSERT_TRUE(reader.ok());
  Document document;
  int documents = 0;
  while (true) {
    auto got = reader->next(document);
    if (!got.ok() || !*got) break;
    ++documents;
  }
  EXPECT_EQ(documents, 14);  // rows 1..15, less the null
}

// Fuzzing found it (documents_parquet): a column chunk's size statistics that do not match its column made
// Arrow throw from RowGroupMetaData::ColumnChunk, outside any handler (an abort). The reproducer is a copy of
// the fixture docs.parquet with 8 bytes changed.
TEST(ParquetDocuments, DamagedRowGroupMetadataIsAnError) {
  if (!parquet_supported()) GTEST_SKIP() << "this build has no Arrow (see RefusedWithoutArrow)";
  const std::string path =
      test::source_path("tests/fuzz/corpus/documents_parquet/regress_size_statistics.parquet");
  const std::string error = read_all(path).error;
  EXPECT_NE(error.find(path + ": row group"), std::string::npos) << error;
  EXPECT_NE(error.find("damaged metadata"), std::string::npos) << error;
}

TEST(ParquetDocuments, StoppingEarlyEndsTheWorkers) {
  SKIP_WITHOUT_PARQUET();
  for (int threads : {1, 4}) {
    DocumentReadOptions options;
    options.threads = threads;
    auto reader = DocumentReader::open({dir + "/docs.parquet"}, options);
    ASSERT_TRUE(reader.ok());
    Document document;
    ASSERT_TRUE(*reader->next(document));
    EXPECT_EQ(document.text, "Plain ASCII document number one.");
  }  // the reader goes out of scope with workers mid-file: the test would hang if they did not stop
}

TEST(ParquetDocuments, RefusedWithoutArrow) {
  if (parquet_supported()) GTEST_SKIP() << "this build reads parquet (see the tests above)";
  const std::string dir = testing::fresh_temp_dir("parquet_refused");
  testing::write_file(dir + "/shard_00000.parquet", "PAR1");
  const std::string error = read_all(dir + "/shard_00000.parquet").error;
  EXPECT_NE(error.find("shard_00000.parquet: this nanoforge was built without Apache Arrow"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("scripts/install-deps.sh"), std::string::npos) << error;
}

}  // namespace
}  // namespace nanoforge
