// SIGTERM / SIGINT during training (Slurm preemption, Ctrl-C): the first signal asks the loop to finish the
// current step, save a checkpoint and exit 0; a second signal exits at once (status 128 + signal).
#pragma once

namespace nanoforge {

void install_shutdown_handlers();
// The signal that asked for a stop, or 0.
int shutdown_requested();

}  // namespace nanoforge
