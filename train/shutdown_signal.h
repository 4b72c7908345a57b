// SIGTERM / SIGINT during training (Slurm preemption, Ctrl-C). During start-up — reading data, opening or
// verifying checkpoints, building the model, none of which can be cut short — a signal ends the process at
// once: there is nothing to save. Once the loop runs, the first signal asks it to finish the current step,
// save a checkpoint and exit 0; a second signal exits at once (status 128 + signal).
#pragma once

namespace nanoforge {

// Installs the handlers, in start-up mode.
void install_shutdown_handlers();
// From here on the first signal asks for a stop after the current step.
void begin_graceful_shutdown();
// The signal that asked for a stop, or 0.
int shutdown_requested();

}  // namespace nanoforge
