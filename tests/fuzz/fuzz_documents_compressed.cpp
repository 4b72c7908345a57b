// Fuzz target: compressed input documents (data/documents/byte_source.h): the first byte picks the kind
// (bit 0: gzip or zstd; bit 1: JSON lines or plain-text paragraphs), the rest is the file, read as prep and
// tokenizer training read it. Every error must name the file; whatever decompresses is read as a
// document stream with the memory bounds of an uncompressed one (a small file may claim gigabytes).
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/documents/documents.h"
#include "tests/fuzz/fuzz_support.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string paths[4] = {
      fuzz::scratch_path("documents.jsonl.gz"), fuzz::scratch_path("documents.jsonl.zst"),
      fuzz::scratch_path("documents.txt.gz"), fuzz::scratch_path("documents.txt.zst")};
  const std::string& path = paths[data[0] & 3];
  fuzz::write_file(path, data + 1, size - 1);
  absl::StatusOr<DocumentReader> reader = DocumentReader::open({path}, TextSplit::kParagraphs);
  fuzz::require_named(reader.status(), path);
  if (!reader.ok()) return 0;
  Document document;
  while (true) {
    const absl::StatusOr<bool> got = reader->next(document);
    fuzz::require_named(got.status(), path);
    if (!got.ok() || !*got) break;
  }
  return 0;
}
