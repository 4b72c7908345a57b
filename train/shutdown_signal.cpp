// The handlers: only async-signal-safe work (an atomic store, _exit).
#include "train/shutdown_signal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace nanoforge {
namespace {

std::atomic<int> requested_signal{0};

void on_signal(int signal_number) {
  if (requested_signal.exchange(signal_number) != 0) _exit(128 + signal_number);
  static const char message[] = "\nnanoforge: stopping after this step (a second signal stops at once)\n";
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, message, sizeof(message) - 1);
}

}  // namespace

void install_shutdown_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int shutdown_requested() {
  return requested_signal.load();
}

}  // namespace nanoforge
