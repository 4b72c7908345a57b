"""The parts of tools/dev/make_nanochat_goldens.py: nanochat's checkout, the model cases, the optimizer goldens,
the file layout they share and the comparison of --verify."""

import sys


def fail(message):
    sys.exit(f"make_nanochat_goldens: {message}")
