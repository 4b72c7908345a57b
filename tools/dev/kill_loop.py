#!/usr/bin/env python3
"""Kill a training run with SIGKILL at random moments, again and again, and check that it always resumes exactly.

    python3 tools/dev/kill_loop.py --nanoforge build/bin/nanoforge --kills 100

A one-layer model with a checkpoint after every step is trained once in one go (the reference), then resumed over
and over in one run directory, each time killed after a random delay; every checkpoint, the one `latest` names and
the run let finish at the end must be the reference's, byte for byte (the rules: docs/checkpoints.md, "kill -9,
100 times"). Prints the figures and a JSON line; exits 1 on any mismatch. Standard library only.
"""

import argparse
import filecmp
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN_TOKENIZER = os.path.join(REPO, "tests", "data", "tokenizer", "golden")

RECIPE = """[model]
depth = 1
aspect_ratio = 64
head_dim = 64
max_seq_len = 64
window_pattern = "L"

[data]
train = "{shards}"
val = "{shards}"
tokenizer = "{tokenizer}"

[train]
device_batch_size = 4
total_batch_size = 512
num_iterations = {steps}
warmup_steps = 3
eval_every = -1
sample_every = -1
threads = 1
device = "cpu"

[optim]
unembedding_lr = 0.064
embedding_lr = 2.4
scalar_lr = 4.0
matrix_lr = 0.16

[checkpoint]
every = 1
"""


def write_sentences(path, documents=400, seed=5):
    """Documents of 4-12 sentences drawn from small word lists (a distribution a one-layer model learns)."""
    rng = random.Random(seed)
    subjects = ["The farmer", "A child", "The king", "My neighbour", "The old woman", "A soldier"]
    verbs = ["found", "carried", "sold", "painted", "watched", "remembered", "lost", "opened"]
    objects = ["the red box", "a small boat", "the wooden door", "an apple", "the letter", "a map"]
    endings = ["in the morning", "after the rain", "near the river", "before dinner", "at the market"]
    with open(path, "w") as f:
        for _ in range(documents):
            sentences = [f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(endings)}."
                         for _ in range(rng.randint(4, 12))]
            f.write(" ".join(sentences) + "\n\n")


def run(command, log):
    with open(log, "w") as out:
        return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode


def losses(run_dir):
    """step -> loss as printed, from metrics.jsonl."""
    result = {}
    path = os.path.join(run_dir, "metrics.jsonl")
    if os.path.exists(path):
        for line in open(path):
            record = json.loads(line)
            if "loss" in record:
                result[record["step"]] = record["loss"]
    return result


def same_checkpoint(run_dir, reference, name):
    return all(filecmp.cmp(os.path.join(run_dir, "checkpoints", name, f),
                           os.path.join(reference, "checkpoints", name, f), shallow=False)
               for f in ("model.h5", "optimizer.h5"))


def complete_checkpoints(run_dir):
    root = os.path.join(run_dir, "checkpoints")
    if not os.path.isdir(root):
        return []
    return sorted(n for n in os.listdir(root) if n.startswith("step_") and "." not in n)


def leftovers(run_dir):
    root = os.path.join(run_dir, "checkpoints")
    return sorted(n for n in os.listdir(root) if "partial" in n or "replaced" in n) if os.path.isdir(root) else []


def prepare_reference(nanoforge, work, steps, tool="kill_loop"):
    """The corpus, shards and recipe in `work`, then the reference run (uninterrupted): (recipe, its run directory,
    its seconds). Exits naming the log when prep or the reference run fails."""
    write_sentences(os.path.join(work, "sentences.txt"))
    shards = os.path.join(work, "shards")
    shutil.rmtree(shards, ignore_errors=True)
    if run([nanoforge, "prep", "--input", os.path.join(work, "sentences.txt"), "--tokenizer", GOLDEN_TOKENIZER,
            "--out", shards, "--val-docs", "40", "--threads", "1"], os.path.join(work, "prep.log")) != 0:
        sys.exit(f"{tool}: prep failed, see {work}/prep.log")
    recipe = os.path.join(work, "recipe.toml")
    with open(recipe, "w") as f:
        f.write(RECIPE.format(shards=shards, tokenizer=GOLDEN_TOKENIZER, steps=steps))
    reference = os.path.join(work, "reference")
    shutil.rmtree(reference, ignore_errors=True)
    start = time.monotonic()
    if run([nanoforge, "train", "--recipe", recipe, "--run-dir", reference], reference + ".log") != 0:
        sys.exit(f"{tool}: the reference run failed, see {reference}.log")
    return recipe, reference, time.monotonic() - start


def train_until_killed(nanoforge, recipe, run_dir, log, delay):
    """`train --resume` in run_dir, killed with SIGKILL after `delay` seconds: its exit status, None if killed."""
    with open(log, "w") as out:
        process = subprocess.Popen([nanoforge, "train", "--recipe", recipe, "--run-dir", run_dir, "--resume"],
                                   stdout=out, stderr=subprocess.STDOUT)
        try:
            return process.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
            return None


def judge_killed(run_dir, reference, before, resumed, figures):
    """After a kill: every checkpoint, and the one `latest` names, must be the reference's. The problems."""
    problems = []
    figures["kills"] += 1
    written = [n for n in complete_checkpoints(run_dir) if n not in before]
    for name in complete_checkpoints(run_dir):
        figures["checkpoints_compared"] += 1
        if not same_checkpoint(run_dir, reference, name):
            figures["mismatches"] += 1
            problems.append(f"{run_dir}/checkpoints/{name} differs from the reference")
    if resumed:
        figures["resumes"] += 1
        if not written:
            figures["resumes_undecided"] += 1
        elif all(same_checkpoint(run_dir, reference, n) for n in written):
            figures["resumes_exact"] += 1
    latest = os.path.join(run_dir, "checkpoints", "latest")
    if not os.path.exists(latest):
        figures["kills_before_any_checkpoint"] += 1
        return problems
    name = open(latest).read().strip()
    if same_checkpoint(run_dir, reference, name):
        figures["latest_exact"] += 1
    else:
        problems.append(f"latest ({name}) is not the reference's checkpoint")
    return problems


def judge_finished(run_dir, reference, resumed, figures):
    """A run that finished before its kill must equal the reference whole (checkpoints and losses); it is then
    removed (40 checkpoints a run add up over hundreds of runs). The problem, or None."""
    figures["runs_completed_before_kill"] += 1
    exact = (all(same_checkpoint(run_dir, reference, n) for n in complete_checkpoints(run_dir)) and
             losses(run_dir) == losses(reference))
    figures["checkpoints_compared"] += len(complete_checkpoints(run_dir))
    if resumed:
        figures["resumes"] += 1
        figures["resumes_exact"] += exact
    if not exact:
        figures["mismatches"] += 1
        return f"the finished {run_dir} differs from the reference"
    shutil.rmtree(run_dir)
    return None


def judge_final_resume(nanoforge, recipe, run_dir, reference, steps, figures):
    """The last run, let finish: the whole chain of resumes must end where the reference ended. The problems."""
    problems = []
    final_log = os.path.join(os.path.dirname(run_dir), "final.log")  # beside the run directories
    if run([nanoforge, "train", "--recipe", recipe, "--run-dir", run_dir, "--resume"], final_log) != 0:
        problems.append(f"the final resume failed (see {final_log})")
    final = f"step_{steps:06d}"
    final_exact = (os.path.isdir(os.path.join(run_dir, "checkpoints", final)) and
                   same_checkpoint(run_dir, reference, final) and losses(run_dir) == losses(reference))
    if not final_exact:
        problems.append(f"{run_dir}: the finished run's losses or final checkpoint differ from the reference")
    if leftovers(run_dir):
        problems.append(f"{run_dir}: leftovers of interrupted saves after a resume: {leftovers(run_dir)}")
    figures["final_run_exact"] = final_exact
    figures["leftovers_after_final_resume"] = len(leftovers(run_dir))
    return problems


def print_figures(steps, reference_seconds, figures, problems):
    print(f"kill loop: {steps}-step run, a checkpoint every step; reference {reference_seconds:.1f} s")
    print(f"  runs killed with SIGKILL            {figures['kills']}")
    print(f"    before any checkpoint existed    {figures['kills_before_any_checkpoint']}")
    print(f"    latest then byte-exact           {figures['latest_exact']} of "
          f"{figures['kills'] - figures['kills_before_any_checkpoint']}")
    print(f"  resumes (runs started from a checkpoint) {figures['resumes']}: exact {figures['resumes_exact']}, "
          f"killed before writing a checkpoint to compare {figures['resumes_undecided']}")
    print(f"  checkpoints compared               {figures['checkpoints_compared']}, mismatches "
          f"{figures['mismatches']}")
    print(f"  runs that finished before the kill {figures['runs_completed_before_kill']} (each then compared "
          f"whole: checkpoints and losses)")
    print(f"  final run (resumed to the end)     {'exact' if figures['final_run_exact'] else 'DIFFERS'}; leftovers "
          f"{figures['leftovers_after_final_resume']}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print(json.dumps({"kill_loop": figures, "problems": len(problems)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nanoforge", default=os.path.join(REPO, "build", "bin", "nanoforge"))
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--steps", type=int, default=40, help="steps of the run (a checkpoint after each)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the kill delays")
    parser.add_argument("--work", default="", help="working directory (default: a temporary one, removed)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="nanoforge_kill_loop_")
    os.makedirs(work, exist_ok=True)
    rng = random.Random(args.seed)
    nanoforge = os.path.abspath(args.nanoforge)
    recipe, reference, reference_seconds = prepare_reference(nanoforge, work, args.steps)

    figures = {"kills": 0, "kills_before_any_checkpoint": 0, "latest_exact": 0, "resumes": 0,
               "resumes_exact": 0, "resumes_undecided": 0, "checkpoints_compared": 0, "mismatches": 0,
               "runs_completed_before_kill": 0, "reference_seconds": round(reference_seconds, 2)}
    problems = []
    attempt = 0
    run_dir = os.path.join(work, "run_0")
    while figures["kills"] < args.kills:
        attempt += 1
        before = set(complete_checkpoints(run_dir))
        resumed = os.path.exists(os.path.join(run_dir, "checkpoints", "latest"))
        log = os.path.join(work, f"attempt_{attempt}.log")
        # A delay up to the reference's duration: kills land in start-up, steps, checkpoint writes, `latest`.
        status = train_until_killed(nanoforge, recipe, run_dir, log, rng.uniform(0, reference_seconds))
        if status is None:
            problems += [f"attempt {attempt}: {problem}"
                         for problem in judge_killed(run_dir, reference, before, resumed, figures)]
            continue
        if status != 0:  # failed before the kill
            problems.append(f"attempt {attempt}: exited {status} (see {log})")
            break
        if problem := judge_finished(run_dir, reference, resumed, figures):
            problems.append(f"attempt {attempt}: {problem}")
        run_dir = os.path.join(work, f"run_{attempt}")
    problems += judge_final_resume(nanoforge, recipe, run_dir, reference, args.steps, figures)

    print_figures(args.steps, reference_seconds, figures, problems)
    if not args.work and not problems:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
