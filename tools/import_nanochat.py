#!/usr/bin/env python3
"""Bring nanochat's tokenizer and base model into nanoforge, to continue a nanochat run here.

    python3 tools/import_nanochat.py tokenizer NANOCHAT_TOKENIZER OUT_DIR [--overwrite]
    python3 tools/import_nanochat.py model     NANOCHAT_CHECKPOINT OUT_DIR [--step N] [--overwrite]

tokenizer: NANOCHAT_TOKENIZER is a tokenizer.pkl, or the directory holding it (NANOCHAT_BASE_DIR/tokenizer);
OUT_DIR becomes a nanoforge tokenizer directory (tokenizer.tiktoken + special_tokens.txt), the files nanoforge
itself would write for those ranks.
model: NANOCHAT_CHECKPOINT is a base_checkpoints/d<depth> directory (model_NNNNNN.pt + meta_NNNNNN.json), a
base_checkpoints directory or a NANOCHAT_BASE_DIR (the deepest model, the last step unless --step); OUT_DIR gets
a model.h5 in nanoforge's checkpoint layout, which a recipe starts from with `model.init_from = "OUT_DIR"`.
bfloat16 tensors become float32 exactly; keys are prepared as nanochat's build_model prepares them. Needs torch
and h5py. The recipe must build the same model (depth, sequence length, window pattern, the tokenizer's vocab):
nanoforge checks the shape when it loads the weights.
Nothing in nanochat's files is run: a tokenizer.pkl that names anything but tiktoken's Encoding, or a .pt that
holds anything but tensors, is refused (tools/nanochat_files.py). Files already in OUT_DIR are replaced only
with --overwrite, and the model only in a directory of its own (never a nanoforge checkpoint); what is written
goes beside and is renamed into place.
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
