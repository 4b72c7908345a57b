"""Where the metrics sidecar (tools/metrics_sidecar.py) forwards a run's numbers: TensorBoard event files and
a W&B run, as the run's config.toml [log] asks."""

import os
import re
import secrets
import string
import time
import tomllib

from sidecar_files import RunFileRefused, open_run_file, warn

WANDB_ID_FILE = "wandb_run_id"
# What wandb_run_id may hold: the ids this sidecar makes ([a-z0-9]{8}) and those W&B shows, never a path.
WANDB_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


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
