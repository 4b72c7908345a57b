#!/usr/bin/env python3
"""Watching runs: the metrics sidecar (tools/metrics_sidecar.py started by train/metrics_sidecar.cpp) and
`nanoforge report`, on tiny CPU trainings of the nanoforge program (one layer, a few 512-token steps).

    test_watching.py --nanoforge BIN CASE  (CASE: forwards | killed_and_resumed | report_in_browser |
                                            tools_use_build_python)

forwards: W&B offline and TensorBoard hold every record of metrics.jsonl, read back with wandb's own reader
of its offline files and tensorboard's EventAccumulator. killed_and_resumed: a sidecar that dies mid-run
leaves the losses equal to a run without logging; a resumed run (whose sidecar starts after it ends)
continues the same W&B run with no step twice. report_in_browser: the report of two runs in headless
Chromium. tools_use_build_python: plot_run.py and the other tools needing build/python's packages, started by
a python3 that lacks them, re-run themselves with build/python/bin/python3, or say in one line what to run.
Exit 77 (CTest's skip) with one line when the build's Python lacks wandb/tensorboard, or Chromium is not
installed.
"""

import argparse
import fcntl
import glob
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

from tiny_runs import SOURCE, Runs, check

SKIP = 77
DYING_SIDECAR = os.path.join(SOURCE, "tests/watch/dying_sidecar.py")
LATE_SIDECAR = os.path.join(SOURCE, "tests/watch/late_sidecar.py")


def skip(reason):
    print(f"SKIPPED: {reason}")
    sys.exit(SKIP)


def records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def losses(run_dir):
    return {r["step"]: r["loss"] for r in records(run_dir) if "loss" in r}


def wait_for_sidecar(run_dir, seconds=180):
    """The state of the sidecar that forwarded the run's last record, once that sidecar is gone. It goes on
    after the trainer exits, and may even start after it (late_sidecar.py): until then the state file is an
    earlier sidecar's, finished at an earlier step. So: finished at the last step of metrics.jsonl, the lock
    free, and its process gone (W&B's files are written to their end when wandb's exit handlers are done)."""
    path = os.path.join(run_dir, ".sidecar_state.json")
    last_step = max(r["step"] for r in records(run_dir))
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with open(path) as f:
                state = json.load(f)
            if state.get("finished") and state.get("step") == last_step:
                with open(os.path.join(run_dir, ".sidecar.lock")) as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                if process_gone(state["pid"]):
                    return state
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    log = open(os.path.join(run_dir, "sidecar.log")).read() if os.path.exists(
        os.path.join(run_dir, "sidecar.log")) else "(no sidecar.log)"
    check(False, f"the sidecar of {run_dir} did not finish at step {last_step} in {seconds} s:\n{log}")


def process_gone(pid):
    """Whether process `pid` has exited (a zombie no one reaps has too)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def wandb_history(run_dir):
    """Every history row and the run ids of RUN/wandb/offline-run-*/run-*.wandb, with wandb's own reader; each
    row also names its offline run's files/ directory (under "_files")."""
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal.datastore import DataStore
    rows, run_ids, configs = [], [], []
    for path in sorted(glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb"))):
        store = DataStore()
        store.open_for_scan(path)
        while (data := store.scan_data()) is not None:
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            kind = record.WhichOneof("record_type")
            if kind == "history":
                rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                             for item in record.history.item})
                rows[-1]["_files"] = os.path.join(os.path.dirname(path), "files")
            elif kind == "run":
                run_ids.append(record.run.run_id)
                configs.append({item.key: json.loads(item.value_json) for item in record.run.config.update})
    return rows, run_ids, configs


def wandb_samples(rows):
    """{step: the rows of the samples table logged at that step}, read from the table files W&B wrote."""
    tables = {}
    for row in rows:
        if "samples/path" in row:
            with open(os.path.join(row["_files"], row["samples/path"])) as f:
                table = json.load(f)
            check(len(table["data"]) == row["samples/nrows"], f"W&B samples table {row['samples/path']}")
            tables[row["_step"]] = table["data"]
    return tables


def tensorboard_scalars(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    accumulator = EventAccumulator(os.path.join(run_dir, "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def float32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


def need_packages():
    try:
        import tensorboard  # noqa: F401
        import wandb  # noqa: F401
    except ImportError as error:
        skip(f"the build's Python ({sys.executable}) lacks wandb or tensorboard ({error}); "
             "scripts/install-deps.sh installs them from PyPI")


def sidecar_env(extra=None):
    """The build's Python runs the sidecar (this test's interpreter), whatever the build baked in."""
    return dict({"NANOFORGE_PYTHON": sys.executable}, **(extra or {}))


def case_forwards(runs):
    need_packages()
    missing, output = runs.train("missing_python", 2, ["log.tensorboard=true"],
                                 env={"NANOFORGE_PYTHON": "/nonexistent/python3"})
    check(output.count("warning: metrics sidecar") == 1 and len(losses(missing)) == 2,
          f"a missing interpreter must be one warning and a finished run:\n{output}")
    bad = runs.program(["train", "--recipe", os.path.join(runs.work, "recipe.toml"), "--run-dir",
                        os.path.join(runs.work, "bad"), "log.wandb_mode=sometimes"], expect_ok=False)
    check("log.wandb_mode must be online, offline or disabled" in bad.stdout, bad.stdout)

    run_dir, output = runs.train("logged", 8, ["log.wandb_project=nanoforge-test", "log.wandb_mode=offline",
                                               "log.tensorboard=true"], env=sidecar_env())
    check("warning" not in output, output)
    wait_for_sidecar(run_dir)
    expected = records(run_dir)
    training = [r for r in expected if "loss" in r]
    evaluations = [r for r in expected if "val_bpb" in r]
    samples = [r["sample"] for r in expected if "sample" in r]
    check(len(training) == 8 and len(evaluations) == 3 and len(samples) == 7, "the run's metrics.jsonl")

    rows, run_ids, configs = wandb_history(run_dir)
    with open(os.path.join(run_dir, "wandb_run_id")) as f:
        check(run_ids == [f.read().strip()], f"one offline W&B run with the kept id, got {run_ids}")
    check(configs[0].get("train", {}).get("num_iterations") == 8, "the resolved recipe as the W&B config")
    by_step = {}
    for row in rows:
        check(row["_step"] not in by_step, f"W&B step {row['_step']} logged twice")
        by_step[row["_step"]] = row
    for record in training:
        row = by_step.get(record["step"], {})
        for field, name in (("loss", "train/loss"), ("lr_multiplier", "train/lr_multiplier"),
                            ("grad_norm", "train/grad_norm"), ("tokens_per_s", "train/tokens_per_s"),
                            ("step_ms", "time/step_ms"), ("data_wait_ms", "time/data_wait_ms")):
            check(row.get(name) == record[field], f"W&B {name} at step {record['step']}: {row.get(name)} vs "
                                                  f"{record[field]}")
    for record in evaluations:
        check(by_step.get(record["step"], {}).get("val/bpb") == record["val_bpb"], f"W&B val/bpb {record}")
    tables = wandb_samples(rows)
    check(tables == {8: [[8, text] for text in samples]}, f"the samples as a W&B table: {tables}")

    accumulator = tensorboard_scalars(run_dir)
    tb_loss = [(e.step, e.value) for e in accumulator.Scalars("train/loss")]
    check(tb_loss == [(r["step"], float32(r["loss"])) for r in training], f"TensorBoard train/loss {tb_loss}")
    tb_bpb = [(e.step, e.value) for e in accumulator.Scalars("val/bpb")]
    check(tb_bpb == [(r["step"], float32(r["val_bpb"])) for r in evaluations], f"TensorBoard val/bpb {tb_bpb}")
    for tag in ("train/lr_multiplier", "train/grad_norm", "train/tokens_per_s", "time/compute_ms",
                "time/checkpoint_ms"):
        check(accumulator.Scalars(tag), f"TensorBoard {tag}")
    texts = [e.tensor_proto.string_val[0].decode() for e in accumulator.Tensors("samples")]
    check(texts == ["\n\n".join(samples)], "the samples as TensorBoard text")
    check("num_iterations = 8" in accumulator.Tensors("config")[0].tensor_proto.string_val[0].decode(),
          "the config as TensorBoard text")


def case_killed_and_resumed(runs):
    need_packages()
    reference, _ = runs.train("reference", 16)
    # The first sidecar SIGKILLs itself as it starts (tests/watch/dying_sidecar.py); the trainer restarts it.
    # The recipe says online and WANDB_MODE=offline overrides it, as with wandb itself.
    env = sidecar_env({"NANOFORGE_METRICS_SIDECAR": DYING_SIDECAR, "WANDB_MODE": "offline"})
    logging = ["log.wandb_project=nanoforge-test", "log.wandb_mode=online", "log.tensorboard=true"]
    run_dir, output = runs.train("killed", 16, logging, extra=["--stop-at-step", "10"], env=env)
    check(output.count("warning: metrics sidecar stopped (killed by signal 9") == 1,
          f"one warning for the killed sidecar:\n{output}")
    first = wait_for_sidecar(run_dir)
    check(first["step"] == 10, f"the restarted sidecar forwarded through step 10, state {first}")
    with open(os.path.join(run_dir, "wandb_run_id")) as f:
        run_id = f.read().strip()
    # Resumed from the step-8 checkpoint: metrics.jsonl gets steps 9 and 10 and val bpb at step 8 again. Its
    # sidecar starts only once the run has ended (as on a loaded machine), when the state file still says
    # "finished at step 10": the test must wait for the resumed run's sidecar, not take that one for it.
    checkpoint = os.path.join(run_dir, "checkpoints", "step_000008")
    _, output = runs.train("killed", 16, logging, extra=["--resume-from", checkpoint],
                           env=dict(env, NANOFORGE_METRICS_SIDECAR=LATE_SIDECAR))
    check("resume: " in output and "warning" not in output, output)
    second = wait_for_sidecar(run_dir)
    check(second["step"] == 16 and second["pid"] != first["pid"], f"the resumed run's sidecar, state {second}")
    check(losses(run_dir) == losses(reference), "the losses of the run with a killed sidecar and a resume "
                                                "differ from those of the run without logging")
    rows, run_ids, _ = wandb_history(run_dir)
    check(len(run_ids) == 2 and set(run_ids) == {run_id}, f"the resumed W&B run keeps id {run_id}: {run_ids}")
    directories = sorted(os.listdir(os.path.join(run_dir, "wandb")))
    check(len([name for name in directories if name.startswith("offline-run-") and name.endswith("-" + run_id)]) == 2,
          f"two offline runs of id {run_id}, one a resume: {directories}")
    loss_steps = [row["_step"] for row in rows if "train/loss" in row]
    bpb_steps = [row["_step"] for row in rows if "val/bpb" in row]
    check(loss_steps == list(range(1, 17)), f"W&B train/loss steps {loss_steps}")
    check(bpb_steps == [0, 4, 8, 12, 16], f"W&B val/bpb steps {bpb_steps}")
    accumulator = tensorboard_scalars(run_dir)
    check([e.step for e in accumulator.Scalars("train/loss")] == list(range(1, 17)), "TensorBoard loss steps")
    check([e.step for e in accumulator.Scalars("val/bpb")] == [0, 4, 8, 12, 16], "TensorBoard val/bpb steps")
    check([e.value for e in accumulator.Scalars("train/loss")] ==
          [float32(value) for _, value in sorted(losses(run_dir).items())], "TensorBoard losses")


class ReportPage(html.parser.HTMLParser):
    """The rendered DOM: each chart's drawn series (point counts of its polylines, and of its polygons: the
    stacked areas of the time-per-step charts), the config rows marked as differing."""

    def __init__(self):
        super().__init__()
        self.charts, self.chart, self.differs, self.in_differs, self.cells, self.fetches = {}, None, [], 0, [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "href"):
            if attrs.get(name):
                self.fetches.append(attrs[name])
        if tag == "figure" and "chart" in attrs.get("class", ""):
            self.chart = attrs["data-chart"]
            self.charts[self.chart] = []
        elif tag in ("polyline", "polygon") and self.chart:
            self.charts[self.chart].append(len(attrs.get("points", "").split()))
        elif tag == "tr" and attrs.get("class") == "differs":
            self.in_differs, self.cells = 1, []

    def handle_endtag(self, tag):
        if tag == "figure":
            self.chart = None
        elif tag == "tr" and self.in_differs:
            self.differs.append(self.cells)
            self.in_differs = 0

    def handle_data(self, data):
        if self.in_differs and data.strip():
            self.cells.append(data.strip())


def case_report_in_browser(runs):
    chromium = shutil.which("chromium")
    if chromium is None:
        skip("no chromium (Debian's chromium package, which scripts/install-deps.sh installs on Debian; on "
             "Ubuntu it is a snap)")
    first, _ = runs.train("first", 6)
    second, _ = runs.train("second", 6, ["optim.matrix_lr=0.01"])
    page = os.path.join(runs.work, "report.html")
    runs.program(["report", first, second, "--out", page])
    screenshot = os.path.join(runs.work, "report.png")
    # No network at all (every host unresolvable): the page must need none.
    browser = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                              "--v=0", "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1400,2000",
                              f"--screenshot={screenshot}", "--dump-dom", "file://" + page],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    check(browser.returncode == 0, f"chromium exited {browser.returncode}: {browser.stderr[-2000:]}")
    console = [line for line in browser.stderr.splitlines() if ":CONSOLE" in line]
    check(not console, f"console messages: {console}")
    dom = ReportPage()
    dom.feed(browser.stdout)
    check(not dom.fetches, f"the page fetches {dom.fetches}")
    for chart in ("loss", "val-bpb", "lr", "gnorm", "tokens-per-s", "time-first", "time-second"):
        check(chart in dom.charts, f"no {chart} chart in {sorted(dom.charts)}")
        check(dom.charts[chart] and all(points >= 2 for points in dom.charts[chart][:2]),
              f"chart {chart} has series of {dom.charts[chart]} points")
    check(["optim.matrix_lr", "0.02", "0.01"] in dom.differs, f"config differences {dom.differs}")
    check(not any(row[0] == "model.depth" for row in dom.differs), "model.depth is the same in both")
    from PIL import Image, ImageStat
    image = Image.open(screenshot).convert("L")
    deviation = ImageStat.Stat(image).stddev[0]
    check(image.size[0] >= 1000 and deviation > 10, f"the screenshot looks blank (pixel deviation {deviation})")


# The tools that need build/python's packages (tools/build_python.py), and one package of each.
TOOLS_NEEDING_PACKAGES = {"plot_run.py": "matplotlib", "scaling_report.py": "matplotlib",
                          "export_checkpoint.py": "h5py", "upgrade_h5.py": "h5py", "import_nanochat.py": "numpy",
                          "dev/make_parquet_corpus.py": "pyarrow"}


def case_tools_use_build_python(work):
    # A python3 without the packages, as a pyenv or conda one first on PATH: this one without site-packages.
    lacking = [sys.executable, "-S"]
    for module in sorted(set(TOOLS_NEEDING_PACKAGES.values())):
        if subprocess.run(lacking + ["-c", f"import {module}"], stderr=subprocess.DEVNULL).returncode == 0:
            skip(f"{sys.executable} -S still imports {module}: no python3 lacking the packages to start tools with")
    run_dir = os.path.join(work, "run")
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps({"step": step, "loss": 5.0 - step / 10, "tokens_per_s": 1000.0}) + "\n"
                     for step in range(1, 9))
        f.write(json.dumps({"step": 8, "val_bpb": 1.5}) + "\n")
        f.write(json.dumps({"step": 4, "event": "reformation", "cause": "failure", "restart": 1,  # a dashed line
                            "previous_world_size": 2, "world_size": 1}) + "\n")

    def clone(name, build_python):
        """A copy of tools/ in a tree of its own, with build/python made by `build_python(path)`."""
        root = os.path.join(work, name)
        shutil.copytree(os.path.join(SOURCE, "tools"), os.path.join(root, "tools"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        if build_python:
            os.makedirs(os.path.join(root, "build"))
            build_python(os.path.join(root, "build", "python"))
        return root

    def tool(root, script, *arguments):
        return subprocess.run(lacking + [os.path.join("tools", script), *arguments], cwd=root, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)

    # With the build's Python (this test's interpreter) as build/python: each tool re-runs itself with it.
    with_build = clone("with_build", lambda path: os.symlink(sys.prefix, path))
    for script in TOOLS_NEEDING_PACKAGES:
        result = tool(with_build, script, "--help")
        check(result.returncode == 0 and "usage:" in result.stdout, f"{script} --help: {result.stdout[-2000:]}")
    result = tool(with_build, "plot_run.py", run_dir)
    check(result.returncode == 0 and os.path.getsize(os.path.join(run_dir, "run.png")) > 0,
          f"plot_run.py with the packages in build/python only: {result.stdout[-2000:]}")

    # No build/python (a clone before `make`): one line with the command.
    result = tool(clone("without_build", None), "plot_run.py", run_dir)
    check(result.returncode == 1 and result.stdout.count("\n") == 1 and "make deps" in result.stdout
          and f"build/python/bin/python3 tools/plot_run.py {run_dir}" in result.stdout,
          f"plot_run.py without build/python: {result.stdout}")

    # A build/python that lacks the package too (a venv of its own, no system packages): one line, no loop.
    result = tool(clone("lacking_build", lambda path: subprocess.run(
        [sys._base_executable, "-m", "venv", "--without-pip", path], check=True)), "plot_run.py", run_dir)
    check(result.returncode == 1 and result.stdout.count("\n") == 1
          and "build/python/bin/pip install matplotlib" in result.stdout,
          f"plot_run.py with a build/python lacking matplotlib: {result.stdout}")


CASES = ("forwards", "killed_and_resumed", "report_in_browser", "tools_use_build_python")
NEEDS_PROGRAM = ("forwards", "killed_and_resumed", "report_in_browser")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanoforge", required=True)
    parser.add_argument("case", choices=CASES)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix=f"nanoforge_watch_{args.case}_")
    try:
        globals()["case_" + args.case](Runs(args.nanoforge, work) if args.case in NEEDS_PROGRAM else work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"PASSED: {args.case}")


if __name__ == "__main__":
    main()
