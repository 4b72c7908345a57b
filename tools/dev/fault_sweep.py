#!/usr/bin/env python3
"""Inject a full disk, I/O errors and a failing fsync at many points of one checkpoint write, and check each run.

    python3 tools/dev/fault_sweep.py --nanoforge build/bin/nanoforge \\
        --shim build/tests/train/libnanoforge_io_fault_shim.so [--points 9]

The kill loop's run (tools/dev/kill_loop.py) starts with the tests' fault library preloaded, its checkpoint of
step 10 failing with ENOSPC, EIO or EFBIG after N bytes (N spread over its size), or at fsync. Each run must stop
with the error, keep `latest` at step 9 byte for byte, leave nothing of the failed save and resume to the
reference's end (docs/checkpoints.md). Prints the figures and a JSON line; exits 1 on any failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import kill_loop

STEP = 10  # the checkpoint hit by the faults


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nanoforge", default=os.path.join(kill_loop.REPO, "build", "bin", "nanoforge"))
    parser.add_argument("--shim", default=os.path.join(kill_loop.REPO, "build", "tests", "train",
                                                      "libnanoforge_io_fault_shim.so"))
    parser.add_argument("--points", type=int, default=9, help="byte offsets per error, spread over the size")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--work", default="")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="nanoforge_fault_sweep_")
    os.makedirs(work, exist_ok=True)
    nanoforge, shim = os.path.abspath(args.nanoforge), os.path.abspath(args.shim)

    recipe, reference, _ = kill_loop.prepare_reference(nanoforge, work, args.steps, tool="fault_sweep")
    target = os.path.join(reference, "checkpoints", f"step_{STEP:06d}")
    size = sum(os.path.getsize(os.path.join(target, name)) for name in os.listdir(target))

    faults = [(error, size * i // args.points) for error in ("ENOSPC", "EIO", "EFBIG")
              for i in range(args.points)]
    faults.append(("fsync", None))
    figures = {"runs": 0, "stopped_with_the_error": 0, "latest_exact": 0, "no_leftovers": 0,
               "resumed_exact": 0, "checkpoint_bytes": size}
    problems = []
    for index, (error, after) in enumerate(faults):
        run_dir = os.path.join(work, f"run_{index}")
        shutil.rmtree(run_dir, ignore_errors=True)
        env = dict(os.environ, LD_PRELOAD=shim, NANOFORGE_FAULT_PATH=f".step_{STEP:06d}.partial")
        if error == "fsync":
            env["NANOFORGE_FAULT_FSYNC"] = "1"
        else:
            env.update(NANOFORGE_FAULT_ERRNO=error, NANOFORGE_FAULT_AFTER_BYTES=str(after))
        log = run_dir + ".log"
        with open(log, "w") as out:
            status = subprocess.run([nanoforge, "train", "--recipe", recipe, "--run-dir", run_dir],
                                    stdout=out, stderr=subprocess.STDOUT, env=env).returncode
        figures["runs"] += 1
        what = f"{error} after {after} bytes" if after is not None else "failing fsync"
        text = open(log).read()
        previous = f"step_{STEP - 1:06d}"
        if status == 1 and f"checkpoint step_{STEP:06d} was not saved" in text and \
                f"checkpoints/latest still names {previous}" in text:
            figures["stopped_with_the_error"] += 1
        else:
            problems.append(f"{what}: exit {status}, see {log}")
        latest = os.path.join(run_dir, "checkpoints", "latest")
        if os.path.exists(latest) and open(latest).read().strip() == previous and \
                kill_loop.same_checkpoint(run_dir, reference, previous):
            figures["latest_exact"] += 1
        else:
            problems.append(f"{what}: latest is not the reference's {previous}")
        if not kill_loop.leftovers(run_dir) and not os.path.exists(os.path.join(run_dir, "checkpoints",
                                                                                  f"step_{STEP:06d}")):
            figures["no_leftovers"] += 1
        else:
            problems.append(f"{what}: the failed save left {kill_loop.leftovers(run_dir)}")
        final = f"step_{args.steps:06d}"
        if kill_loop.run([nanoforge, "train", "--recipe", recipe, "--run-dir", run_dir, "--resume"],
                         run_dir + ".resume.log") == 0 and \
                kill_loop.same_checkpoint(run_dir, reference, final) and \
                kill_loop.losses(run_dir) == kill_loop.losses(reference):
            figures["resumed_exact"] += 1
        else:
            problems.append(f"{what}: the resumed run differs from the reference (see {run_dir}.resume.log)")

    print(f"fault sweep: faults in the {size}-byte checkpoint of step {STEP}, {figures['runs']} runs")
    for key in ("stopped_with_the_error", "latest_exact", "no_leftovers", "resumed_exact"):
        print(f"  {key.replace('_', ' '):<28} {figures[key]} of {figures['runs']}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print(json.dumps({"fault_sweep": figures, "problems": len(problems)}))
    if not args.work and not problems:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
