// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/NAME/) with nanoforge's own writers: valid
// files as the project makes them, plus a few edge cases each (empty, truncated, a field out of range).
// `make fuzz-seeds` runs it (and adds the parquet seeds pyarrow writes, tests/data/documents/); the output
// is committed, and the reproducers fuzzing found sit beside it.
//   nanoforge_fuzz_seeds OUT_DIR REPO_ROOT
#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "data/shards/llmc_bin.h"
#include "data/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_fixtures.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/manifest.h"

using namespace nanoforge;
using namespace std::literals;
namespace fs = std::filesystem;

namespace {

class Seeds {
 public:
  explicit Seeds(fs::path root) : root_(std::move(root)) {}
  // Writes OUT_DIR/target/name.
  void add(const std::string& target, const std::string& name, std::string_view bytes) const {
    fs::create_directories(root_ / target);
    fuzz::write_file((root_ / target / name).string(), bytes);
  }
  // A valid file and its first half (a truncated copy).
  void add_with_truncation(const std::string& target, const std::string& name,
                           const std::string& bytes) const {
    add(target, name, bytes);
    add(target, "truncated_" + name, std::string_view(bytes).substr(0, bytes.size() / 2));
  }

 private:
  fs::path root_;
};

std::string bytes_of(const std::vector<int32_t>& header_and_tokens) {
  return std::string(reinterpret_cast<const char*>(header_and_tokens.data()), header_and_tokens.size() * 4);
}

void shard_seeds(const Seeds& seeds) {
  const std::string dir = fuzz::scratch_path("seed_shards/");
  for (const auto& [vocab, name] : {std::pair<int64_t, const char*>{fuzz::kFixtureVocab, "uint16.h5"},
                                    std::pair<int64_t, const char*>{70000, "uint32.h5"}}) {
    const std::vector<std::string> paths = fuzz::write_fixture_shards(dir, 1, vocab);
    seeds.add_with_truncation("shard_hdf5", name, fuzz::read_file(paths[0]));
  }
  // llm.c files of the same documents: the fixture shard's tokens, as uint16 and uint32.
  const std::shared_ptr<const ShardSet> set = fuzz::fixture_shard_set();
  std::vector<int32_t> tokens;
  for (const uint16_t token : set->shard(0).tokens<uint16_t>())
    tokens.push_back(token);
  for (const auto& [width, name] :
       {std::pair{LlmcTokenWidth::kUint16, "uint16.bin"}, std::pair{LlmcTokenWidth::kUint32, "uint32.bin"}}) {
    const std::string path = dir + name;
    if (!write_llmc_bin(path, tokens, width).ok()) std::abort();
    seeds.add_with_truncation("shard_llmc", name, fuzz::read_file(path));
  }
  std::vector<int32_t> header(kLlmcHeaderInts, 0);
  header[0] = kLlmcMagicUint16;
  header[1] = kLlmcVersionUint16;
  seeds.add("shard_llmc", "header_only.bin", bytes_of(header));
  header[2] = 3;  // three tokens, none of them BOS
  header.insert(header.end(), {0x00010002, 0x00000003});
  seeds.add("shard_llmc", "no_bos.bin", bytes_of(header));
}

void checkpoint_seeds(const Seeds& seeds) {
  const std::string run = fuzz::scratch_path("seed_run");
  const std::string checkpoint = fuzz::write_fixture_checkpoint(run, 2);
  for (const char* file : {"model", "optimizer", "trainer"}) {
    seeds.add(fmt::format("checkpoint_{}", file), fmt::format("{}.h5", file),
              fuzz::read_file(fmt::format("{}/{}.h5", checkpoint, file)));
  }
  const std::vector<std::pair<const char*, const char*>> latest = {{"written", nullptr},
                                                                   {"no_newline", "step_000002"},
                                                                   {"missing", "step_000001\n"},
                                                                   {"outside", "../../etc\n"},
                                                                   {"empty", ""},
                                                                   {"two_words", "step_000002 step_000003\n"},
                                                                   {"absolute", "/dev/null\n"},
                                                                   {"self", ".\n"}};
  for (const auto& [name, text] : latest) {
    seeds.add("checkpoint_latest", name,
              text != nullptr ? text : fuzz::read_file(run + "/checkpoints/latest"));
  }
  const std::string manifest = fuzz::read_file(checkpoint + "/" + kManifestFile);
  seeds.add("checkpoint_manifest", "written", manifest);
  seeds.add("checkpoint_manifest", "without_last_file",
            manifest.substr(0, manifest.rfind('\n', manifest.size() - 2) + 1));
  seeds.add("checkpoint_manifest", "format_1", "nanoforge-checkpoint 1\n");
  seeds.add("checkpoint_manifest", "empty", "");
}

void recipe_seeds(const Seeds& seeds, const fs::path& repo) {
  for (const auto& entry : fs::directory_iterator(repo / "recipes")) {
    seeds.add("recipe", entry.path().filename().string(), fuzz::read_file(entry.path().string()));
  }
  seeds.add("recipe", "resolved.toml", recipe_to_toml(fuzz::tiny_recipe()));
  seeds.add("recipe", "empty.toml", "");
  seeds.add("recipe", "wrong_type.toml", "[train]\nseed = 1.5\ndevice = 3\n");
  seeds.add("recipe", "huge_integer.toml", "[model]\ndepth = 99999999999999999999\n");
  seeds.add("recipe", "unknown.toml", "[model]\ndepht = 4\n[gpu]\nx = 1\n");
  seeds.add("recipe", "special_floats.toml",
            "[optim]\nmatrix_lr = nan\nembedding_lr = -inf\n[dist]\nbucket_mb = 1e308\n");
  seeds.add("recipe_overrides", "typical",
            "train.num_iterations=100\nmodel.depth=4\ndata.train=/data/shards\noptim.matrix_lr=0.01\n"
            "train.deterministic=true\nmodel.window_pattern=SSSL");
  seeds.add("recipe_overrides", "bare_and_quoted",
            "data.tokenizer=\"tok dir\"\ntrain.device=cuda\ndist.bucket_mb=25");
  seeds.add("recipe_overrides", "special_floats", "dist.timeout_seconds=inf\noptim.scalar_lr=nan");
  seeds.add("recipe_overrides", "malformed", "train.seed=\n=\ntrain\n.=x");
}

void tokenizer_seeds(const Seeds& seeds, const fs::path& repo) {
  const fs::path golden = repo / "tests/data/tokenizer/golden";
  seeds.add("tokenizer_ranks", "golden.tiktoken", fuzz::read_file((golden / Tokenizer::kRanksFile).string()));
  const std::string dir = fuzz::scratch_path("seed_tokenizer/");
  if (!fuzz::fixture_tokenizer().save(dir).ok()) std::abort();
  const std::string ranks = fuzz::read_file(dir + Tokenizer::kRanksFile);
  seeds.add("tokenizer_ranks", "fixture.tiktoken", ranks);
  seeds.add("tokenizer_ranks", "missing_rank.tiktoken", ranks.substr(ranks.find('\n') + 1));
  seeds.add("tokenizer_ranks", "crlf_tabs.tiktoken", "AA==\t0\r\nAQ==  1\r\n");
  const std::string specials = fuzz::read_file(dir + Tokenizer::kSpecialsFile);
  seeds.add("tokenizer_specials", "fixture.txt", specials);
  seeds.add("tokenizer_specials", "golden.txt",
            fuzz::read_file((golden / Tokenizer::kSpecialsFile).string()));
  seeds.add("tokenizer_specials", "bos_only.txt", "<|bos|> 264\n");
  seeds.add("tokenizer_specials", "no_bos.txt", "<|user_start|> 264\n");
  seeds.add("tokenizer_specials", "empty.txt", "");
}

void document_seeds(const Seeds& seeds) {
  seeds.add(
      "documents", "lines.jsonl",
      "{\"text\": \"The theory of everything.\"}\n\n{\"id\": 2, \"text\": \"caf\\u00e9 \\ud83d\\ude00\"}\n"
      "{\"text\": \"\"}\r\n");
  seeds.add("documents", "bad.jsonl", "{\"text\": 5}\n[1, 2]\n{\"text\": \"unterminated\n");
  seeds.add("documents", "paragraphs.txt",
            "First paragraph,\nsecond line.\n\n \t\nSecond paragraph.\r\n\r\nThird\n");
  seeds.add("documents", "bytes.txt", "\xef\xbb\xbf\xff\xfe text \x00 with a NUL\n"sv);
}

// `bytes` as a gzip member (deflate with a gzip header) or a zstd frame.
std::string gzip(std::string_view bytes) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    std::abort();
  std::string out(deflateBound(&stream, bytes.size()) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  if (deflate(&stream, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::string zstd(std::string_view bytes) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  const size_t size = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 19);
  if (ZSTD_isError(size)) std::abort();
  out.resize(size);
  return out;
}

// documents_compressed: a kind byte (bit 0: zstd, bit 1: plain text) and the compressed file.
void compressed_document_seeds(const Seeds& seeds) {
  const std::string jsonl = "{\"text\": \"The theory of everything.\"}\n{\"text\": \"caf\\u00e9\"}\n";
  const std::string text = "First paragraph,\nsecond line.\n\nSecond paragraph.\n";
  seeds.add("documents_compressed", "jsonl.gz", "\x00" + gzip(jsonl));
  seeds.add("documents_compressed", "jsonl.zst", "\x01" + zstd(jsonl));
  seeds.add("documents_compressed", "txt.gz", "\x02" + gzip(text));
  seeds.add("documents_compressed", "txt.zst", "\x03" + zstd(text));
  const std::string gz = gzip(jsonl);
  seeds.add("documents_compressed", "truncated.jsonl.gz", "\x00" + gz.substr(0, gz.size() / 2));
  seeds.add("documents_compressed", "two_members.txt.gz", "\x02" + gzip(text) + gzip(text));
  // One line of 1 MiB in a few hundred bytes: what a decompression bomb looks like.
  seeds.add("documents_compressed", "long_line.txt.zst", "\x03" + zstd(std::string(1 << 20, 'a')));
}

// core_bundle: core.yaml, NUL, eval_meta_data.csv, NUL, the task's examples (the first lines of the
// committed test bundle's task of each type).
void core_bundle_seeds(const Seeds& seeds, const fs::path& repo) {
  const fs::path bundle = repo / "tests/eval/core/bundle";
  const std::string csv_header =
      "Eval Task,Task Category,Task Type,#shots,#datapoints,Random baseline,Centered Metric?,Description\n";
  const std::vector<std::tuple<const char*, const char*, const char*, const char*>> tasks = {
      {"mc", "multiple_choice", "language_understanding/mc_zeroshot.jsonl", "25"},
      {"schema", "schema", "commonsense_reasoning/schema_zeroshot.jsonl", "50"},
      {"lm", "language_modeling", "language_understanding/lm_zeroshot.jsonl", "0"}};
  for (const auto& [label, type, file, baseline] : tasks) {
    const std::string examples = fuzz::read_file((bundle / "eval_data" / file).string());
    size_t end = 0;
    for (int line = 0; line < 4 && end != std::string::npos; ++line)
      end = examples.find('\n', end + 1);
    const std::string yaml = fmt::format(
        "icl_tasks:\n-\n  label: {}\n  dataset_uri: task.jsonl\n  num_fewshot: [1]\n  icl_task_type: {}\n"
        "  continuation_delimiter: \"\\nAnswer: \"\n",
        label, type);
    const std::string csv = csv_header + fmt::format("{},x,x,1,4,{},,\"a task\"\n", label, baseline);
    seeds.add("core_bundle", label,
              yaml + '\0' + csv + '\0' + examples.substr(0, end == std::string::npos ? end : end + 1));
  }
}

void loader_state_seeds(const Seeds& seeds) {
  for (const int batches : {0, 2, 5}) {
    const std::vector<uint8_t> bytes = fuzz::fixture_loader_state(batches).to_bytes();
    seeds.add("loader_state", fmt::format("after_{}_batches", batches),
              std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  seeds.add("loader_state", "magic_only", "NFLOADER");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR REPO_ROOT\n", argv[0]);
    return 2;
  }
  const Seeds seeds{fs::path(argv[1])};
  const fs::path repo(argv[2]);
  shard_seeds(seeds);
  checkpoint_seeds(seeds);
  recipe_seeds(seeds, repo);
  tokenizer_seeds(seeds, repo);
  document_seeds(seeds);
  compressed_document_seeds(seeds);
  core_bundle_seeds(seeds, repo);
  loader_state_seeds(seeds);
  return 0;
}
