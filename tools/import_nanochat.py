#!/usr/bin/env python3
"""Bring nanochat's tokenizer and base model into nanoforge, to continue a nanochat run here.

    python3 tools/import_nanochat.py tokenizer NANOCHAT_TOKENIZER OUT_DIR [--overwrite]
    python3 tools/import_nanochat.py model     NANOCHAT_CHECKPOINT OUT_DIR [--step N] [--overwrite]

A tokenizer.pkl (or its folder) becomes a nanoforge tokenizer directory; a base_checkpoints/d<N> (or its parents)
becomes OUT_DIR/model.h5, for `model.init_from = "OUT_DIR"`. The files: docs/checkpoints.md, "nanochat, both
ways"; what is refused and never run: docs/untrusted-input.md. Needs torch and h5py.
"""

import argparse

import build_python  # the build tree's Python when this one lacks the packages

build_python.require("numpy")
import nanochat_files  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    tokenizer = sub.add_parser("tokenizer", help="tokenizer.pkl -> a nanoforge tokenizer directory")
    tokenizer.add_argument("source")
    tokenizer.add_argument("out_dir")
    tokenizer.add_argument("--overwrite", action="store_true", help="replace a tokenizer already in OUT_DIR")
    model = sub.add_parser("model", help="model_NNNNNN.pt + meta_NNNNNN.json -> model.h5 for model.init_from")
    model.add_argument("source")
    model.add_argument("out_dir")
    model.add_argument("--step", type=int, help="the checkpoint's step (default: the last)")
    model.add_argument("--overwrite", action="store_true", help="replace the model.h5 of an earlier import")
    args = parser.parse_args()
    if args.what == "tokenizer":
        if not args.overwrite:
            nanochat_files.refuse_existing(nanochat_files.tokenizer_files(args.out_dir),
                                           "pass --overwrite to replace that tokenizer, or give another OUT_DIR")
        loaded = nanochat_files.read_nanochat_tokenizer(args.source)
        nanochat_files.write_nanoforge_tokenizer(loaded, args.out_dir)
        print(f"wrote {args.out_dir}/tokenizer.tiktoken and special_tokens.txt (vocab {loaded.vocab_size()}, "
              f"hash {loaded.nanoforge_hash()})")
    else:
        nanochat_files.check_nanoforge_model_dir(args.out_dir, args.overwrite)
        directory, step = nanochat_files.find_nanochat_checkpoint(args.source, args.step)
        config, weights = nanochat_files.read_nanochat_checkpoint(directory, step)
        path = nanochat_files.write_nanoforge_model(config, weights, args.out_dir)
        print(f"wrote {path} from {directory} step {step} ({len(weights)} tensors; depth {config['n_layer']}, "
              f"sequence {config['sequence_len']}, vocab {config['vocab_size']}, windows "
              f"{config['window_pattern']}): model.init_from = \"{args.out_dir}\"")


if __name__ == "__main__":
    main()
