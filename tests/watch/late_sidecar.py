#!/usr/bin/env python3
"""A metrics sidecar whose Python starts later than the run ends, as on a loaded machine: it waits for the
trainer to exit (which sends it SIGTERM first), then becomes tools/metrics_sidecar.py. Tests point
NANOFORGE_METRICS_SIDECAR here to see such a run forwarded whole, and to wait for the sidecar that forwards
it rather than for the state an earlier sidecar of the run directory left."""

import os
import sys
import time

parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.05)
real = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "metrics_sidecar.py")
os.execv(sys.executable, [sys.executable, "-u", real] + sys.argv[1:])
