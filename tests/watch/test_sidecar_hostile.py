#!/usr/bin/env python3
"""The metrics sidecar against hostile run directories: what it reads, the files it writes, and the trainer
that starts it.

    test_sidecar_hostile.py --nanoforge BIN CASE

bad_records: a hostile record (an integer of 401 digits, a step of 10^30, timings that are text, a sample that
is a number or half a character, 200,000 nested arrays, a step that is `true`) is skipped with one warning
each and every good record is forwarded. samples_across_polls: the seven samples of a step that reach the
sidecar in two polls, and then a restarted sidecar, each reach W&B and TensorBoard once.
symlinked_own_files: the sidecar never writes through a symbolic link it finds at its lock or its state's
.partial. tampered_wandb_run_id: a wandb_run_id that is a symbolic link or not an id is not used.
hostile_sidecar_log: a RUN/sidecar.log that is a FIFO or a symbolic link costs the run only a warning, and a
2 GiB sparse one costs the trainer no memory. stopped_sidecar_on_resume: a resume while the old sidecar is
stopped (SIGSTOP) says so on the console and forwards everything once it goes on.
run_ends_while_sidecar_starts: a run that ends (and sends SIGTERM) before the sidecar's Python has started
is forwarded whole. emptied_run_dir: a new run after `rm -rf RUN/*` is forwarded whole.
tampered_wandb_run_id_on_resume: says so on the console. Exit 77 (CTest's skip) when the build's Python
lacks wandb or tensorboard.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from test_watching import (DYING_SIDECAR, LATE_SIDECAR, float32, need_packages, records, sidecar_env,
                           tensorboard_scalars, wait_for_sidecar, wandb_history, wandb_samples)
from tiny_runs import SOURCE, Runs, check

SIDECAR = os.path.join(SOURCE, "tools", "metrics_sidecar.py")
STARTED = []  # every process a case starts, ended when the case ends however it ends
STOPPED = []  # the sidecars a case stopped, let go on when it ends


def wait_until(condition, seconds, what, dump=lambda: ""):
    """Polls `condition` until it holds; fails naming `what` after `seconds`."""
    deadline = time.time() + seconds
    while not condition():
        if time.time() > deadline:
            check(False, f"{what} within {seconds} s\n{dump()[-4000:]}")
        time.sleep(0.1)


def read_state(run_dir):
    try:
        with open(os.path.join(run_dir, ".sidecar_state.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def training_record(step):
    return {"step": step, "loss": 5.0 - step / 10, "lr_multiplier": 1.0, "grad_norm": 0.5, "tokens_per_s": 1000 + step,
            "step_ms": 10.0, "exposed_comm_ms": 1.0, "data_wait_ms": 2.0, "elapsed_s": step / 100}


class Sidecar:
    """tools/metrics_sidecar.py run by hand on a run directory of our making (config.toml and metrics.jsonl)."""

    def __init__(self, run_dir, wandb=False, metrics=()):
        """metrics: the lines of a new metrics.jsonl, or None to go on with the directory as it is."""
        self.run_dir = run_dir
        os.makedirs(run_dir, exist_ok=True)
        if metrics is not None:
            with open(os.path.join(run_dir, "config.toml"), "w") as f:
                f.write("[log]\ntensorboard = true\n")
                if wandb:
                    f.write('wandb_project = "nanoforge-test"\nwandb_mode = "offline"\n')
            with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
                f.writelines(line + "\n" for line in metrics)
        self.log_path = os.path.join(os.path.dirname(run_dir), os.path.basename(run_dir) + ".log")
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen([sys.executable, "-u", SIDECAR, run_dir], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        STARTED.append(self.process)

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def forwarded_through(self, step, seconds=90):
        wait_until(lambda: read_state(self.run_dir).get("step", -1) >= step or self.process.poll() is not None,
                   seconds, f"the sidecar forwarding through step {step}", self.output)
        check(self.process.poll() is None, f"the sidecar exited {self.process.returncode}:\n{self.output()}")

    def stop(self):
        """SIGTERM: it forwards what is left and exits."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.process.kill()
            check(False, f"the sidecar did not exit on SIGTERM:\n{self.output()}")
        check(self.process.returncode == 0, f"the sidecar exited {self.process.returncode}:\n{self.output()}")
        return self.output()


class Trainer:
    """`nanoforge train` in the background, its console read line by line as it comes."""

    def __init__(self, command, env=None):
        self.lines, self.process = [], subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, **(env or {})),
            start_new_session=True)
        STARTED.append(self.process)
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True)
        self.reader.start()

    def console(self):
        return "".join(self.lines)

    def wait_for_line(self, pattern, seconds, what):
        found = []

        def seen():
            found[:] = [line for line in list(self.lines) if re.search(pattern, line)]
            return found or self.process.poll() is not None

        wait_until(seen, seconds, what, self.console)
        check(found, f"{what}: the trainer exited {self.process.returncode} first:\n{self.console()}")
        return found[0]

    def stop(self, seconds=120):
        """SIGTERM: a checkpoint, then exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.finish(seconds)

    def finish(self, seconds=180):
        """Waits for the run to end; its console."""
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            check(False, f"the trainer did not end in {seconds} s:\n{self.console()}")
        self.reader.join()
        return self.console()


def sidecar_pid(trainer):
    line = trainer.wait_for_line(r"metrics sidecar: pid \d+", 60, "the trainer starting its sidecar")
    return int(re.search(r"pid (\d+)", line).group(1))


def case_bad_records(work, runs):
    need_packages()
    good = [training_record(step) for step in range(1, 9)]
    hostile = {
        2: '{"step": 2, "val_bpb": 1' + "0" * 400 + "}",  # 10^400: no float holds it
        3: '{"step": 1' + "0" * 30 + ', "loss": 1.5}',  # step 10^30
        4: '{"step": 4, "loss": 2.5, "step_ms": "12", "exposed_comm_ms": "1", "data_wait_ms": "0"}',
        5: '{"step": 5, "sample": 12345}',
        6: "[" * 200000 + "]" * 200000,
        7: '{"step": 7, "sample": "\\ud800 half a character"}',
        8: '{"step": true, "loss": 1.5}',
    }
    lines = []
    for record in good:
        if record["step"] in hostile:
            lines.append(hostile[record["step"]])
        lines.append(json.dumps(record))
        if record["step"] % 4 == 0:
            lines.append(json.dumps({"step": record["step"], "val_bpb": 1.0 + record["step"] / 100}))
    lines.append(json.dumps({"step": 8, "sample": "The farmer"}))
    sidecar = Sidecar(os.path.join(work, "run"), wandb=True, metrics=lines)
    sidecar.forwarded_through(8)
    output = sidecar.stop()
    warnings = [line for line in output.splitlines() if line.startswith("warning: metrics sidecar")]
    check(len(warnings) == len(hostile), f"one warning per hostile record ({len(hostile)}), got:\n{output}")

    accumulator = tensorboard_scalars(sidecar.run_dir)
    check([(e.step, e.value) for e in accumulator.Scalars("train/loss")] ==
          [(r["step"], float32(r["loss"])) for r in good], "TensorBoard train/loss is the good records'")
    check([e.step for e in accumulator.Scalars("val/bpb")] == [4, 8], "TensorBoard val/bpb steps")
    texts = [e.tensor_proto.string_val[0].decode() for e in accumulator.Tensors("samples")]
    check(texts == ["The farmer"], f"TensorBoard samples {texts}")
    rows, _, _ = wandb_history(sidecar.run_dir)
    check([row["_step"] for row in rows if "train/loss" in row] == list(range(1, 9)), "W&B train/loss steps")


def case_samples_across_polls(work, runs):
    need_packages()
    run_dir = os.path.join(work, "run")
    samples = {8: [f"step 8, prompt {i}" for i in range(1, 8)], 9: ["step 9, prompt 1", "step 9, prompt 2"]}

    def append(lines):
        with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))

    # Three of step 8's seven samples are in the file when the sidecar starts (its first poll reads them all,
    # and the training record of step 8 with them: forwarded through 8 says that poll is done); the other
    # four come in a later poll, as a slow generation writes them.
    sidecar = Sidecar(run_dir, wandb=True, metrics=[json.dumps(training_record(step)) for step in range(1, 9)]
                      + [json.dumps({"step": 8, "sample": text}) for text in samples[8][:3]])
    sidecar.forwarded_through(8)
    append([{"step": 8, "sample": text} for text in samples[8][3:]] + [training_record(9)])
    sidecar.forwarded_through(9)
    sidecar.stop()
    # A restarted sidecar (or a resumed run's) forwards step 9's samples, and none of step 8's again.
    append([{"step": 9, "sample": text} for text in samples[9]] + [training_record(10)])
    restarted = Sidecar(run_dir, metrics=None)
    restarted.forwarded_through(10)
    restarted.stop()

    texts = [(e.step, e.tensor_proto.string_val[0].decode()) for e in tensorboard_scalars(run_dir).Tensors("samples")]
    check(texts == [(step, "\n\n".join(samples[step])) for step in (8, 9)],
          f"TensorBoard samples: each once, a step's together; got {texts}")
    rows, _, _ = wandb_history(run_dir)
    tables = wandb_samples(rows)
    check(tables == {step: [[step, text] for text in samples[step]] for step in (8, 9)},
          f"W&B samples tables: each sample once; got {tables}")


def case_symlinked_own_files(work, runs):
    need_packages()
    victim = os.path.join(work, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    symlinked_lock(work, victim)
    symlinked_state_partial(work, victim)


def symlinked_lock(work, victim):
    run_dir = os.path.join(work, "lock")
    os.makedirs(run_dir)
    os.symlink(victim, os.path.join(run_dir, ".sidecar.lock"))
    sidecar = Sidecar(run_dir, metrics=[json.dumps(training_record(1))])
    wait_until(lambda: sidecar.process.poll() is not None or read_state(run_dir), 60,
               "the sidecar refusing or forwarding", sidecar.output)
    with open(victim) as f:
        check(f.read() == "precious\n", "the sidecar wrote through RUN/.sidecar.lock, a symbolic link")
    check(sidecar.process.poll() is not None, f"the sidecar took a symbolic link as its lock:\n{sidecar.output()}")
    check(sidecar.process.returncode == 3 and ".sidecar.lock" in sidecar.output(),
          f"exit 3 naming .sidecar.lock, got {sidecar.process.returncode}:\n{sidecar.output()}")


def symlinked_state_partial(work, victim):
    run_dir = os.path.join(work, "state")
    os.makedirs(run_dir)
    os.symlink(victim, os.path.join(run_dir, ".sidecar_state.json.partial"))
    sidecar = Sidecar(run_dir, metrics=[json.dumps(training_record(step)) for step in (1, 2)])
    sidecar.forwarded_through(2)
    sidecar.stop()
    with open(victim) as f:
        check(f.read() == "precious\n", "the sidecar wrote through RUN/.sidecar_state.json.partial, a symbolic link")
    check(os.path.isfile(os.path.join(run_dir, ".sidecar_state.json")) and
          not os.path.islink(os.path.join(run_dir, ".sidecar_state.json")), "the state is a file of its own")


def case_tampered_wandb_run_id(work, runs):
    need_packages()
    secret = os.path.join(work, "secret")
    with open(secret, "w") as f:
        f.write("s3cretT0ken\n")
    for name, plant in (("symlink", lambda path: os.symlink(secret, path)),
                        ("not_an_id", lambda path: open(path, "w").write("a/../../b?c\n")),
                        ("too_long", lambda path: open(path, "w").write("a" * 65 + "\n"))):
        run_dir = os.path.join(work, name)
        os.makedirs(run_dir)
        plant(os.path.join(run_dir, "wandb_run_id"))
        sidecar = Sidecar(run_dir, wandb=True, metrics=[json.dumps(training_record(1))])
        sidecar.forwarded_through(1)
        output = sidecar.stop()
        check(not os.path.exists(os.path.join(run_dir, "wandb")),
              f"{name}: W&B ran with the id of a tampered wandb_run_id:\n{output}")
        check(re.search(r"warning: metrics sidecar: .*wandb_run_id", output), f"{name}: no warning:\n{output}")
        check([e.step for e in tensorboard_scalars(run_dir).Scalars("train/loss")] == [1],
              f"{name}: TensorBoard goes on without W&B")


def case_hostile_sidecar_log(work, runs):
    need_packages()
    log_not_a_file(work, runs)
    sparse_log(work, runs)


def log_not_a_file(work, runs):
    victim = os.path.join(work, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    for name, plant in (("fifo", os.mkfifo), ("symlink", lambda path: os.symlink(victim, path))):
        run_dir, command = runs.train_command(name, 2, ["log.tensorboard=true"])
        os.makedirs(run_dir)
        log = os.path.join(run_dir, "sidecar.log")
        plant(log)
        trainer = Trainer(command, sidecar_env())
        try:
            trainer.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(trainer.process.pid, signal.SIGKILL)
            if name == "fifo":  # lets the blocked open go on, so that nothing is left behind
                os.close(os.open(log, os.O_RDONLY | os.O_NONBLOCK))
            check(False, f"{name}: the trainer blocked on RUN/sidecar.log:\n{trainer.console()}")
        console = trainer.stop()
        check(trainer.process.returncode == 0, f"{name}: the run failed:\n{console}")
        check(re.search(r"warning: metrics sidecar: .*sidecar\.log", console), f"{name}: no warning:\n{console}")
        with open(victim) as f:
            check(f.read() == "precious\n", f"{name}: the sidecar's output went through RUN/sidecar.log")


def case_stopped_sidecar_on_resume(work, runs):
    need_packages()
    run_dir, command = runs.train_command("stopped", 1000000, ["log.tensorboard=true"])
    Trainer(command + ["--stop-at-step", "2"], sidecar_env()).finish()
    wait_for_sidecar(run_dir)
    # A sidecar still at work on the directory (as one draining an ended run to W&B online is for a while) is
    # stopped, holding the directory's sidecar lock.
    with open(os.path.join(work, "old_sidecar.log"), "w") as log:
        old = subprocess.Popen([sys.executable, "-u", SIDECAR, run_dir], stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    STARTED.append(old)
    wait_until(lambda: read_state(run_dir).get("pid") == old.pid, 90, "the old sidecar taking the directory")
    os.kill(old.pid, signal.SIGSTOP)
    STOPPED.append(old.pid)
    second = Trainer(command + ["--resume"], sidecar_env())
    second.wait_for_line(rf"warning: metrics sidecar: .*\b{old.pid}\b.*stopped", 90,
                         f"a warning on the console that sidecar {old.pid} is stopped")
    # Once the old one goes on and ends, the new one takes over.
    os.kill(old.pid, signal.SIGCONT)
    old.terminate()
    old.wait(timeout=90)
    wait_until(lambda: read_state(run_dir).get("pid") not in (None, old.pid), 90, "the new sidecar forwarding",
               second.console)
    second.stop()
    wait_for_sidecar(run_dir)
    steps = sorted({r["step"] for r in records(run_dir) if "loss" in r})
    forwarded = [e.step for e in tensorboard_scalars(run_dir).Scalars("train/loss")]
    check(sorted(set(forwarded)) == steps, f"TensorBoard has steps {forwarded}, metrics.jsonl {steps}")


def case_run_ends_while_sidecar_starts(work, runs):
    need_packages()
    # A sidecar whose Python starts slower than the run ends (tests/watch/late_sidecar.py).
    run_dir, _ = runs.train("slow_start", 2, ["log.tensorboard=true"],
                            env=sidecar_env({"NANOFORGE_METRICS_SIDECAR": LATE_SIDECAR}))
    wait_for_sidecar(run_dir)
    forwarded = [e.step for e in tensorboard_scalars(run_dir).Scalars("train/loss")]
    check(forwarded == [1, 2], f"TensorBoard has train/loss steps {forwarded}, the run 1 and 2")


def case_emptied_run_dir(work, runs):
    need_packages()
    run_dir, _ = runs.train("emptied", 8, ["log.tensorboard=true"], env=sidecar_env())
    wait_for_sidecar(run_dir)
    for name in os.listdir(run_dir):  # rm -rf RUN/*: what starts with a dot stays
        if not name.startswith("."):
            path = os.path.join(run_dir, name)
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
    _, output = runs.train("emptied", 4, ["log.tensorboard=true"], env=sidecar_env())
    pid = int(re.search(r"metrics sidecar: pid (\d+)", output).group(1))
    wait_until(lambda: read_state(run_dir).get("pid") == pid and read_state(run_dir).get("finished"), 90,
               "the new run's sidecar finishing", lambda: output)
    wait_for_sidecar(run_dir)
    tags = tensorboard_scalars(run_dir).Tags()["scalars"]
    forwarded = [e.step for e in tensorboard_scalars(run_dir).Scalars("train/loss")] if "train/loss" in tags else []
    check(forwarded == [1, 2, 3, 4], f"the new run's TensorBoard has train/loss steps {forwarded}")


def case_tampered_wandb_run_id_on_resume(work, runs):
    need_packages()
    secret = os.path.join(work, "secret")
    with open(secret, "w") as f:
        f.write("s3cretT0ken\n")
    run_dir, command = runs.train_command("tampered", 1000000, ["log.tensorboard=true"])
    Trainer(command + ["--stop-at-step", "2"], sidecar_env()).finish()
    wait_for_sidecar(run_dir)
    os.symlink(secret, os.path.join(run_dir, "wandb_run_id"))
    second = Trainer(command + ["--resume", "log.wandb_project=nanoforge-test", "log.wandb_mode=offline"],
                     sidecar_env())
    try:
        second.wait_for_line(r"warning: metrics sidecar: .*wandb_run_id", 90,
                             "a warning on the console that wandb_run_id is refused")
    finally:
        second.stop()
    check(not os.path.exists(os.path.join(run_dir, "wandb")), "W&B ran with the contents of another file as its id")


def sparse_log(work, runs):
    run_dir, command = runs.train_command("sparse", 4, ["log.tensorboard=true"])
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "sidecar.log"), "wb") as f:
        f.truncate(2 << 30)  # 2 GiB of holes, no line end
    # The first sidecar dies at once (dying_sidecar.py), so the trainer reads the log to say why.
    env = sidecar_env({"NANOFORGE_METRICS_SIDECAR": DYING_SIDECAR})
    with open(os.path.join(work, "console"), "w+") as console:
        trainer = subprocess.Popen(command, stdout=console, stderr=subprocess.STDOUT, env=dict(os.environ, **env),
                                   start_new_session=True)
        STARTED.append(trainer)
        timer = threading.Timer(180, trainer.kill)
        timer.start()
        _, status, usage = os.wait4(trainer.pid, 0)
        timer.cancel()
        console.seek(0)
        output = console.read()
    check(os.waitstatus_to_exitcode(status) == 0, f"the run failed ({status}):\n{output}")
    check("warning: metrics sidecar stopped (killed by signal 9" in output, f"one warning:\n{output}")
    peak_mib = usage.ru_maxrss / 1024
    check(peak_mib < 1024, f"the trainer peaked at {peak_mib:.0f} MiB with a 2 GiB sparse sidecar.log")
    wait_for_sidecar(run_dir)


CASES = ("bad_records", "samples_across_polls", "symlinked_own_files", "tampered_wandb_run_id", "hostile_sidecar_log",
         "stopped_sidecar_on_resume", "run_ends_while_sidecar_starts", "emptied_run_dir",
         "tampered_wandb_run_id_on_resume")
NEEDS_PROGRAM = ("hostile_sidecar_log", "stopped_sidecar_on_resume", "run_ends_while_sidecar_starts",
                 "emptied_run_dir", "tampered_wandb_run_id_on_resume")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanoforge", required=True)
    parser.add_argument("case", choices=CASES)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix=f"nanoforge_sidecar_{args.case}_")
    try:
        runs = Runs(args.nanoforge, work) if args.case in NEEDS_PROGRAM else None
        globals()["case_" + args.case](work, runs)
    finally:
        for pid in STOPPED:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        for process in STARTED:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"PASSED: {args.case}")


if __name__ == "__main__":
    main()
