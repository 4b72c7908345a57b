#!/usr/bin/env python3
"""Export a nanoforge checkpoint's model to nanochat's checkpoint format or to safetensors.

    python3 tools/export_checkpoint.py nanochat    CHECKPOINT OUT_DIR   # model_NNNNNN.pt + meta_NNNNNN.json
    python3 tools/export_checkpoint.py safetensors CHECKPOINT OUT.safetensors

CHECKPOINT is a checkpoint directory (with model.h5 and trainer.h5) or a run directory (its latest checkpoint).
The nanochat export is what nanochat's checkpoint_manager loads: the state dict under nanochat's names
(transformer.wte and value_embeds in bfloat16 as nanochat stores them on a GPU, everything else float32;
--fp32-embeddings keeps them float32) saved with torch.save, and a meta JSON with the model config and the
training settings of the run. The nanochat export needs torch; the safetensors one needs the safetensors package
(and numpy); both read the HDF5 files with h5py.
"""

import argparse
import json
import os
import sys

import h5py
import numpy as np


def resolve_checkpoint(path):
    if os.path.exists(os.path.join(path, "model.h5")):
        return path
    latest = os.path.join(path, "checkpoints", "latest")
    if os.path.exists(latest):
        with open(latest) as f:
            return os.path.join(path, "checkpoints", f.read().strip())
    sys.exit(f"{path}: neither a checkpoint directory (model.h5) nor a run directory with checkpoints/latest")


def read_model(checkpoint):
    with h5py.File(os.path.join(checkpoint, "model.h5"), "r") as f:
        config = {key: (value.decode() if isinstance(value, bytes) else value) for key, value in f["config"].attrs.items()}
        config = {key: (str(value) if key == "window_pattern" else int(value)) for key, value in config.items()}
        weights = {name: f["weights"][name][()] for name in f["weights"]}
    return config, weights


def read_trainer(checkpoint):
    with h5py.File(os.path.join(checkpoint, "trainer.h5"), "r") as f:
        if "recipe" in f:  # checkpoint format 2: every value a dataset
            step, recipe_text = int(f["step"][0]), bytes(f["recipe"][:]).decode("utf-8")
        else:  # format 1: attributes
            step, recipe_text = int(f.attrs["step"]), f.attrs["recipe"]
    recipe_text = recipe_text.decode() if isinstance(recipe_text, bytes) else recipe_text
    try:
        import tomllib  # Python 3.11+
        recipe = tomllib.loads(recipe_text)
    except ImportError:
        recipe = {}
    return step, recipe


def export_nanochat(checkpoint, out_dir, fp32_embeddings):
    import torch

    config, weights = read_model(checkpoint)
    step, recipe = read_trainer(checkpoint)
    state = {}
    for name, array in weights.items():
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        embedding = name == "transformer.wte.weight" or name.startswith("value_embeds.")
        state[name] = tensor if fp32_embeddings or not embedding else tensor.to(torch.bfloat16)
    train = recipe.get("train", {})
    model = recipe.get("model", {})
    meta = {
        "step": step,
        "val_bpb": None,
        "model_config": {key: config[key] for key in
                         ("sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd", "window_pattern")},
        "user_config": {"source": "nanoforge", "checkpoint": os.path.abspath(checkpoint), "recipe": recipe},
        "device_batch_size": train.get("device_batch_size"),
        "max_seq_len": model.get("max_seq_len", config["sequence_len"]),
        "total_batch_size": train.get("total_batch_size"),
        "dataloader_state_dict": None,
        "loop_state": {"min_val_bpb": None, "smooth_train_loss": None, "total_training_time": None},
    }
    os.makedirs(out_dir, exist_ok=True)
    model_path = os.path.join(out_dir, f"model_{step:06d}.pt")
    meta_path = os.path.join(out_dir, f"meta_{step:06d}.json")
    torch.save(state, model_path)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=2)
    print(f"wrote {model_path} and {meta_path} ({len(state)} tensors)")


def export_safetensors(checkpoint, out_path):
    from safetensors.numpy import save_file

    config, weights = read_model(checkpoint)
    metadata = {key: str(value) for key, value in config.items()}
    metadata["format"] = "nanochat-gpt"
    save_file({name: np.ascontiguousarray(array) for name, array in weights.items()}, out_path, metadata=metadata)
    print(f"wrote {out_path} ({len(weights)} tensors, float32)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="format", required=True)
    nanochat = sub.add_parser("nanochat", help="model_NNNNNN.pt + meta_NNNNNN.json for nanochat")
    nanochat.add_argument("checkpoint")
    nanochat.add_argument("out_dir")
    nanochat.add_argument("--fp32-embeddings", action="store_true", help="keep wte and value_embeds in float32")
    safetensors = sub.add_parser("safetensors", help="one .safetensors file with every parameter in float32")
    safetensors.add_argument("checkpoint")
    safetensors.add_argument("out")
    args = parser.parse_args()
    checkpoint = resolve_checkpoint(args.checkpoint)
    if args.format == "nanochat":
        export_nanochat(checkpoint, args.out_dir, args.fp32_embeddings)
    else:
        export_safetensors(checkpoint, args.out)


if __name__ == "__main__":
    main()
