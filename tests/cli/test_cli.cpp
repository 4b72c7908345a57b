// The `nanoforge` program end to end: help, version, errors for unknown commands and misplaced flags, the
// parity command on nanochat's dev case, and bench step's JSON line (measured, and the performance model's).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "tests/program_run.h"
#include "tests/test_paths.h"

namespace {

using nanoforge::test::ProgramRun;

ProgramRun run(const std::string& arguments) {
  return nanoforge::test::run_command(std::string(nanoforge::test::nanoforge_binary()) + " " + arguments +
                                      " 2>&1");
}

TEST(Cli, HelpListsTheCommands) {
  const ProgramRun help = run("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("parity"), std::string::npos);
  EXPECT_NE(help.output.find("bench step"), std::string::npos);
  const ProgramRun command_help = run("bench step --help");
  EXPECT_EQ(command_help.exit_code, 0);
  EXPECT_NE(command_help.output.find("--window-pattern"), std::string::npos) << command_help.output;
}

// The lines of `text` between the line `header` and the next empty line.
std::vector<std::string> section_lines(const std::string& text, const std::string& header) {
  std::vector<std::string> lines;
  size_t at = text.find(header + "\n");
  if (at == std::string::npos) return lines;
  for (at += header.size() + 1; at < text.size();) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    if (line.empty()) break;
    lines.push_back(line);
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return lines;
}

// Each line "  NAME  TEXT": the text starts in one column for all, two spaces at least after the longest
// name (the probe's "tokenizer train train nanochat's..." ran them together).
void expect_two_columns(const std::vector<std::string>& lines, const std::string& output) {
  ASSERT_FALSE(lines.empty()) << output;
  size_t text_column = std::string::npos;
  for (const std::string& line : lines) {
    // The name is the first word, or two for "bench step": the text starts after the last run of 2+ spaces
    // that follows the name.
    const size_t gap = line.find("  ", 2);
    ASSERT_NE(gap, std::string::npos) << "no two-space gap after the name: " << line;
    const size_t text = line.find_first_not_of(' ', gap);
    if (text_column == std::string::npos) text_column = text;
    EXPECT_EQ(text, text_column) << "not aligned: " << line << "\n" << output;
  }
}

TEST(Cli, HelpAlignsNamesAndTextsInColumns) {
  const ProgramRun help = run("--help");
  ASSERT_EQ(help.exit_code, 0);
  expect_two_columns(section_lines(help.output, "commands:"), help.output);
  EXPECT_NE(help.output.find("  tokenizer train  "), std::string::npos) << help.output;
  const ProgramRun eval_help = run("eval --help");
  ASSERT_EQ(eval_help.exit_code, 0);
  expect_two_columns(section_lines(eval_help.output, "flags:"), eval_help.output);
}

TEST(Cli, VersionNamesCommitAndBackends) {
  const ProgramRun version = run("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.output.find("commit"), std::string::npos);
  EXPECT_NE(version.output.find("BLAS"), std::string::npos);
  EXPECT_NE(version.output.find("cuda"), std::string::npos);
}

TEST(Cli, UnknownCommandAndForeignFlagsAreRefused) {
  const ProgramRun unknown = run("trian");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown command 'trian'"), std::string::npos);
  const ProgramRun foreign = run("parity --depth 4 --case x --out y");
  EXPECT_EQ(foreign.exit_code, 2);
  EXPECT_NE(foreign.output.find("--depth is not a flag of this command"), std::string::npos)
      << foreign.output;
  // torchtitan's spelling of a recipe override: the command that takes overrides shows how to write it.
  for (const std::string command : {"train", "bench scaling"}) {
    const ProgramRun dashed = run(command + " --recipe r.toml --train.num_iterations=5");
    EXPECT_EQ(dashed.exit_code, 2);
    EXPECT_NE(dashed.output.find("--train.num_iterations is not a flag of this command; recipe overrides are "
                                 "written without dashes: train.num_iterations=5"),
              std::string::npos)
        << dashed.output;
  }
  const ProgramRun no_value = run("train --recipe r.toml --optim.embedding_lr");
  EXPECT_NE(no_value.output.find("written without dashes: optim.embedding_lr=VALUE"), std::string::npos)
      << no_value.output;
  const ProgramRun no_overrides = run("report --train.num_iterations=5 run");  // takes no recipe
  EXPECT_EQ(no_overrides.exit_code, 2);
  EXPECT_EQ(no_overrides.output.find("recipe overrides"), std::string::npos) << no_overrides.output;
  const ProgramRun missing = run("parity --out y.h5");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("exactly one of --case"), std::string::npos) << missing.output;
}

// Every numeric flag is checked against its range before the command does anything: the probe's values
// (SIGSEGV with 100000 threads, bad_alloc with a 10^8-row eval batch, an internal check with --seq 10^11, NaN
// temperatures, negative counts accepted) each give one line naming the flag, its value and the range.
TEST(Cli, OutOfRangeFlagsAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bench step --threads 100000", "--threads 100000: must be in [0, 1024] (0: all cores)"},
      {"eval --checkpoint x --data y --eval-batch 100000000",
       "--eval-batch 100000000: must be in [1, 1048576]"},
      {"eval --checkpoint x --data y --eval-tokens -5", "--eval-tokens -5: must be in [1, "},
      {"bench loader --seq 100000000000", "--seq 100000000000: must be in [2, 1048576]"},
      {"sample --checkpoint x --temperature nan", "--temperature nan: must be in [0, 1000000]"},
      {"sample --checkpoint x --top-k -5", "--top-k -5: must be in [0, 16777216] (0: all)"},
      {"sample --checkpoint x --max-tokens 0", "--max-tokens 0: must be in [1, 1048576]"},
      {"train --recipe r --run-dir d --stop-at-step 0", "--stop-at-step 0: must be in [1, 1000000000000]"},
      {"train --recipe r --run-dir d --stop-at-step -5", "--stop-at-step -5: must be in"},
      {"prep --input x --tokenizer t --out o --shard-tokens 0", "--shard-tokens 0: must be in [1, "},
      {"bench step --depth 1000000", "--depth 1000000: must be in [1, 1000]"},
  };
  for (const auto& [arguments, expected] : cases) {
    const ProgramRun result = run(arguments);
    EXPECT_EQ(result.exit_code, 1) << arguments << "\n" << result.output;
    EXPECT_NE(result.output.find(expected), std::string::npos) << arguments << "\n" << result.output;
  }
}

// launch's flags are checked before an agent starts (docs/launch.md): each error names the flag, what it got
// and the form expected; only launch takes a command after `--`, and only `train` is restarted.
TEST(Cli, LaunchFlagsAreCheckedBeforeAnythingStarts) {
  const std::string endpoint = "--rdzv-endpoint 127.0.0.1:29400";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"launch --nnodes 3:2 " + endpoint + " -- train", "--nnodes \"3:2\": expected MIN:MAX (or N)"},
      {"launch --nnodes 0 " + endpoint + " -- train", "--nnodes \"0\": expected MIN:MAX"},
      {"launch --nnodes 2:x " + endpoint + " -- train", "--nnodes \"2:x\": expected MIN:MAX"},
      {"launch --nnodes 2 --rdzv-endpoint node1 -- train", "--rdzv-endpoint \"node1\": expected HOST:PORT"},
      {"launch --nnodes 2 --rdzv-endpoint node1:65535 -- train", "PORT in [1, 65534]"},
      {"launch --nnodes 2 -- train", "--nnodes and --rdzv-endpoint are both required"},
      {"launch --nnodes 2 " + endpoint, "no command for the ranks: end the flags with `--`"},
      {"launch --nnodes 2 " + endpoint + " -- sample --checkpoint x",
       "the command after `--` must begin with train"},
      {"launch --nnodes 2 " + endpoint + " --max-restarts -1 -- train", "--max-restarts -1: must be in [0, "},
      {"launch --nnodes 2 " + endpoint + " --nproc-per-node -1 -- train",
       "--nproc-per-node -1: must be in [0, 1024]"},
      {"launch --nnodes 2 " + endpoint + " --stop-grace -1 -- train",
       "--stop-grace -1: must be in [0, 3600]"},
  };
  for (const auto& [arguments, expected] : cases) {
    const ProgramRun result = run(arguments);
    EXPECT_EQ(result.exit_code, 1) << arguments << "\n" << result.output;
    EXPECT_NE(result.output.find(expected), std::string::npos) << arguments << "\n" << result.output;
  }
  const ProgramRun dashes = run("train --recipe r.toml --run-dir d -- x");
  EXPECT_EQ(dashes.exit_code, 2);
  EXPECT_NE(dashes.output.find("unexpected '--' (only launch takes a command after it)"), std::string::npos)
      << dashes.output;
}

// The ranks' recipe is read as train reads it (the file, then the overrides after `--`): a machine count in
// MIN:MAX whose world size its batch does not divide is refused before an agent starts, not by the ranks of
// a round on it (which the agents took for a failure and re-formed on until --max-restarts).
TEST(Cli, LaunchRefusesAWorldSizeTheBatchDoesNotDivide) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "launch_batch_split";
  std::filesystem::create_directories(dir);
  const std::string recipe = (dir / "r.toml").string();
  // 4096 tokens: 2 micro-batches of 8 x 256, which 1 and 2 ranks divide, 3 do not.
  std::ofstream(recipe) << "[model]\ndepth = 4\nmax_seq_len = 256\n"
                        << "[data]\ntrain = \"x\"\nval = \"x\"\ntokenizer = \"x\"\n"
                        << "[train]\ndevice_batch_size = 8\ntotal_batch_size = 4096\n";
  // No secret: an agent that passes the check stops at once, before any rendezvous.
  const auto launch = [](const std::string& arguments) {
    return nanoforge::test::run_command("env -u NANOFORGE_RENDEZVOUS_SECRET -u SLURM_JOB_ID " +
                                        std::string(nanoforge::test::nanoforge_binary()) +
                                        " launch --rdzv-endpoint 127.0.0.1:29400 --join-timeout 1 " +
                                        arguments + " 2>&1");
  };
  const std::string refused_message =
      "--nnodes 2:3 with --nproc-per-node 1: train.total_batch_size 4096 does not divide on 3 machines "
      "(world "
      "size 3): it divides on world sizes 1, 2 (up to 64); choose MIN:MAX so that every count x 1 is among "
      "those (e.g. --nnodes 2:2), or set train.total_batch_size to a multiple of device_batch_size 8 x "
      "max_seq_len 256 x 6 = 12288";
  for (const std::string& form : {"--recipe " + recipe, "--recipe=" + recipe}) {
    const ProgramRun refused =
        launch("--nnodes 2:3 -- train " + form + " --run-dir " + dir.string() + "/run");
    EXPECT_EQ(refused.exit_code, 1) << refused.output;
    EXPECT_NE(refused.output.find("nanoforge launch: error: " + refused_message), std::string::npos)
        << refused.output;
  }
  // An override that makes it divide on 2 and 3 ranks passes the check (the agent then wants the secret).
  const ProgramRun divides = launch("--nnodes 2:3 -- train --recipe " + recipe + " --run-dir " +
                                    dir.string() + "/run train.total_batch_size=12288");
  EXPECT_EQ(divides.exit_code, 1) << divides.output;
  EXPECT_EQ(divides.output.find("does not divide"), std::string::npos) << divides.output;
  EXPECT_NE(divides.output.find("NANOFORGE_RENDEZVOUS_SECRET"), std::string::npos) << divides.output;
  // train.total_batch_size -1: the power law's batch on the recipe's tokenizer, 2^k tokens, never on 3 ranks.
  const ProgramRun power_law = launch("--nnodes 2:3 -- train --recipe " + recipe + " --run-dir " +
                                      dir.string() + "/run train.total_batch_size=-1 data.tokenizer=" +
                                      nanoforge::test::source_path("tests/data/tokenizer/golden"));
  EXPECT_EQ(power_law.exit_code, 1) << power_law.output;
  EXPECT_NE(power_law.output.find("train.total_batch_size -1 (nanochat's power law: "), std::string::npos)
      << power_law.output;
  EXPECT_NE(power_law.output.find("does not divide on 3 machines (world size 3)"), std::string::npos)
      << power_law.output;
  // A head agent starts no rank: no recipe is read.
  const ProgramRun head = launch("--nnodes 2:3 --nproc-per-node 0 -- train --recipe " + recipe);
  EXPECT_EQ(head.output.find("does not divide"), std::string::npos) << head.output;
  EXPECT_NE(head.output.find("NANOFORGE_RENDEZVOUS_SECRET"), std::string::npos) << head.output;
  // A recipe that does not load: the launch fails with train's own error.
  const std::string missing = (dir / "missing.toml").string();
  const ProgramRun train = run("train --recipe " + missing + " --run-dir " + dir.string() + "/run");
  const std::string train_error = train.output.substr(train.output.find("error: "));
  const ProgramRun not_loaded =
      launch("--nnodes 2:3 -- train --recipe " + missing + " --run-dir " + dir.string() + "/run");
  EXPECT_EQ(not_loaded.exit_code, 1) << not_loaded.output;
  EXPECT_NE(not_loaded.output.find("nanoforge launch: " + train_error), std::string::npos)
      << not_loaded.output << "\ntrain: " << train.output;
  EXPECT_NE(train_error.find(missing), std::string::npos) << train.output;
}

// The probe's `--recipe DIR` read as an empty recipe.
TEST(Cli, ARecipeThatIsADirectoryIsNamed) {
  const ProgramRun result = run("train --recipe /tmp --run-dir /tmp/nanoforge_never");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("/tmp: the recipe must be a TOML file, not a directory"), std::string::npos)
      << result.output;
}

// A batch in range that does not fit in memory is refused before anything is allocated, with the flag named.
TEST(Cli, ABenchBatchThatDoesNotFitInMemoryIsRefused) {
  const ProgramRun result = run("bench step --depth 4 --seq 4096 --batch 500000 --vocab 65536");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("--batch 500000"), std::string::npos) << result.output;
}

TEST(Cli, ParityOnAMissingFileNamesIt) {
  const ProgramRun missing = run("parity --case /nonexistent/case.h5 --out /tmp/never.h5");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("/nonexistent/case.h5: no such file"), std::string::npos) << missing.output;
}

TEST(Cli, ParityMatchesACommittedCase) {
  const std::string dev_case = nanoforge::test::source_path("tests/parity/golden/model_gqa_windows.h5");
  const std::string out =
      (std::filesystem::temp_directory_path() / ("nanoforge_cli_" + std::to_string(getpid()) + ".h5"))
          .string();
  const ProgramRun parity = run("parity --case " + dev_case + " --out " + out);
  EXPECT_EQ(parity.exit_code, 0) << parity.output;
  EXPECT_NE(parity.output.find("all 31 tensors match"), std::string::npos) << parity.output;
  EXPECT_TRUE(std::filesystem::exists(out));
  std::filesystem::remove(out);
}

// `--out` naming the case itself replaced the golden file (its expected values gone) before comparing.
TEST(Cli, ParityRefusesToWriteOverItsCase) {
  const std::string golden = nanoforge::test::source_path("tests/parity/golden/model_gqa_windows.h5");
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "parity_case";
  std::filesystem::create_directories(dir);
  const std::filesystem::path copy = dir / "case.h5";
  std::filesystem::copy_file(golden, copy, std::filesystem::copy_options::overwrite_existing);
  const auto bytes = [](const std::filesystem::path& path) {
    std::ifstream file(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(file), {});
  };
  const std::string before = bytes(copy);
  const ProgramRun parity = run("parity --case " + copy.string() + " --out " + dir.string() + "/./case.h5");
  EXPECT_EQ(parity.exit_code, 1) << parity.output;
  EXPECT_NE(parity.output.find("is the --case file itself"), std::string::npos) << parity.output;
  EXPECT_EQ(bytes(copy), before);
}

// A rename over a device or a pipe replaces it (as root, `--out /dev/full` replaced /dev/full): refused
// before any work, for parity's --out and the benches' --json-out. A pipe stands in for the device here.
TEST(Cli, ResultsAreNeverRenamedOverAPipeOrDevice) {
  const std::filesystem::path pipe = std::filesystem::temp_directory_path() / "results_pipe";
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  const std::string golden = nanoforge::test::source_path("tests/parity/golden/model_gqa_windows.h5");
  for (const std::string& command :
       {"parity --case " + golden + " --out " + pipe.string(),
        "bench step --depth 1 --seq 32 --batch 2 --vocab 128 --steps 1 --warmup 0 --threads 1 --json-out " +
            pipe.string()}) {
    const ProgramRun result = run(command);
    EXPECT_EQ(result.exit_code, 1) << command << "\n" << result.output;
    EXPECT_NE(result.output.find(pipe.string() + " is a pipe, not a regular file"), std::string::npos)
        << command << "\n"
        << result.output;
    EXPECT_TRUE(std::filesystem::is_fifo(pipe)) << command;
  }
}

TEST(Cli, BenchStepEndsWithAJsonLine) {
  const ProgramRun bench =
      run("bench step --depth 1 --seq 32 --batch 2 --vocab 128 --steps 2 --warmup 1 --threads 1");
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  const size_t last_line = bench.output.rfind('\n', bench.output.size() - 2);
  const std::string json = bench.output.substr(last_line + 1);
  EXPECT_EQ(json.front(), '{') << json;
  for (const char* key :
       {"\"tokens_per_s\"", "\"gflops\"", "\"threads\": 1", "\"backend\": \"cpu\"", "\"seq\": 32"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " not in " << json;
  }
  const ProgramRun bad = run("bench step --depth 0");
  EXPECT_EQ(bad.exit_code, 1);
}

// The performance model runs without a GPU in any build: the d20 table on 8 H200s, then its JSON line.
TEST(Cli, BenchStepModelOnlyPredictsWithoutAGpu) {
  const ProgramRun model =
      run("bench step --device cuda --model-only --gpu h200 --depth 20 --seq 2048 --batch 32 --world 8");
  ASSERT_EQ(model.exit_code, 0) << model.output;
  for (const char* text :
       {"attention_backward", "reduce_scatter", "all_gather", "muon_nesterov_momentum", "tokens/s", "MFU"}) {
    EXPECT_NE(model.output.find(text), std::string::npos) << text << " not in " << model.output;
  }
  const size_t last_line = model.output.rfind('\n', model.output.size() - 2);
  const std::string json = model.output.substr(last_line + 1);
  for (const char* key :
       {"\"model_only\": true", "\"gpu\": \"h200\"", "\"world_size\": 8", "\"mfu_percent\"", "\"step_ms\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " not in " << json;
  }
}

TEST(Cli, BenchStepModelFlagsAreChecked) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bench step --device cuda --model-only --depth 4", "--model-only needs --gpu h200|h100|gb10, got ''"},
      {"bench step --device cuda --model-only --gpu a100",
       "--model-only needs --gpu h200|h100|gb10, got 'a100'"},
      {"bench step --model-only --gpu h200", "--model-only predicts the CUDA backend: use --device cuda"},
      {"bench step --device cuda --model-only --gpu h200 --profile", "--profile times a real step"},
      {"bench step --world 8", "--world belongs to the performance model: add --model-only"},
      {"bench step --peak-tflops 100", "--peak-tflops belongs to the performance model"},
      {"bench step --device cuda --model-only --gpu gb10 --world 0", "--world 0: must be in [1, 65536]"},
  };
  for (const auto& [arguments, message] : cases) {
    const ProgramRun result = run(arguments);
    EXPECT_NE(result.exit_code, 0) << arguments;
    EXPECT_NE(result.output.find(message), std::string::npos) << arguments << ": " << result.output;
  }
}

}  // namespace
