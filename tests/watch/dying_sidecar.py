#!/usr/bin/env python3
"""A metrics sidecar that dies the first time it starts in a run directory (SIGKILL, as a crash or the OOM
killer would end it) and is tools/metrics_sidecar.py from then on: test_watching.py's killed_and_resumed
case points NANOFORGE_METRICS_SIDECAR here to see the trainer go on and restart it."""

import os
import signal
import sys

run_dir = sys.argv[1]
marker = os.path.join(run_dir, "dying_sidecar_died")
if not os.path.exists(marker):
    open(marker, "w").close()
    os.kill(os.getpid(), signal.SIGKILL)
real = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "metrics_sidecar.py")
os.execv(sys.executable, [sys.executable, "-u", real] + sys.argv[1:])
