// The handlers: atomics, write and _exit only (async-signal-safe).
#include "support/stop_signal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace nanoforge {
namespace {

std::atomic<int> requested{0};
std::atomic<OnStopSignal> mode{OnStopSignal::kExit};
std::atomic<const StopSignalMessages*> said{nullptr};
std::atomic<bool> publishing{false};

void say(const char* message) {
  if (message == nullptr) return;
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, message, std::strlen(message));
}

void on_signal(int signal_number) {
  const int previous = requested.exchange(signal_number);
  const StopSignalMessages& messages = *said.load();
  if (publishing.load()) {
    say("\nnanoforge: signal: exiting once the files being published are complete\n");
    return;
  }
  if (mode.load() == OnStopSignal::kExit) {
    say(messages.exiting);
    _exit(128 + signal_number);
  }
  if (previous != 0) {
    say(messages.second_signal);
    _exit(128 + signal_number);
  }
  say(messages.asked_to_stop);
}

}  // namespace

void install_stop_handlers(OnStopSignal on_signal_mode, const StopSignalMessages& messages) {
  said.store(&messages);
  mode.store(on_signal_mode);
  requested.store(0);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

void set_on_stop_signal(OnStopSignal on_signal_mode) {
  mode.store(on_signal_mode);
}

int stop_signal() {
  return requested.load();
}

void begin_publishing() {
  publishing.store(true);
}

void end_publishing() {
  publishing.store(false);
  if (const int signal_number = requested.load(); signal_number != 0 && mode.load() == OnStopSignal::kExit)
    _exit(128 + signal_number);
}

}  // namespace nanoforge
