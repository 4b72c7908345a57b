// The handlers: atomics, write and _exit only (async-signal-safe).
#include "cli/stop_signal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace nanoforge {
namespace {

std::atomic<int> requested{0};
std::atomic<bool> at_once{false}, publishing{false};

void say(const char* message, size_t length) {
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, message, length);
}

void on_signal(int signal_number) {
  const int previous = requested.exchange(signal_number);
  if (publishing.load()) {
    static const char message[] =
        "\nnanoforge: signal: exiting once the files being published are complete\n";
    say(message, sizeof(message) - 1);
    return;
  }
  if (at_once.load() || previous != 0) {
    static const char message[] = "\nnanoforge: signal: exiting now (nothing half-written is published)\n";
    say(message, sizeof(message) - 1);
    _exit(128 + signal_number);
  }
  static const char message[] =
      "\nnanoforge: stopping at the next document (a second signal stops at once)\n";
  say(message, sizeof(message) - 1);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int stop_signal() {
  return requested.load();
}

void begin_publishing() {
  publishing.store(true);
}

void end_publishing() {
  publishing.store(false);
  if (const int signal_number = requested.load(); signal_number != 0 && at_once.load())
    _exit(128 + signal_number);
}

void stop_at_once() {
  at_once.store(true);
}

}  // namespace nanoforge
