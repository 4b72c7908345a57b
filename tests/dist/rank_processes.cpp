// Ranks as processes: fork, a clean launch environment, output to a file, waitpid polled every 10 ms until
// each has exited or the hard limit has passed (then SIGKILL: a stalled victim or a hang).
#include "tests/dist/rank_processes.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace nanoforge::test {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::vector<std::string> torchrun_environment(int rank, int world, int port) {
  return {"RANK=" + std::to_string(rank),
          "WORLD_SIZE=" + std::to_string(world),
          "LOCAL_RANK=" + std::to_string(rank),
          "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(port),
          "NANOFORGE_RENDEZVOUS_SECRET=rank-processes-test-secret-0123456789"};
}

std::vector<RankRun> run_processes(const std::vector<std::vector<std::string>>& environments,
                                   const std::vector<std::string>& arguments, int victim,
                                   double hard_limit_seconds) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  for (size_t i = 0; i < environments.size(); ++i) {
    std::string path = (std::filesystem::temp_directory_path() / "nanoforge_rank_output_XXXXXX").string();
    const int fd = ::mkstemp(path.data());
    outputs.push_back(path);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      for (const char* name :
           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID",
            "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", "SLURM_JOB_ID", "RANK", "WORLD_SIZE",
            "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"})
        ::unsetenv(name);
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);  // Open MPI refuses root (CI containers) without these
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
      for (const std::string& variable : environments[i])
        ::putenv(const_cast<char*>(variable.c_str()));
      exec_arguments(arguments);
    }
    ::close(fd);
    pids.push_back(pid);
  }
  std::vector<RankRun> runs(pids.size());
  size_t running = pids.size();
  auto waiting_for = [&] {
    return running - (victim >= 0 && !runs[static_cast<size_t>(victim)].exited ? 1 : 0);
  };
  while (waiting_for() > 0) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (size_t i = 0; i < pids.size(); ++i) {
      if (runs[i].exited) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        runs[i].exited = true;
        runs[i].seconds = seconds;
        if (WIFEXITED(status)) runs[i].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) runs[i].signal = WTERMSIG(status);
        --running;
      }
    }
    if (seconds > hard_limit_seconds) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (!runs[i].exited) {
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
    }
    runs[i].output = read_file(outputs[i]);
    ::unlink(outputs[i].c_str());
  }
  return runs;
}

void exec_arguments(const std::vector<std::string>& arguments) {
  std::vector<char*> argv;
  for (const std::string& argument : arguments)
    argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

bool names_rank(const std::string& output, int rank) {
  const std::regex named("(^|\\n)nanoforge[^\\n]*: rank \\d+: [^\\n]*rank " + std::to_string(rank) +
                         "[ :)(,]");
  return std::regex_search(output, named);
}

std::string describe(const std::vector<RankRun>& runs) {
  std::string text;
  for (size_t rank = 0; rank < runs.size(); ++rank) {
    text += "--- rank " + std::to_string(rank) + (runs[rank].exited ? "" : " (killed at the hard limit)") +
            ", exit " + std::to_string(runs[rank].exit_code) + ", signal " +
            std::to_string(runs[rank].signal) + " after " + std::to_string(runs[rank].seconds) + " s:\n" +
            runs[rank].output;
  }
  return text;
}

}  // namespace nanoforge::test
