"""What every part of the metrics sidecar (tools/metrics_sidecar.py) shares: its console lines, of which the
trainer repeats those starting "warning:", and opening its own files in the run directory, which nothing in
the run directory is trusted to be (docs/untrusted-input.md)."""

import errno
import os
import stat


def log(message):
    print(f"metrics sidecar: {message}", flush=True)


def warn(message):
    """A line the trainer repeats on its console while it runs (train/metrics_sidecar.cpp)."""
    print(f"warning: metrics sidecar: {message}", flush=True)


class RunFileRefused(Exception):
    """One of the sidecar's own files in the run directory is a symbolic link or not a regular file."""


def open_run_file(path, flags):
    """A descriptor of the sidecar's own file `path`, never opened through a symbolic link (O_NOFOLLOW) nor
    blocking on a FIFO (O_NONBLOCK); RunFileRefused when it is either, or anything but a regular file with one
    name (a hard link would have another file read as its own, or truncated as the lock is)."""
    try:
        descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RunFileRefused(f"{path} is a symbolic link") from None
        raise
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode) or status.st_nlink != 1:
        os.close(descriptor)
        raise RunFileRefused(f"{path} is not a regular file" if not stat.S_ISREG(status.st_mode)
                             else f"{path} has {status.st_nlink} names (hard links to one file)")
    return descriptor
