#!/usr/bin/env python3
"""Hostile and concurrent inputs of tools/import_nanochat.py and tools/export_checkpoint.py.

    test_nanochat_tools.py --nanoforge BIN CASE

code_in_pickles: a tokenizer.pkl or model_NNNNNN.pt that runs a command when unpickled is refused, naming the
file and the global it names, and the command never runs; so is a .pt in torch's format from before 1.6.
existing_files_kept: an export or import never replaces another run's files (a tokenizer, a checkpoint at the
same step, a nanoforge checkpoint) unless --overwrite, and with it leaves no half-written file; the exported
meta holds the run's val bpb.
export_while_checkpoints_pruned: exports of a run that trains with keep_last=2 and a checkpoint every step all
succeed. Exit 77 (CTest's skip) where the build's Python lacks torch,
tiktoken or h5py.
"""

import argparse
import importlib.util
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "watch"))
from tiny_runs import GOLDEN_TOKENIZER, SOURCE, Runs, check  # noqa: E402

sys.path.insert(0, os.path.join(SOURCE, "tools"))
import nanochat_files  # noqa: E402

SKIP = 77
# Without the fix every export of a run pruning a checkpoint a step fails (the issue saw 4 of 4); 2 show it.
EXPORTS_WHILE_PRUNED = 2
TOOLS = os.path.join(SOURCE, "tools")


def tool(script, *arguments):
    return subprocess.run([sys.executable, os.path.join(TOOLS, script), *arguments], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def refused(result, *phrases):
    check(result.returncode != 0, f"expected a refusal, got exit 0:\n{result.stdout}")
    for phrase in phrases:
        check(phrase in result.stdout, f"the refusal does not say {phrase!r}:\n{result.stdout}")


def succeeded(result):
    check(result.returncode == 0, f"exit {result.returncode}:\n{result.stdout}")


def snapshot(directory):
    """{relative path: bytes} of every file under `directory`."""
    files = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, directory)] = f.read()
    return files


class RunsCommand:
    """Unpickling it runs `touch MARKER` (os.system), as a crafted file would."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def case_code_in_pickles(work, runs):
    tokenizer_pickle_refused(work)
    checkpoint_pickle_refused(work)


def tokenizer_pickle_refused(work):
    marker = os.path.join(work, "ran")
    crafted = os.path.join(work, "crafted", "tokenizer.pkl")
    os.makedirs(os.path.dirname(crafted))
    with open(crafted, "wb") as f:
        pickle.dump(RunsCommand(marker), f)
    result = tool("import_nanochat.py", "tokenizer", crafted, os.path.join(work, "out"))
    check(not os.path.exists(marker), f"importing {crafted} ran its command:\n{result.stdout}")
    refused(result, crafted, "posix.system")
    check(not os.path.exists(os.path.join(work, "out")), "a refused import wrote its output directory")

    # tiktoken's own pickling of a registered encoding is by name, which tiktoken would fetch from the network.
    by_name = os.path.join(work, "by_name.pkl")
    with open(by_name, "wb") as f:
        f.write(b"\x80\x04" + b"\x8c\x0dtiktoken.core" + b"\x8c\x08Encoding" + b"\x93)\x81"  # Encoding()
                + b"\x8c\x0bcl100k_base" + b"b.")  # its state: a name
    refused(tool("import_nanochat.py", "tokenizer", by_name, os.path.join(work, "out")), by_name)

    # What nanochat writes (tiktoken's Encoding pickled) still imports, to the same files.
    golden = nanochat_files.read_nanoforge_tokenizer(GOLDEN_TOKENIZER)
    nanochat_files.write_nanochat_tokenizer(golden, os.path.join(work, "nanochat"))
    succeeded(tool("import_nanochat.py", "tokenizer", os.path.join(work, "nanochat"), os.path.join(work, "out")))
    for name in ("tokenizer.tiktoken", "special_tokens.txt"):
        with open(os.path.join(work, "out", name), "rb") as a, open(os.path.join(GOLDEN_TOKENIZER, name), "rb") as b:
            check(a.read() == b.read(), f"the imported {name} differs from the golden one")


def checkpoint_pickle_refused(work):
    import torch

    marker = os.path.join(work, "ran_from_pt")
    checkpoint = os.path.join(work, "base_checkpoints", "d1")
    os.makedirs(checkpoint)
    crafted = os.path.join(checkpoint, "model_000001.pt")
    torch.save({"transformer.wte.weight": RunsCommand(marker)}, crafted)
    config = {"sequence_len": 64, "vocab_size": 2048, "n_layer": 1, "n_head": 1, "n_kv_head": 1, "n_embd": 64,
              "window_pattern": "L"}
    with open(os.path.join(checkpoint, "meta_000001.json"), "w") as f:
        json.dump({"step": 1, "model_config": config}, f)
    result = tool("import_nanochat.py", "model", work, os.path.join(work, "model_out"))
    check(not os.path.exists(marker), f"importing {crafted} ran its command:\n{result.stdout}")
    refused(result, crafted, "posix.system")

    # torch's format before 1.6, which torch.load's weights_only did not make safe before torch 2.6.
    torch.save({"transformer.wte.weight": torch.zeros(2)}, crafted, _use_new_zipfile_serialization=False)
    refused(tool("import_nanochat.py", "model", work, os.path.join(work, "model_out")), crafted, "zip format")


def case_existing_files_kept(work, runs):
    run, _ = runs.train("run", 4, ["checkpoint.every=2"])  # checkpoints at steps 2 and 4
    export_keeps_existing_files(work, run)
    exported_meta_has_val_bpb(work, run)
    import_keeps_existing_files(work, run)


def export_keeps_existing_files(work, run):
    base = os.path.join(work, "base")
    golden = nanochat_files.read_nanoforge_tokenizer(GOLDEN_TOKENIZER)
    other = nanochat_files.Tokenizer(golden.ranks[:-1], [(name, i - 1) for name, i in golden.specials])
    nanochat_files.write_nanochat_tokenizer(other, os.path.join(base, "tokenizer"))
    before = snapshot(base)
    refused(tool("export_checkpoint.py", "nanochat", run, base), os.path.join(base, "tokenizer", "tokenizer.pkl"),
            "--overwrite")
    check(snapshot(base) == before, "a refused export changed the files of the base directory")

    succeeded(tool("export_checkpoint.py", "nanochat", run, base, "--overwrite"))
    exported = nanochat_files.read_nanochat_tokenizer(os.path.join(base, "tokenizer"))
    check(exported.ranks == golden.ranks, "--overwrite did not replace the tokenizer")
    leftovers = [name for name in snapshot(base) if "partial" in name]
    check(not leftovers, f"--overwrite left {leftovers}")

    # Another step of the same run, with the same tokenizer: nothing of the first export is replaced.
    before = snapshot(base)
    succeeded(tool("export_checkpoint.py", "nanochat", os.path.join(run, "checkpoints", "step_000002"), base))
    after = snapshot(base)
    check(all(after[name] == data for name, data in before.items()), "exporting step 2 changed the step-4 files")
    check("base_checkpoints/d1/model_000002.pt" in after, "step 2 was not exported")

    # The same step again (another run's, or a rerun): refused, the first kept.
    refused(tool("export_checkpoint.py", "nanochat", run, base),
            os.path.join(base, "base_checkpoints", "d1", "model_000004.pt"), "--overwrite")
    check(snapshot(base) == after, "a refused export changed the files of the base directory")


def exported_meta_has_val_bpb(work, run):
    """The exports above (steps 2 and 4 of a run evaluated at steps 0 and 4): their meta holds val bpb as
    nanochat's does when it saves, the last evaluation at or before the step and the lowest; a checkpoint
    exported away from its run has none, and the export says why."""
    with open(os.path.join(run, "metrics.jsonl")) as f:
        evaluations = [(r["step"], r["val_bpb"]) for r in map(json.loads, f) if "val_bpb" in r]
    check([step for step, _ in evaluations] == [0, 4], f"the run's evaluations {evaluations}")
    for step in (2, 4):
        with open(os.path.join(work, "base", "base_checkpoints", "d1", f"meta_{step:06d}.json")) as f:
            meta = json.load(f)
        values = [value for at, value in evaluations if at <= step]
        check(meta["val_bpb"] == values[-1] and meta["loop_state"]["min_val_bpb"] == min(values),
              f"meta of step {step}: val_bpb {meta['val_bpb']}, min {meta['loop_state']['min_val_bpb']}; the run's "
              f"evaluations {evaluations}")
    alone = os.path.join(work, "alone", "step_000002")
    shutil.copytree(os.path.join(run, "checkpoints", "step_000002"), alone)
    result = tool("export_checkpoint.py", "nanochat", alone, os.path.join(work, "base_alone"))
    succeeded(result)
    with open(os.path.join(work, "base_alone", "base_checkpoints", "d1", "meta_000002.json")) as f:
        meta = json.load(f)
    check(meta["val_bpb"] is None and f"val_bpb null: {alone} is not in a run directory's" in result.stdout,
          f"a checkpoint away from its run: val_bpb {meta['val_bpb']}, the export said:\n{result.stdout}")


def import_keeps_existing_files(work, run):
    base = os.path.join(work, "base")  # the export above: steps 2 and 4 and the run's tokenizer
    checkpoint = os.path.join(run, "checkpoints", "step_000004")
    before = snapshot(checkpoint)
    for overwrite in ([], ["--overwrite"]):
        refused(tool("import_nanochat.py", "model", base, checkpoint, *overwrite), checkpoint, "manifest.txt")
        check(snapshot(checkpoint) == before, f"import {' '.join(overwrite)} changed the checkpoint {checkpoint}")

    imported = os.path.join(work, "imported")  # an earlier import's model.h5 (its bytes do not matter here)
    os.makedirs(imported)
    with open(os.path.join(imported, "model.h5"), "wb") as f:
        f.write(b"an earlier import")
    before = snapshot(imported)
    refused(tool("import_nanochat.py", "model", base, imported), os.path.join(imported, "model.h5"), "--overwrite")
    check(snapshot(imported) == before, "a refused import changed the earlier import")
    succeeded(tool("import_nanochat.py", "model", base, imported, "--overwrite"))
    check(sorted(os.listdir(imported)) == ["model.h5"], f"--overwrite left {sorted(os.listdir(imported))}")
    check(snapshot(imported) != before, "--overwrite did not replace model.h5")

    tokenizer = os.path.join(work, "tokenizer")
    succeeded(tool("import_nanochat.py", "tokenizer", os.path.join(base, "tokenizer"), tokenizer))
    before = snapshot(tokenizer)
    refused(tool("import_nanochat.py", "tokenizer", os.path.join(base, "tokenizer"), tokenizer), tokenizer,
            "--overwrite")
    check(snapshot(tokenizer) == before, "a refused import changed the earlier tokenizer")
    succeeded(tool("import_nanochat.py", "tokenizer", os.path.join(base, "tokenizer"), tokenizer, "--overwrite"))
    check(snapshot(tokenizer) == before, "the tokenizer imported again differs")


def case_export_while_checkpoints_pruned(work, runs):
    # A checkpoint every step, the two newest kept: each export's checkpoint is soon deleted under it.
    run, command = runs.train_command("pruned", 1000000, ["checkpoint.every=1", "checkpoint.keep_last=2"])
    with open(os.path.join(work, "trainer.log"), "w") as log:
        trainer = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while not os.path.exists(os.path.join(run, "checkpoints", "latest")):
            check(trainer.poll() is None and time.time() < deadline, "the run wrote no checkpoint")
            time.sleep(0.1)
        failures = []
        for attempt in range(EXPORTS_WHILE_PRUNED):
            result = tool("export_checkpoint.py", "nanochat", run, os.path.join(work, f"export{attempt}"))
            if result.returncode != 0:
                failures.append(result.stdout.strip().splitlines()[-1])
        check(trainer.poll() is None, "the run ended before the exports did: they raced nothing")
        check(not failures, f"{len(failures)} of {EXPORTS_WHILE_PRUNED} exports failed: {failures}")
    finally:
        trainer.send_signal(signal.SIGTERM)
        trainer.wait(timeout=120)


CASES = ("code_in_pickles", "existing_files_kept", "export_while_checkpoints_pruned")
NEEDS_PROGRAM = ("existing_files_kept", "export_while_checkpoints_pruned")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanoforge", required=True)
    parser.add_argument("case", choices=CASES)
    args = parser.parse_args()
    missing = [name for name in ("h5py", "tiktoken", "torch") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"SKIPPED: {sys.executable} cannot run the nanochat tools (no {', '.join(missing)})")
        sys.exit(SKIP)
    work = tempfile.mkdtemp(prefix=f"nanoforge_nanochat_tools_{args.case}_")
    try:
        globals()["case_" + args.case](work, Runs(args.nanoforge, work) if args.case in NEEDS_PROGRAM else None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"PASSED: {args.case}")


if __name__ == "__main__":
    main()
