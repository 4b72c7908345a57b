"""Write nanoforge's committed parity files (model cases and optimizer goldens) from nanochat's own PyTorch code.

Imports nanochat's GPT and MuonAdamW from a nanochat checkout (its optimizer set up by base_train.py's own
statements), runs them in fp32 on the CPU and writes the layouts of tests/parity/golden/README.md; --verify
recomputes existing files from their stored weights, inputs and gradients. Why nanochat's code and not ours, how
base_train is followed and where this differs from a GPU run: docs/parity.md, "Generating cases".

Usage:
  python3 tools/dev/make_nanochat_goldens.py --nanochat PATH_TO_NANOCHAT_CHECKOUT --out tests/parity/golden
  python3 tools/dev/make_nanochat_goldens.py --nanochat PATH --verify FILE.h5 [FILE.h5 ...]
  python3 tools/dev/make_nanochat_goldens.py --nanochat PATH --case gqa.h5 --n-layer 3 --n-embd 128 \\
      --n-head 4 --n-kv-head 2 --vocab 300 --seq 160 [--window-pattern SL --batch 2 --seed 1 --perturb 0.1
      --ignored-targets 0]
The first writes the committed files (MODEL_CASES and OPTIM_GOLDENS); the last writes one model case of any
shape, for checks beyond the committed ones.
PATH is a nanochat checkout (git clone https://github.com/karpathy/nanochat; the files were made at the
commit in PINNED_COMMIT). The commit is read with git; pass --nanochat-commit when PATH is not a git work
tree (for example an exported archive).

Needs: Python 3.10+, torch 2.9.1 (nanochat's pin; a CPU build is enough), numpy, h5py, filelock (imported by
nanochat.common). No GPU, no network.
"""

import argparse
import math
import os
import sys

# Before torch and nanochat are imported: nanochat reads NANOCHAT_DTYPE at import, dynamo reads this.
os.environ["NANOCHAT_DTYPE"] = "float32"
os.environ["TORCH_COMPILE_DISABLE"] = "1"

import h5py  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tools/, a user tool
from nanochat_goldens.checkout import Nanochat  # noqa: E402
from nanochat_goldens.model_cases import MODEL_CASES, make_model_case, verify_model_case  # noqa: E402
from nanochat_goldens.optim_goldens import OPTIM_GOLDENS, make_optim_golden, verify_optim_golden  # noqa: E402


def verify(nc, paths):
    all_passed = True
    for path in paths:
        with h5py.File(path, "r") as f:
            results = verify_optim_golden(nc, f) if "optim_config" in f else verify_model_case(nc, f)
        failed = [r for r in results if not r[3]]
        worst = max(results, key=lambda r: r[1] / r[2] if r[2] else (0 if r[1] == 0 else math.inf))
        print(f"{path}: {len(results) - len(failed)}/{len(results)} within tolerance; "
              f"largest relative to its tolerance: {worst[0]} error {worst[1]:.3g} (tolerance {worst[2]:.3g})")
        for name, error, tolerance, _ in failed[:20]:
            print(f"  FAIL {name}: error {error:.3g} > tolerance {tolerance:.3g}")
        all_passed &= not failed
    return all_passed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanochat", required=True, help="path to a nanochat checkout")
    parser.add_argument("--nanochat-commit", help="the checkout's commit, when it is not a git work tree")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", help="folder to write the committed files into")
    mode.add_argument("--verify", nargs="+", metavar="FILE", help="recompute these files' numbers instead")
    mode.add_argument("--case", metavar="FILE", help="write one model case of the shape given below")
    parser.add_argument("--only", nargs="+", help="with --out: names of the files to write (default: all)")
    shape = parser.add_argument_group("shape of a --case")
    shape.add_argument("--n-layer", type=int)
    shape.add_argument("--n-embd", type=int)
    shape.add_argument("--n-head", type=int)
    shape.add_argument("--n-kv-head", type=int)
    shape.add_argument("--vocab", type=int)
    shape.add_argument("--seq", type=int, help="sequence_len, and the inputs' T")
    shape.add_argument("--window-pattern", default="SL")
    shape.add_argument("--batch", type=int, default=2)
    shape.add_argument("--seed", type=int, default=1)
    shape.add_argument("--perturb", type=float, default=0.1, help="std of the noise added to every weight")
    shape.add_argument("--ignored-targets", type=int, default=0, help="how many targets are set to -1")
    shape.add_argument("--fp8", action="store_true", help="train in FP8 as base_train --fp8 does")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if args.case:
        needed = ("n_layer", "n_embd", "n_head", "n_kv_head", "vocab", "seq")
        missing = [f"--{k.replace('_', '-')}" for k in needed if getattr(args, k) is None]
        if missing:
            parser.error(f"--case needs {' '.join(missing)}")
        spec = dict(config=dict(sequence_len=args.seq, vocab_size=args.vocab, n_layer=args.n_layer,
                                n_head=args.n_head, n_kv_head=args.n_kv_head, n_embd=args.n_embd,
                                window_pattern=args.window_pattern),
                    batch=args.batch, seed=args.seed, perturb=args.perturb, ignored_targets=args.ignored_targets,
                    fp8=args.fp8)
        nc = Nanochat(args.nanochat, args.nanochat_commit)
        os.makedirs(os.path.dirname(os.path.abspath(args.case)), exist_ok=True)
        make_model_case(nc, spec, args.case)
        return
    nc = Nanochat(args.nanochat, args.nanochat_commit)
    if args.verify:
        sys.exit(0 if verify(nc, args.verify) else 1)

    known = [s["name"] for s in MODEL_CASES + OPTIM_GOLDENS]
    unknown = set(args.only or []) - set(known)
    if unknown:
        parser.error(f"unknown names {sorted(unknown)}; known: {known}")
    os.makedirs(args.out, exist_ok=True)
    for spec in MODEL_CASES:
        if not args.only or spec["name"] in args.only:
            make_model_case(nc, spec, os.path.join(args.out, spec["name"] + ".h5"))
    for spec in OPTIM_GOLDENS:
        if not args.only or spec["name"] in args.only:
            make_optim_golden(nc, spec, os.path.join(args.out, spec["name"] + ".h5"))



if __name__ == "__main__":
    main()
