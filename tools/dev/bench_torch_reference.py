"""Time forward+backward of nanochat_reference.GPT on CPU in fp32: the PyTorch baseline for nanoforge's CPU path.

Model sizing follows nanochat's base_train: n_embd = ceil(depth*64 / 128) * 128 and heads = n_embd / 128,
unless --n-embd / --n-head are given; n_kv_head = n_head. Prints the median step time over --steps timed
steps (after warm-up) and tokens/s = batch*seq / median.

  python3 tools/dev/bench_torch_reference.py --depth 4 --n-embd 256 --n-head 2 --vocab 8192 --seq 256 \
      --batch 8 --threads 2 --steps 5
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nanochat_reference as ref  # noqa: E402

ASPECT_RATIO = 64
HEAD_DIM = 128


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=None, help="default: depth*64 rounded up to a multiple of 128")
    p.add_argument("--n-head", type=int, default=None, help="default: n_embd / 128")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--window-pattern", default="SSSL")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads; default: torch's choice")
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=1)
    return p.parse_args()


def main():
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n_embd = args.n_embd or ref.ceil_div(args.depth * ASPECT_RATIO, HEAD_DIM) * HEAD_DIM
    n_head = args.n_head or n_embd // HEAD_DIM
    config = {
        "sequence_len": args.seq, "vocab_size": args.vocab, "n_layer": args.depth, "n_head": n_head,
        "n_kv_head": n_head, "n_embd": n_embd, "window_pattern": args.window_pattern,
    }
    model = ref.GPT(config)
    gen = model.init_weights(0)
    idx = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)
    targets = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)

    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        model.zero_grad(set_to_none=True)
        loss, _ = model(idx, targets)
        loss.backward()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)

    median = statistics.median(times)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"config {config}, {n_params:,} params, threads {torch.get_num_threads()}")
    print(f"fwd+bwd median {median * 1e3:.1f} ms over {args.steps} steps | {args.batch * args.seq / median:,.0f} tok/s")


if __name__ == "__main__":
    main()
