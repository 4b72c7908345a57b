// SIGTERM / SIGINT for the commands that must not leave half-written files (train, prep, tokenizer train). A
// signal either ends the process at once, status 128 + signal (start-up, which cannot be cut short; tokenizer
// train, which has nothing to resume), or asks it to stop at its next safe point, which it polls with
// stop_signal(); a second signal then ends it at once. Between begin_publishing and end_publishing an exit
// waits for the end of the publication, so that no file is half-written.
#pragma once

namespace nanoforge {

enum class OnStopSignal {
  kExit,       // end the process at once
  kAskToStop,  // record the signal for stop_signal(); a second one ends the process
};

// What a signal writes to stderr, each a string literal (a signal handler may only write it); nullptr for a
// mode the command never uses.
struct StopSignalMessages {
  const char* exiting;        // kExit
  const char* asked_to_stop;  // kAskToStop: the first signal
  const char* second_signal;  // kAskToStop: a second signal, which ends the process
};

// Installs the handlers (again where a runtime, as MPI's, may have replaced them), forgetting any earlier
// signal. `messages` must live as long as the process (a constant).
void install_stop_handlers(OnStopSignal on_signal, const StopSignalMessages& messages);
// From here on a signal does `on_signal`.
void set_on_stop_signal(OnStopSignal on_signal);
// The signal that asked for a stop, or 0.
int stop_signal();
// Between these, a signal's exit waits for end_publishing (which then exits with 128 + signal).
void begin_publishing();
void end_publishing();

}  // namespace nanoforge
