// The handlers: only async-signal-safe work (atomics, write, _exit).
#include "train/shutdown_signal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace nanoforge {
namespace {

std::atomic<int> requested_signal{0};
std::atomic<bool> graceful{false};

void say(const char* message, size_t length) {
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, message, length);
}

void on_signal(int signal_number) {
  if (!graceful.load()) {
    static const char message[] =
        "\nnanoforge: signal during start-up: exiting now (no step was trained by this process)\n";
    say(message, sizeof(message) - 1);
    _exit(128 + signal_number);
  }
  if (requested_signal.exchange(signal_number) != 0) {
    static const char message[] =
        "\nnanoforge: second signal: exiting now (checkpoints/latest still names the last complete "
        "checkpoint)\n";
    say(message, sizeof(message) - 1);
    _exit(128 + signal_number);
  }
  static const char message[] = "\nnanoforge: stopping after this step (a second signal stops at once)\n";
  say(message, sizeof(message) - 1);
}

}  // namespace

void install_shutdown_handlers() {
  graceful.store(false);
  requested_signal.store(0);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

void begin_graceful_shutdown() {
  graceful.store(true);
}

int shutdown_requested() {
  return requested_signal.load();
}

}  // namespace nanoforge
