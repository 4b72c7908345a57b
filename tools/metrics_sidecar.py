#!/usr/bin/env python3
"""Forward a run's metrics.jsonl to Weights & Biases and TensorBoard while it trains, as a process of its own.

    metrics_sidecar.py RUN_DIR [--parent-pid PID]

The trainer (train/metrics_sidecar.cpp) starts it on rank 0 and never waits for it: it follows the file by
itself, so a slow or dead sidecar costs training nothing. What to forward comes from the run's own
config.toml ([log]). It stops after forwarding the last record when sent SIGTERM (the trainer's end) or
when its parent is gone. RUN_DIR/.sidecar_state.json holds the last record forwarded, so a restarted or
resumed sidecar never sends a step twice: the first record of a (step, kind) wins, as W&B's history can only
grow (a resumed run retrains the same losses; docs/watching.md). Exit status 3: nothing it can forward.
Nothing in the run directory is trusted (docs/untrusted-input.md): a record it cannot forward is skipped with a
warning, its own files are never opened through a symbolic link or as a FIFO, and lines starting "warning:"
are the ones the trainer repeats on its console.
"""

import argparse
import errno
import fcntl
import json
import math
import os
import re
import resource
import secrets
import signal
import stat
import string
import sys
import time
import tomllib

POLL_SECONDS = 0.5
CANNOT_FORWARD = 3  # the trainer does not restart a sidecar that exits with this
STATE_FILE = ".sidecar_state.json"
LOCK_FILE = ".sidecar.lock"  # flock'ed by the sidecar at work on the directory, which writes its pid in it
WANDB_ID_FILE = "wandb_run_id"
# What wandb_run_id may hold: the ids this sidecar makes ([a-z0-9]{8}) and those W&B shows, never a path.
WANDB_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_STEP = 10**12  # the recipe's limit on steps (train/recipe.cpp, docs/untrusted-input.md)
MAX_RECORD_BYTES = 1 << 20  # a metrics.jsonl line; the trainer's longest (a sample) is a few kB
READ_BYTES_PER_ROUND = 16 << 20
MAX_RECORD_WARNINGS = 20  # then the lines not forwarded are skipped without a word

# metrics.jsonl field -> the name it is logged under (W&B panels and TensorBoard tags group by the prefix).
TRAINING_FIELDS = {
    "loss": "train/loss",
    "lr_multiplier": "train/lr_multiplier",
    "grad_norm": "train/grad_norm",
    "tokens_per_s": "train/tokens_per_s",
    "mfu": "train/mfu_percent",
    "step_ms": "time/step_ms",
    "exposed_comm_ms": "time/exposed_comm_ms",
    "data_wait_ms": "time/data_wait_ms",
    "elapsed_s": "time/elapsed_s",
}


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


def record_kind(record):
    """What a metrics.jsonl record is: one of each kind per step, except samples (numbered in the step)."""
    for field, kind in (("loss", "train"), ("val_bpb", "val"), ("core_metric", "core"), ("sample", "sample"),
                        ("checkpoint_ms", "checkpoint")):
        if field in record:
            return kind
    return None


def fields_of(record, kind):
    """The fields of one record that are forwarded as numbers."""
    if kind == "train":
        return [field for field in TRAINING_FIELDS if field in record]
    if kind == "core":
        return [key for key in record if key == "core_metric" or key.startswith("core/")]
    return {"val": ["val_bpb"], "checkpoint": ["checkpoint_ms"]}.get(kind, [])


def record_problem(record, kind):
    """Why a record of a known kind cannot be forwarded, or None: W&B and TensorBoard take steps in int64 and
    numbers as floats, samples as UTF-8 text."""
    step = record["step"]
    if type(step) is not int or not 0 <= step <= MAX_STEP:
        return f"its step {str(step)[:40]!r} is not a whole number from 0 to {MAX_STEP}"
    if kind == "sample":
        if not isinstance(record["sample"], str):
            return "its sample is not text"
        try:
            record["sample"].encode("utf-8")
        except UnicodeEncodeError:
            return "its sample is not UTF-8 text (half a character)"
    for field in fields_of(record, kind):
        value = record[field]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{field[:40]!r} is not a number"
        try:
            float(value)
        except OverflowError:
            return f"{field[:40]!r} is a number no float holds"
    return None


def scalars_of(record, kind):
    """The numbers of one record under their logged names."""
    if kind == "train":
        values = {name: record[field] for field, name in TRAINING_FIELDS.items() if field in record}
        if all(field in record for field in ("step_ms", "exposed_comm_ms", "data_wait_ms")):
            values["time/compute_ms"] = max(0.0, record["step_ms"] - record["exposed_comm_ms"]
                                            - record["data_wait_ms"])
        return values
    if kind == "val":
        return {"val/bpb": record["val_bpb"]}
    if kind == "core":
        return {("core/metric" if key == "core_metric" else key): value for key, value in record.items()
                if key == "core_metric" or key.startswith("core/")}
    if kind == "checkpoint":
        return {"time/checkpoint_ms": record["checkpoint_ms"]}
    return {}


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


class MetricsFollower:
    """The complete lines appended to metrics.jsonl since the last call, as (line number, record of a known
    kind, its kind); starts over when the file is replaced (a resume trims it by writing a new file). A line
    that is not such a record, or that cannot be forwarded, is skipped with a warning (the first
    MAX_RECORD_WARNINGS)."""

    def __init__(self, path):
        self.path, self.offset, self.inode, self.pending, self.line = path, 0, None, b"", 0
        self.overlong = False  # skipping a line longer than MAX_RECORD_BYTES up to its end
        self.behind = False  # the last call read READ_BYTES_PER_ROUND: more may be there already
        self.warnings = 0
        self.sample_step, self.samples_in_step = None, 0  # the samples just read: their step, how many

    def skip(self, line, reason):
        self.warnings += 1
        if self.warnings <= MAX_RECORD_WARNINGS:
            warn(f"{self.path} line {line} skipped: {reason}"
                 + ("; further lines not forwarded are skipped without a warning"
                    if self.warnings == MAX_RECORD_WARNINGS else ""))

    def new_records(self):
        self.behind = False
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return []
        if status.st_ino != self.inode or status.st_size < self.offset:
            self.inode, self.offset, self.pending, self.line, self.overlong = status.st_ino, 0, b"", 0, False
            self.sample_step, self.samples_in_step = None, 0
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(READ_BYTES_PER_ROUND)
        self.offset += len(data)
        self.behind = len(data) == READ_BYTES_PER_ROUND
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()  # a line the trainer has not finished writing
        records = []
        for text in lines:
            self.line += 1
            if self.overlong:
                self.overlong = False
                continue
            if record := self.parse(text):
                records.append((self.line, record, self.kind_of(record)))
        if len(self.pending) > MAX_RECORD_BYTES:
            if not self.overlong:
                self.skip(self.line + 1, f"longer than {MAX_RECORD_BYTES} bytes")
            self.pending, self.overlong = b"", True
        return records

    def kind_of(self, record):
        """record_kind(record); for a sample "sample:N", N its place among the samples of its step written one
        after the other, counted across calls (and the same in a restarted sidecar, which reads the file from
        its start): a step trained again after a resume numbers its samples from 1 again."""
        kind = record_kind(record)
        if kind != "sample":
            self.sample_step = None
            return kind
        if record["step"] != self.sample_step:
            self.sample_step, self.samples_in_step = record["step"], 0
        self.samples_in_step += 1
        return f"sample:{self.samples_in_step}"

    def parse(self, text):
        if len(text) > MAX_RECORD_BYTES:
            return self.skip(self.line, f"longer than {MAX_RECORD_BYTES} bytes")
        try:
            record = json.loads(text)
        except RecursionError:
            return self.skip(self.line, "nested too deep")
        except ValueError:
            return self.skip(self.line, "not JSON")
        if not isinstance(record, dict) or "step" not in record:
            return self.skip(self.line, "not a JSON object with a step")
        kind = record_kind(record)
        if kind is None:
            return None  # a kind of record this sidecar does not forward
        if problem := record_problem(record, kind):
            return self.skip(self.line, problem)
        return record


class TensorBoardSink:
    """Event files under RUN_DIR/tensorboard/, written with tensorboard's own writer and protos (no TF)."""

    def __init__(self, run_dir, config_text):
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        self.pb = (event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2)
        self.destination = os.path.join(run_dir, "tensorboard")
        self.fresh = not os.path.isdir(self.destination)  # nothing forwarded here before
        self.writer = EventFileWriter(self.destination)
        self.text("config", "```\n" + config_text + "```", 0)

    def scalars(self, values, step):
        event_pb2, summary_pb2, _, _ = self.pb
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(value))
                                             for tag, value in values.items() if value is not None])
        self.writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def text(self, tag, markdown, step):
        event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2 = self.pb
        tensor = tensor_pb2.TensorProto(dtype=7, string_val=[markdown.encode()],  # 7: DT_STRING
                                        tensor_shape=tensor_shape_pb2.TensorShapeProto(
                                            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]))
        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
        value = summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=tensor)
        self.writer.add_event(event_pb2.Event(wall_time=time.time(), step=step,
                                              summary=summary_pb2.Summary(value=[value])))

    def samples(self, texts, step):
        self.text("samples", "\n\n".join(texts), step)

    def table(self, name, columns, rows):
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(str(value) for value in row) + " |" for row in rows]
        self.text(name, "\n".join(lines), 0)

    def flush(self):
        self.writer.flush()

    def close(self):
        self.writer.close()


class WandbSink:
    """One W&B run per run directory: its id is kept in RUN_DIR/wandb_run_id, so a resumed training or a
    restarted sidecar continues it; files under RUN_DIR/wandb/."""

    def __init__(self, run_dir, settings, mode, config):
        self.destination = os.path.join(run_dir, WANDB_ID_FILE)
        run_id, self.fresh = self.run_id(self.destination)
        import wandb
        self.wandb = wandb
        name = settings.get("wandb_run") or os.path.basename(os.path.normpath(run_dir))
        self.run = wandb.init(project=settings["wandb_project"], name=name, id=run_id, resume="allow",
                              dir=run_dir, mode=mode, config=config,
                              settings=wandb.Settings(console="off", silent=True))
        self.sample_rows = []

    @staticmethod
    def run_id(path):
        """(the W&B run id kept in `path`, whether it was made now): a new id when there is none; an id read
        through a link, from anything but a file, or that is not an id is refused (it would be uploaded)."""
        fix = "remove it to start a new W&B run, or write there the id of the W&B run to continue"
        if not os.path.lexists(path):
            run_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
            with os.fdopen(open_run_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as f:
                f.write(run_id + "\n")
            return run_id, True
        try:
            with os.fdopen(open_run_file(path, os.O_RDONLY), "rb") as f:
                run_id = f.read(256).decode("ascii", errors="replace").strip()
        except RunFileRefused as refused:
            raise ValueError(f"{refused}, not the run's own id: {fix}") from None
        if not WANDB_RUN_ID.fullmatch(run_id):
            raise ValueError(f"{path} does not hold a W&B run id (1 to 64 letters, digits, - or _): {fix}")
        return run_id, False

    def scalars(self, values, step):
        self.run.log({key: value for key, value in values.items() if value is not None}, step=step)

    def samples(self, texts, step):
        self.sample_rows += [[step, text] for text in texts]
        self.run.log({"samples": self.wandb.Table(columns=["step", "text"], data=self.sample_rows)}, step=step)

    def table(self, name, columns, rows):
        self.run.log({name: self.wandb.Table(columns=columns, data=rows)})

    def flush(self):
        pass

    def close(self):
        self.run.finish()


def open_sinks(run_dir):
    """The sinks the run's [log] settings ask for, each that can be opened (a failing one is reported)."""
    config_path = os.path.join(run_dir, "config.toml")
    with open(config_path, "rb") as f:
        config_bytes = f.read()
    config = tomllib.loads(config_bytes.decode())
    settings = config.get("log", {})
    sinks = []
    if settings.get("tensorboard"):
        try:
            sinks.append(TensorBoardSink(run_dir, config_bytes.decode()))
        except ImportError as error:
            warn(f"cannot write TensorBoard events: {error} (the build's Python lacks tensorboard: "
                 "scripts/install-deps.sh)")
    # WANDB_MODE overrides the recipe, as it does for wandb itself ("dryrun" is its old name for offline).
    mode = os.environ.get("WANDB_MODE") or settings.get("wandb_mode", "online")
    mode = "offline" if mode == "dryrun" else mode
    if settings.get("wandb_project") and mode != "disabled":
        try:
            sinks.append(WandbSink(run_dir, settings, mode, config))
        except ImportError as error:
            warn(f"cannot log to W&B: {error} (the build's Python lacks wandb: scripts/install-deps.sh)")
        except Exception as error:  # wandb.init's errors (no API key, no network) have no common base
            warn(f"cannot log to W&B ({mode}): {error}")
    return sinks


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
