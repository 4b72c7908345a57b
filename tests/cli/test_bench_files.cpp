// The benches that write files: `bench checkpoint` writes a checkpoint that verifies into a folder of its own
// and removes it (a --dir holding a run keeps its `latest` — it once became the bench's step 0), and
// `bench loader` refuses the synthetic data's flags where they would be ignored and a lengths file it cannot
// use, naming the flag or the line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/program_run.h"
#include "tests/test_paths.h"

namespace {

namespace fs = std::filesystem;
using nanoforge::test::last_line;
using nanoforge::test::ProgramRun;

ProgramRun run(const std::string& arguments) {
  return nanoforge::test::run_command(std::string(nanoforge::test::nanoforge_binary()) + " " + arguments +
                                      " 2>&1");
}

std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir))
    names.insert(fs::relative(entry.path(), dir).string());
  return names;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string read(const fs::path& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

TEST(BenchFiles, CheckpointLeavesARunDirectoryGivenAsDirAsItWas) {
  const fs::path run_dir = fs::temp_directory_path() / "a_run";
  write(run_dir / "checkpoints" / "latest", "step_000002\n");
  write(run_dir / "checkpoints" / "step_000002" / "model.h5", "the run's weights");
  const std::set<std::string> before = listing(run_dir);
  const ProgramRun bench =
      run("bench checkpoint --depth 1 --vocab 256 --threads 1 --dir " + run_dir.string());
  ASSERT_EQ(bench.exit_code, 0) << bench.output;  // the bench's own checkpoint verifies
  EXPECT_EQ(last_line(bench.output).rfind("{\"bench\": \"checkpoint\", \"depth\": 1, ", 0), 0u)
      << bench.output;
  EXPECT_NE(bench.output.find(run_dir.string() + "/nanoforge_bench_checkpoint_"), std::string::npos)
      << bench.output;
  EXPECT_EQ(listing(run_dir), before);  // nothing added, nothing left behind
  EXPECT_EQ(read(run_dir / "checkpoints" / "latest"), "step_000002\n");
  EXPECT_EQ(read(run_dir / "checkpoints" / "step_000002" / "model.h5"), "the run's weights");
}

TEST(BenchFiles, CheckpointNamesAMissingDir) {
  const std::string missing = (fs::temp_directory_path() / "nowhere").string();
  const ProgramRun bench = run("bench checkpoint --depth 1 --vocab 256 --dir " + missing);
  EXPECT_EQ(bench.exit_code, 1) << bench.output;
  EXPECT_NE(bench.output.find(missing + ": no such directory"), std::string::npos) << bench.output;
}

TEST(BenchFiles, LoaderRefusesFlagsThatWouldBeIgnored) {
  const fs::path lengths = fs::temp_directory_path() / "lengths.txt";
  write(lengths, "100\n200\n");
  const std::string data = "--data " + (fs::temp_directory_path() / "shards").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {data + " --doc-lengths " + lengths.string(),
       "--doc-lengths describes the synthetic data bench loader writes without --data"},
      {data + " --synthetic-tokens 1000", "--synthetic-tokens describes the synthetic data"},
      {data + " --doc-tokens-median 50", "--doc-tokens-median describes the synthetic data"},
      {"--doc-lengths " + lengths.string() + " --doc-tokens-sigma 2",
       "--doc-tokens-sigma shapes the log-normal document lengths, which --doc-lengths replaces"},
      {"--synthetic-tokens 1000 --bin-vocab 300",
       "--bin-vocab describes llm.c .bin shards, and the data has none"},
  };
  for (const auto& [flags, expected] : cases) {
    const ProgramRun bench = run("bench loader --batch 2 --seq 16 --steps 2 " + flags);
    EXPECT_EQ(bench.exit_code, 1) << flags << "\n" << bench.output;
    EXPECT_NE(bench.output.find(expected), std::string::npos) << flags << "\n" << bench.output;
  }
}

TEST(BenchFiles, LoaderNamesTheLineOfABadLength) {
  const fs::path lengths = fs::temp_directory_path() / "lengths.txt";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"100\n\nabc\n", ":3: \"abc\" is not a document length in tokens in [1, 1000000]"},
      {"100\n1000000000000000000\n",
       ":2: \"1000000000000000000\" is not a document length"},  // once bad_alloc
      {"0\n", ":1: \"0\" is not a document length"},
      {"\n\n", ": no lengths"},
  };
  for (const auto& [text, expected] : cases) {
    write(lengths, text);
    const ProgramRun bench =
        run("bench loader --batch 2 --seq 16 --steps 2 --synthetic-tokens 1000 --doc-lengths " +
            lengths.string());
    EXPECT_EQ(bench.exit_code, 1) << text << "\n" << bench.output;
    EXPECT_NE(bench.output.find("--doc-lengths " + lengths.string() + expected), std::string::npos)
        << text << "\n"
        << bench.output;
  }
  write(lengths, "100\n 7 \n");
  const ProgramRun good = run(
      "bench loader --batch 2 --seq 16 --steps 2 --synthetic-tokens 1000 --doc-lengths " + lengths.string());
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_EQ(last_line(good.output).rfind("{\"bench\": \"loader\", ", 0), 0u) << good.output;
}

}  // namespace
