// Fuzz target: input documents (data/documents/documents.h) — the same bytes as a JSONL file and as a text
// file, read in paragraphs and whole; each document read is then encoded and decoded back (what tokenizer
// training and prep do with them). A whole-file document is the file, byte for byte.
#include <cstddef>
#include <cstdint>

#include "data/documents/documents.h"
#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/tokenizer_round_trip.h"

using namespace nanoforge;

namespace {

// Reads every document of `path`; returns them (stopping at the first error, which must name the file).
std::vector<std::string> read_documents(const std::string& path, TextSplit split) {
  std::vector<std::string> texts;
  absl::StatusOr<DocumentReader> reader = DocumentReader::open({path}, split);
  fuzz::require_named(reader.status(), path);
  if (!reader.ok()) return texts;
  Document document;
  while (true) {
    const absl::StatusOr<bool> got = reader->next(document);
    fuzz::require_named(got.status(), path);
    if (!got.ok() || !*got) break;
    fuzz::require_text_round_trip(fuzz::fixture_tokenizer(), document.text);
    texts.push_back(document.text);
  }
  return texts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string jsonl = fuzz::scratch_path("documents.jsonl");
  static const std::string text = fuzz::scratch_path("documents.txt");
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::write_file(jsonl, bytes);
  fuzz::write_file(text, bytes);
  read_documents(jsonl, TextSplit::kParagraphs);
  read_documents(text, TextSplit::kParagraphs);
  const std::vector<std::string> whole = read_documents(text, TextSplit::kWholeFile);
  fuzz::require(whole.size() == (bytes.empty() ? 0 : 1) && (whole.empty() || whole[0] == bytes),
                "a whole-file document is the file's bytes");
  return 0;
}
