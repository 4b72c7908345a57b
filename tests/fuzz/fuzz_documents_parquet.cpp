// Fuzz target: a parquet file of input documents (data/documents/parquet_documents.h), every document of its
// `text` column read as prep reads it, one decoding thread. Every error must name the file. Arrow is a
// wheel's shared library, not instrumented: coverage guides through nanoforge's side of the reader only,
// while AddressSanitizer still sees Arrow's heap (its memory pool is switched to the system allocator).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/documents/documents.h"
#include "tests/fuzz/fuzz_support.h"

using namespace nanoforge;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("ARROW_DEFAULT_MEMORY_POOL", "system", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_path("documents.parquet");
  fuzz::write_file(path, data, size);
  DocumentReadOptions options;
  options.threads = 1;
  absl::StatusOr<DocumentReader> reader = DocumentReader::open({path}, options);
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
