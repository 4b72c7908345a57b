"""Write a nanoforge model parity case (HDF5) for any model shape, computed by nanochat_reference.py.

nanochat's own golden case (shared/parity/dev_case1.h5) covers one shape; this tool makes more in exactly its
layout (shared/parity/README.md): weights = nanochat init + N(0, perturb^2) noise so every gradient is non-zero,
stored float32; random inputs; expected loss, logits and gradients computed in float64 from the float32
weights, then stored float32.

  python3 tools/make_parity_case.py --n-layer 3 --n-embd 128 --n-head 4 --n-kv-head 2 --vocab 300 \
      --seq 160 --batch 2 --window-pattern SL --seed 1 --out build-cases/gqa.h5
"""

import argparse
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nanochat_reference as ref  # noqa: E402

NANOCHAT_COMMIT = "92d63d4e8bb4df75c3b71618f31ddde2378b2bcd"  # the behaviour the reference follows


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-layer", type=int, required=True)
    p.add_argument("--n-embd", type=int, required=True)
    p.add_argument("--n-head", type=int, required=True)
    p.add_argument("--n-kv-head", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seq", type=int, required=True, help="sequence_len and the inputs' T")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--window-pattern", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--perturb", type=float, default=0.1, help="std of the noise added to every weight")
    p.add_argument("--targets-ignore-frac", type=float, default=0.0, help="fraction of targets set to -1")
    p.add_argument("--out", required=True)
    return p.parse_args()


def build_case(args):
    """Returns the float64 model and the case's datasets: {"weights": {...}, "inputs": {...}, "expected": {...}}."""
    config = {
        "sequence_len": args.seq, "vocab_size": args.vocab, "n_layer": args.n_layer, "n_head": args.n_head,
        "n_kv_head": args.n_kv_head, "n_embd": args.n_embd, "window_pattern": args.window_pattern,
    }
    model = ref.GPT(config)  # fp32 parameters
    gen = model.init_weights(args.seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * args.perturb)  # rounds to fp32
    weights = {name: t.numpy().copy() for name, t in model.state_dict().items()}

    shape = (args.batch, args.seq)
    idx = torch.randint(0, args.vocab, shape, generator=gen)
    targets = torch.randint(0, args.vocab, shape, generator=gen)
    n_ignored = round(args.targets_ignore_frac * targets.numel())
    assert n_ignored < targets.numel(), "at least one target must count"
    targets.view(-1)[torch.randperm(targets.numel(), generator=gen)[:n_ignored]] = -1

    model.double()  # exact: the fp32 weights (and fp32 rotary tables) widen without rounding
    loss, logits = model(idx, targets)
    loss.backward()
    expected = {"loss": np.float32(loss.item()), "logits": logits.detach().float().numpy()}
    expected.update({f"grads/{name}": p.grad.float().numpy() for name, p in model.named_parameters()})
    inputs = {"idx": idx.numpy(), "targets": targets.numpy()}
    return model, {"weights": weights, "inputs": inputs, "expected": expected}


def write_case(path, args, model, datasets):
    with h5py.File(path, "w") as f:
        cfg = f.create_group("config")
        for key, value in model.config.items():
            cfg.attrs[key] = value if isinstance(value, str) else np.int64(value)

        meta = f.create_group("meta")
        meta.attrs["backout_layer"] = np.int64(model.backout_layer)
        meta.attrs["compute_dtype"] = "float64"
        meta.attrs["generator"] = "nanoforge tools/make_parity_case.py (independent PyTorch reference)"
        meta.attrs["nanochat_commit"] = NANOCHAT_COMMIT
        meta.attrs["padded_vocab_size"] = np.int64(ref.padded_vocab(args.vocab))
        meta.attrs["param_names"] = np.array(list(datasets["weights"]), dtype=h5py.string_dtype())
        meta.attrs["perturb"] = np.float64(args.perturb)
        meta.attrs["rms_eps"] = np.float64(ref.RMS_EPS)
        meta.attrs["rotary_base"] = np.float64(ref.ROTARY_BASE)
        meta.attrs["seed"] = np.int64(args.seed)
        meta.attrs["softcap"] = np.float64(ref.SOFTCAP)
        meta.attrs["targets_ignore_frac"] = np.float64(args.targets_ignore_frac)
        meta.attrs["torch_version"] = str(torch.__version__)
        meta.attrs["ve_layers"] = np.array(sorted(int(i) for i in model.value_embeds), dtype=np.int64)
        meta.attrs["window_sizes"] = np.array([[w, 0] for w in model.windows], dtype=np.int64)

        # weights and expected values float32, inputs int64: the dtypes are set in build_case
        for group, arrays in datasets.items():
            for name, array in arrays.items():
                f.create_dataset(f"{group}/{name}", data=array)


def main():
    args = parse_args()
    model, datasets = build_case(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_case(args.out, args, model, datasets)
    print(f"wrote {args.out}: loss {datasets['expected']['loss']:.6f}, windows {model.windows}")


if __name__ == "__main__":
    main()
