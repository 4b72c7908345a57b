#!/usr/bin/env python3
"""Forward a run's metrics.jsonl to Weights & Biases and TensorBoard while it trains, as a process of its own.

    metrics_sidecar.py RUN_DIR [--parent-pid PID]

The trainer (train/metrics_sidecar.cpp) starts it on rank 0 and never waits for it: it follows the file by
itself, so a slow or dead sidecar costs training nothing. What to forward comes from the run's own
config.toml ([log]). It stops after forwarding the last record when sent SIGTERM (the trainer's end) or
when its parent is gone. RUN_DIR/.sidecar_state.json holds the last record forwarded, so a restarted or
resumed sidecar never sends a step twice: the first record of a (step, kind) wins, as W&B's history can only
grow (a resumed run retrains the same losses; docs/watching.md). Exit status 3: nothing it can forward.
"""

import argparse
import fcntl
import json
import math
import os
import resource
import secrets
import signal
import string
import sys
import time
import tomllib

POLL_SECONDS = 0.5
CANNOT_FORWARD = 3  # the trainer does not restart a sidecar that exits with this
STATE_FILE = ".sidecar_state.json"
WANDB_ID_FILE = "wandb_run_id"

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


def record_kind(record):
    """What a metrics.jsonl record is: one of each kind per step, except samples (numbered in the step)."""
    for field, kind in (("loss", "train"), ("val_bpb", "val"), ("core_metric", "core"), ("sample", "sample"),
                        ("checkpoint_ms", "checkpoint")):
        if field in record:
            return kind
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
            with open(self.path) as f:
                saved = json.load(f)
            self.step, self.kinds = int(saved["step"]), list(saved["kinds"])
        except (OSError, ValueError, KeyError, TypeError):
            pass

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
        with open(temporary, "w") as f:
            json.dump({"step": self.step, "kinds": self.kinds, "finished": finished, "pid": os.getpid()}, f)
        os.replace(temporary, self.path)


class MetricsFollower:
    """The complete lines appended to metrics.jsonl since the last call; starts over when the file is replaced
    (a resume trims it by writing a new file)."""

    def __init__(self, path):
        self.path, self.offset, self.inode, self.pending = path, 0, None, b""

    def new_records(self):
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return []
        if status.st_ino != self.inode or status.st_size < self.offset:
            self.inode, self.offset, self.pending = status.st_ino, 0, b""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()  # a line the trainer has not finished writing
        records = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int):
                records.append(record)
        return records


class TensorBoardSink:
    """Event files under RUN_DIR/tensorboard/, written with tensorboard's own writer and protos (no TF)."""

    def __init__(self, run_dir, config_text):
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        self.pb = (event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2)
        self.writer = EventFileWriter(os.path.join(run_dir, "tensorboard"))
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
        import wandb
        self.wandb = wandb
        id_path = os.path.join(run_dir, WANDB_ID_FILE)
        if os.path.exists(id_path):
            with open(id_path) as f:
                run_id = f.read().strip()
        else:
            run_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
            with open(id_path, "w") as f:
                f.write(run_id + "\n")
        name = settings.get("wandb_run") or os.path.basename(os.path.normpath(run_dir))
        self.run = wandb.init(project=settings["wandb_project"], name=name, id=run_id, resume="allow",
                              dir=run_dir, mode=mode, config=config,
                              settings=wandb.Settings(console="off", silent=True))
        self.sample_rows = []

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
            log(f"cannot write TensorBoard events: {error} (the build's Python lacks tensorboard: "
                "scripts/install-deps.sh)")
    # WANDB_MODE overrides the recipe, as it does for wandb itself ("dryrun" is its old name for offline).
    mode = os.environ.get("WANDB_MODE") or settings.get("wandb_mode", "online")
    mode = "offline" if mode == "dryrun" else mode
    if settings.get("wandb_project") and mode != "disabled":
        try:
            sinks.append(WandbSink(run_dir, settings, mode, config))
        except ImportError as error:
            log(f"cannot log to W&B: {error} (the build's Python lacks wandb: scripts/install-deps.sh)")
        except Exception as error:  # wandb.init's errors (no API key, no network) have no common base
            log(f"cannot log to W&B ({mode}): {error}")
    return sinks


def forward(records, sinks, state):
    """Sends the records not forwarded before, step by step in file order."""
    samples, sample_step = [], None
    sample_counts = {}

    def flush_samples():
        if samples:
            for sink in sinks:
                sink.samples(samples, sample_step)
            samples.clear()

    for record in records:
        step, kind = record["step"], record_kind(record)
        if kind is None:
            continue
        if kind == "sample":
            sample_counts[step] = sample_counts.get(step, 0) + 1
            kind = f"sample:{sample_counts[step]}"
        if not state.is_new(step, kind):
            continue
        if sample_step is not None and (step != sample_step or not kind.startswith("sample")):
            flush_samples()
        if kind.startswith("sample"):
            samples.append(record["sample"])
            sample_step = step
        else:
            values = {key: value for key, value in scalars_of(record, kind).items()
                      if isinstance(value, (int, float)) and math.isfinite(value)}
            for sink in sinks:
                sink.scalars(values, step)
        state.add(step, kind)
    flush_samples()


def forward_scaling_table(run_dir, sinks):
    """`nanoforge bench scaling --json-out RUN_DIR/scaling.jsonl` records, as one table."""
    path = os.path.join(run_dir, "scaling.jsonl")
    rows = []
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    columns = list(dict.fromkeys(key for row in rows for key in row))
    for sink in sinks:
        sink.table("scaling", columns, [[row.get(column) for column in columns] for row in rows])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--parent-pid", type=int, default=0, help="stop when this process is gone")
    args = parser.parse_args()
    ending = []
    signal.signal(signal.SIGTERM, lambda *_: ending.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the trainer, which ends the run cleanly

    # One sidecar per run directory: one that is still draining a killed run is let finish first.
    lock = open(os.path.join(args.run_dir, ".sidecar.lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    sinks = open_sinks(args.run_dir)
    if not sinks:
        log("nothing to forward to (see the lines above, and the log.* recipe keys)")
        return CANNOT_FORWARD
    state = ForwardedState(args.run_dir)
    follower = MetricsFollower(os.path.join(args.run_dir, "metrics.jsonl"))
    log(f"forwarding {args.run_dir}/metrics.jsonl after step {state.step} (pid {os.getpid()})")
    scaling_forwarded = False
    while True:
        last_round = bool(ending) or (args.parent_pid and os.getppid() != args.parent_pid)
        forward(follower.new_records(), sinks, state)
        if not scaling_forwarded and os.path.exists(os.path.join(args.run_dir, "scaling.jsonl")):
            forward_scaling_table(args.run_dir, sinks)
            scaling_forwarded = True
        for sink in sinks:
            sink.flush()
        state.save()
        if last_round:
            break
        time.sleep(POLL_SECONDS)
    for sink in sinks:
        sink.close()
    state.save(finished=True)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    log(f"done: forwarded through step {state.step}; {usage.ru_utime + usage.ru_stime:.1f} s of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
