"""Tiny CPU trainings of the nanoforge program (one layer, 512-token steps over generated sentences), shared
by the tests that need a real run directory: tests/watch/ (the metrics sidecar) and tests/train/'s nanochat
tools test (checkpoints to export and import)."""

import os
import random
import subprocess
import sys

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN_TOKENIZER = os.path.join(SOURCE, "tests/data/tokenizer/golden")


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}")
        sys.exit(1)


class Runs:
    """Shards of generated sentences and runs of the program over them, in one temporary directory."""

    def __init__(self, nanoforge, work):
        self.nanoforge, self.work = nanoforge, work
        rng = random.Random(5)
        words = [["The farmer", "A child", "The king", "A soldier"], ["found", "sold", "painted", "lost"],
                 ["the red box", "a small boat", "an apple", "the letter"], ["at dawn", "near the river"]]
        with open(os.path.join(work, "text.txt"), "w") as f:
            for _ in range(300):
                f.write(" ".join(" ".join(rng.choice(w) for w in words) + "." for _ in range(8)) + "\n\n")
        self.program(["prep", "--input", os.path.join(work, "text.txt"), "--tokenizer", GOLDEN_TOKENIZER,
                      "--out", os.path.join(work, "shards"), "--val-docs", "30"])

    def program(self, arguments, env=None, expect_ok=True):
        result = subprocess.run([self.nanoforge] + arguments, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env)
        if expect_ok and result.returncode != 0:
            print(result.stdout)
            check(False, f"nanoforge {' '.join(arguments[:3])} exited {result.returncode}")
        return result

    def train_command(self, name, steps, overrides=(), extra=()):
        """(run directory, the `nanoforge train` command line) of a run of `steps` steps."""
        shards = os.path.join(self.work, "shards")
        recipe = os.path.join(self.work, "recipe.toml")
        with open(recipe, "w") as f:
            f.write(f"""[model]\ndepth = 1\naspect_ratio = 64\nhead_dim = 64\nmax_seq_len = 64
window_pattern = "L"\n[data]\ntrain = "{shards}"\nval = "{shards}"\ntokenizer = "{GOLDEN_TOKENIZER}"
[train]\ndevice_batch_size = 4\ntotal_batch_size = 512\nnum_iterations = {steps}\nwarmup_steps = 2
eval_every = 4\neval_tokens = 512\nsample_every = 8\nsample_tokens = 3\nthreads = 1\ndevice = "cpu"
[checkpoint]\nevery = 4\n""")
        run_dir = os.path.join(self.work, name)
        return run_dir, [self.nanoforge, "train", "--recipe", recipe, "--run-dir", run_dir, *extra, *overrides]

    def train(self, name, steps, overrides=(), extra=(), env=None):
        run_dir, command = self.train_command(name, steps, overrides, extra)
        environment = dict(os.environ, **(env or {}))
        output = self.program(command[1:], env=environment).stdout
        return run_dir, output
