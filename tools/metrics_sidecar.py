#!/usr/bin/env python3
"""Forward a run's metrics.jsonl to Weights & Biases and TensorBoard while it trains, as a process of its own.

    metrics_sidecar.py RUN_DIR [--parent-pid PID]

Started by the trainer on rank 0 (train/metrics_sidecar.cpp), which never waits for it; it forwards what the
run's config.toml [log] asks, never a step twice (RUN_DIR/.sidecar_state.json), and stops after the last record
when sent SIGTERM or when its parent is gone. Exit status 3: nothing it can forward. docs/watching.md says
what it forwards and how it resumes; docs/untrusted-input.md, what it does with a hostile run directory.
"""

import argparse
import fcntl
import json
import math
import os
import resource
import signal
import sys
import time

from sidecar_files import RunFileRefused, log, open_run_file, warn
from sidecar_records import MAX_RECORD_BYTES, MAX_STEP, MetricsFollower, scalars_of
from sidecar_sinks import open_sinks

POLL_SECONDS = 0.5
CANNOT_FORWARD = 3  # the trainer does not restart a sidecar that exits with this
STATE_FILE = ".sidecar_state.json"
LOCK_FILE = ".sidecar.lock"  # flock'ed by the sidecar at work on the directory, which writes its pid in it


class ForwardedState:
    """The newest (step, kinds at that step) forwarded, kept in RUN_DIR/.sidecar_state.json."""

    def __init__(self, run_dir):
        self.path = os.path.join(run_dir, STATE_FILE)
        self.step, self.kinds = -1, []
        try:
            with os.fdopen(open_run_file(self.path, os.O_RDONLY), "rb") as f:
                saved = json.loads(f.read(MAX_RECORD_BYTES))
            if type(saved["step"]) is int and -1 <= saved["step"] <= MAX_STEP and isinstance(saved["kinds"], list):
                self.step, self.kinds = saved["step"], [str(kind) for kind in saved["kinds"]]
        except RunFileRefused as refused:
            warn(f"{refused}, not the sidecar's own state: it is replaced; metrics.jsonl is forwarded from its start")
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            pass

    def forget(self):
        self.step, self.kinds = -1, []

    def is_new(self, step, kind):
        return step > self.step or (step == self.step and kind not in self.kinds)

    def add(self, step, kind):
        if step > self.step:
            self.step, self.kinds = step, []
        self.kinds.append(kind)

    def save(self, finished=False):
        if (self.step, len(self.kinds), finished) == getattr(self, "saved", None):
            return
        self.saved = (self.step, len(self.kinds), finished)
        temporary = self.path + ".partial"
        if os.path.lexists(temporary):
            os.remove(temporary)  # what a killed sidecar left, or a link planted there: never written through
        with os.fdopen(open_run_file(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as f:
            json.dump({"step": self.step, "kinds": self.kinds, "finished": finished, "pid": os.getpid()}, f)
        os.replace(temporary, self.path)


def send(sinks, follower, line, call):
    """call(sink) for each sink; what a sink fails on (its library's errors have no common base) is skipped
    with a warning naming the line, and the others still get it."""
    for sink in sinks:
        try:
            call(sink)
        except Exception as error:
            follower.skip(line, f"{type(sink).__name__} failed on it: {error!r:.200}")


class Forwarder:
    """Sends the records (line number, record, kind) not forwarded before, step by step in file order. The
    samples of a step are held until its last one is in (a record of another kind or step follows, or the run
    has ended), however the polls split them: each sink gets them once, as one update."""

    def __init__(self, sinks, state, follower):
        self.sinks, self.state, self.follower = sinks, state, follower
        self.samples, self.sample_kinds, self.sample_step, self.sample_line = [], [], None, 0

    def forward(self, records):
        for line, record, kind in records:
            step = record["step"]
            if self.samples and (step != self.sample_step or not kind.startswith("sample")):
                self.flush_samples()
            if not self.state.is_new(step, kind):
                continue
            if kind.startswith("sample"):
                self.samples.append(record["sample"])
                self.sample_kinds.append(kind)
                self.sample_step, self.sample_line = step, line
            else:
                values = {key: value for key, value in scalars_of(record, kind).items() if math.isfinite(value)}
                send(self.sinks, self.follower, line, lambda sink: sink.scalars(values, step))
                self.state.add(step, kind)

    def flush_samples(self):
        """Sends the samples held: at the end of their step's samples, and at the run's end."""
        if not self.samples:
            return
        texts, step = list(self.samples), self.sample_step
        send(self.sinks, self.follower, self.sample_line, lambda sink: sink.samples(texts, step))
        for kind in self.sample_kinds:
            self.state.add(step, kind)
        self.samples.clear()
        self.sample_kinds.clear()


def forward_scaling_table(run_dir, sinks):
    """`nanoforge bench scaling --json-out RUN_DIR/scaling.jsonl` records, as one table (JSON objects only)."""
    path = os.path.join(run_dir, "scaling.jsonl")
    rows = []
    try:
        with os.fdopen(open_run_file(path, os.O_RDONLY), "rb") as f:
            lines = f.read(MAX_RECORD_BYTES).splitlines()
    except RunFileRefused as refused:
        return warn(f"{refused}: the scaling table is not forwarded")
    for line in lines:
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict):
            rows.append(row)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    for sink in sinks:
        try:
            sink.table("scaling", columns, [[row.get(column) for column in columns] for row in rows])
        except Exception as error:  # as in send()
            warn(f"{path}: {type(sink).__name__} failed on the scaling table: {error!r:.200}")


def process_stopped(pid):
    """Whether process `pid` is stopped (SIGSTOP, or a debugger), from /proc/PID/stat's state field."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


def take_lock(run_dir, trainer_gone):
    """The run directory's lock (RUN/.sidecar.lock, with the holder's pid in it): one sidecar per directory,
    and one still draining an ended run is let finish first. A holder that is stopped is said once; if the
    trainer ends while it still is, this sidecar gives up (None): the holder, once it goes on, forwards what
    metrics.jsonl holds then."""
    path = os.path.join(run_dir, LOCK_FILE)
    lock = open_run_file(path, os.O_RDWR | os.O_CREAT)
    said = False
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            pass
        holder = os.pread(lock, 32, 0).decode("ascii", errors="replace").strip()
        if holder.isdigit() and process_stopped(int(holder)):
            if not said:
                warn(f"{path} is held by sidecar pid {holder}, which is stopped: nothing is forwarded until it "
                     f"goes on (kill -CONT {holder}: it forwards what it has and ends) or is ended (kill -9 {holder})")
                said = True
            if trainer_gone():
                log(f"the run ended while sidecar pid {holder} held {path}, stopped: giving up")
                os.close(lock)
                return None
        time.sleep(POLL_SECONDS)
    os.ftruncate(lock, 0)
    os.pwrite(lock, f"{os.getpid()}\n".encode(), 0)
    return lock


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--parent-pid", type=int, default=0, help="stop when this process is gone")
    args = parser.parse_args()
    ending = []
    signal.signal(signal.SIGTERM, lambda *_: ending.append(True))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # the trainer starts it with SIGTERM held
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the trainer, which ends the run cleanly

    def trainer_gone():
        return bool(ending) or bool(args.parent_pid and os.getppid() != args.parent_pid)

    try:
        lock = take_lock(args.run_dir, trainer_gone)
    except RunFileRefused as refused:
        warn(f"{refused}, not the sidecar's own lock: remove it (the sidecar makes its own); nothing is forwarded")
        return CANNOT_FORWARD
    if lock is None:
        return CANNOT_FORWARD
    sinks = open_sinks(args.run_dir)
    if not sinks:
        log("nothing to forward to (see the lines above, and the log.* recipe keys)")
        return CANNOT_FORWARD
    state = ForwardedState(args.run_dir)
    fresh = [sink.destination for sink in sinks if sink.fresh]
    if state.step >= 0 and fresh:  # the run directory emptied (rm -rf RUN/*) for a new run, its dot files kept
        log(f"{STATE_FILE} says step {state.step} was forwarded, but {' and '.join(fresh)} is new: forwarding "
            "metrics.jsonl from its start")
        state.forget()
    follower = MetricsFollower(os.path.join(args.run_dir, "metrics.jsonl"))
    forwarder = Forwarder(sinks, state, follower)
    log(f"forwarding {args.run_dir}/metrics.jsonl after step {state.step} (pid {os.getpid()})")
    scaling_forwarded = False
    while True:
        last_round = trainer_gone()
        forwarder.forward(follower.new_records())
        if last_round and not follower.behind:
            forwarder.flush_samples()  # the run's last records are in: nothing more of their step comes
        if not scaling_forwarded and os.path.exists(os.path.join(args.run_dir, "scaling.jsonl")):
            forward_scaling_table(args.run_dir, sinks)
            scaling_forwarded = True
        for sink in sinks:
            sink.flush()
        state.save()
        if follower.behind:
            continue  # the rest of a long metrics.jsonl, at once (and all of it in the last round)
        if last_round:
            break
        time.sleep(POLL_SECONDS)
    for sink in sinks:
        sink.close()
    state.save(finished=True)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    log(f"done: forwarded through step {state.step}; {usage.ru_utime + usage.ru_stime:.1f} s of CPU")
    os.close(lock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
