// What the tests of `nanoforge report` share (test_report.cpp, test_report_page.cpp): running the program
// under a time and memory bound, and run directories made to order.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/program_run.h"
#include "tests/test_paths.h"

namespace nanoforge::test {

// Programs under AddressSanitizer or ThreadSanitizer reserve terabytes of address space: no `ulimit -v`.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// `nanoforge report ARGUMENTS`, stdout and stderr, ended after 60 s (a report of these runs takes
// milliseconds) and, where no sanitizer forbids it, with 4 GiB of address space (the probe's bad_alloc).
inline ProgramRun report(const std::string& arguments, const std::string& user = "") {
  const std::string limit = kSanitized ? "" : "ulimit -v 4194304; ";
  return run_command(limit + user + "timeout -k 5 60 " + nanoforge_binary() + " report " + arguments +
                     " 2>&1");
}

inline void write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string read(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), {}};
}

// An empty folder under the test's temporary directory (emptied first: a test may run twice in one process).
inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A run directory as training leaves it: records, config, a checkpoint, a CORE result.
inline std::filesystem::path make_run(const std::string& name) {
  const std::filesystem::path run = fresh_dir(name);
  write(run / "metrics.jsonl",
        "{\"step\": 1, \"loss\": 3.5, \"lr_multiplier\": 1, \"grad_norm\": 0.9, \"tokens_per_s\": 1000}\n"
        "{\"step\": 2, \"loss\": 3.25, \"lr_multiplier\": 1, \"grad_norm\": 0.8, \"tokens_per_s\": 1100}\n"
        "{\"step\": 2, \"val_bpb\": 1.5}\n"
        "{\"step\": 2, \"sample\": \"And God said\"}\n");
  write(run / "config.toml", "[train]\nnum_iterations = 2\n");
  write(run / "core.json",
        "{\"step\": 2, \"core_metric\": 0.05, \"centered_results\": {\"hellaswag\": 0.1}}");
  write(run / "checkpoints" / "latest", "step_000002\n");
  write(run / "checkpoints" / "step_000002" / "model.h5", "the run's weights");
  return run;
}

}  // namespace nanoforge::test
