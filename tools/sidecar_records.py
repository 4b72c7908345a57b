"""metrics.jsonl as the metrics sidecar (tools/metrics_sidecar.py) reads it: the kinds of record it forwards,
why one cannot be forwarded, the names its numbers are logged under, and the follower that reads the complete
lines appended since its last look."""

import json
import os

from sidecar_files import warn

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
