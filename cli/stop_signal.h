// SIGTERM / SIGINT for the commands that write data sets and tokenizers (prep, tokenizer train). prep asks
// stop_requested() between documents and stops with its finished shards recorded (resumable); a second
// signal ends it at once, which its records survive as they survive SIGKILL. tokenizer train has nothing to
// resume: a signal ends it at once, except while it publishes its files, where the exit waits for the end of
// the publication so that a tokenizer is never half-written.
#pragma once

namespace nanoforge {

void install_stop_handlers();
// The signal that asked for a stop, or 0 (prep).
int stop_signal();
// Between these, a signal's exit waits for end_publishing (which then exits with 128 + signal).
void begin_publishing();
void end_publishing();
// Signals exit at once (tokenizer train) instead of asking for a stop.
void stop_at_once();

}  // namespace nanoforge
