// Flags shared by several commands (absl flags are process-wide, so each is defined once, here).
#include "train/common_flags.h"

#include <absl/flags/flag.h>

ABSL_FLAG(int32_t, threads, 0,
          "CPU threads for the ops and BLAS (0: OpenMP's default, OMP_NUM_THREADS or all cores)");
