#!/usr/bin/env python3
"""Export a nanoforge checkpoint to nanochat's files (model and tokenizer) or to safetensors.

    python3 tools/export_checkpoint.py nanochat    CHECKPOINT BASE_DIR [--tokenizer DIR] [--model-tag d20]
    python3 tools/export_checkpoint.py safetensors CHECKPOINT OUT.safetensors

CHECKPOINT is a checkpoint directory (with model.h5 and trainer.h5) or a run directory (its latest checkpoint).
The nanochat export makes BASE_DIR a NANOCHAT_BASE_DIR that nanochat's own loaders open
(checkpoint_manager.load_model("base", ...), tokenizer.get_tokenizer(), get_token_bytes()):
  BASE_DIR/base_checkpoints/d<depth>/model_NNNNNN.pt  the state dict under nanochat's names (transformer.wte and
                                                      value_embeds in bfloat16 as nanochat stores them on a GPU,
                                                      everything else float32; --fp32-embeddings keeps them
                                                      float32, and the round trip through import_nanochat.py
                                                      then gives back the weights bit for bit)
  BASE_DIR/base_checkpoints/d<depth>/meta_NNNNNN.json the model config and the run's training settings
  BASE_DIR/tokenizer/tokenizer.pkl, token_bytes.pt    the run's tokenizer (the recipe's data.tokenizer, or
                                                      --tokenizer DIR; its hash must be the checkpoint's)
The nanochat export needs torch and tiktoken (tools/nanochat_files.py); the safetensors one needs the safetensors
package (and numpy); both read the HDF5 files with h5py.
"""

import argparse
import json
import os
import sys

import h5py
import numpy as np

import nanochat_files


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
            tokenizer_hash = bytes(f["tokenizer_hash"][:]).decode("utf-8")
        else:  # format 1: attributes
            step, recipe_text, tokenizer_hash = int(f.attrs["step"]), f.attrs["recipe"], f.attrs["tokenizer_hash"]
    recipe_text = recipe_text.decode() if isinstance(recipe_text, bytes) else recipe_text
    tokenizer_hash = tokenizer_hash.decode() if isinstance(tokenizer_hash, bytes) else str(tokenizer_hash)
    try:
        import tomllib  # Python 3.11+
        recipe = tomllib.loads(recipe_text)
    except ImportError:
        recipe = {}
    return step, recipe, tokenizer_hash


def run_tokenizer(tokenizer_dir, recipe, tokenizer_hash, config):
    """The tokenizer the checkpoint was trained with: --tokenizer, else the recipe's, checked by hash."""
    tokenizer_dir = tokenizer_dir or recipe.get("data", {}).get("tokenizer")
    if not tokenizer_dir or not os.path.isdir(tokenizer_dir):
        sys.exit(f"the run's tokenizer directory {tokenizer_dir!r} is not here: pass --tokenizer DIR")
    tokenizer = nanochat_files.read_nanoforge_tokenizer(tokenizer_dir)
    if tokenizer.nanoforge_hash() != tokenizer_hash:
        sys.exit(f"tokenizer {tokenizer_dir} (hash {tokenizer.nanoforge_hash()}) is not the one the checkpoint was "
                 f"trained with (hash {tokenizer_hash}): pass --tokenizer DIR")
    if tokenizer.vocab_size() != config["vocab_size"]:
        sys.exit(f"tokenizer {tokenizer_dir} has {tokenizer.vocab_size()} tokens, the model {config['vocab_size']}")
    return tokenizer


def export_nanochat(checkpoint, base_dir, tokenizer_dir, model_tag, fp32_embeddings):
    import torch

    config, weights = read_model(checkpoint)
    step, recipe, tokenizer_hash = read_trainer(checkpoint)
    tokenizer = run_tokenizer(tokenizer_dir, recipe, tokenizer_hash, config)
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
        "model_config": {key: config[key] for key in nanochat_files.MODEL_CONFIG_KEYS},
        "user_config": {"source": "nanoforge", "checkpoint": os.path.abspath(checkpoint), "recipe": recipe},
        "device_batch_size": train.get("device_batch_size"),
        "max_seq_len": model.get("max_seq_len", config["sequence_len"]),
        "total_batch_size": train.get("total_batch_size"),
        "dataloader_state_dict": None,
        "loop_state": {"min_val_bpb": None, "smooth_train_loss": None, "total_training_time": None},
    }
    out_dir = os.path.join(base_dir, "base_checkpoints", model_tag or f"d{config['n_layer']}")
    os.makedirs(out_dir, exist_ok=True)
    model_path = os.path.join(out_dir, f"model_{step:06d}.pt")
    meta_path = os.path.join(out_dir, f"meta_{step:06d}.json")
    torch.save(state, model_path)
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
    tokenizer_out = os.path.join(base_dir, "tokenizer")
    nanochat_files.write_nanochat_tokenizer(tokenizer, tokenizer_out)
    print(f"wrote {model_path} and {meta_path} ({len(state)} tensors), and {tokenizer_out}/tokenizer.pkl and "
          f"token_bytes.pt (vocab {tokenizer.vocab_size()}): NANOCHAT_BASE_DIR={base_dir}")


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
    nanochat = sub.add_parser("nanochat", help="a NANOCHAT_BASE_DIR: base_checkpoints/d<depth>/ and tokenizer/")
    nanochat.add_argument("checkpoint")
    nanochat.add_argument("base_dir")
    nanochat.add_argument("--tokenizer", help="the run's tokenizer directory (default: the recipe's data.tokenizer)")
    nanochat.add_argument("--model-tag", help="the folder under base_checkpoints/ (default: d<depth>)")
    nanochat.add_argument("--fp32-embeddings", action="store_true", help="keep wte and value_embeds in float32")
    safetensors = sub.add_parser("safetensors", help="one .safetensors file with every parameter in float32")
    safetensors.add_argument("checkpoint")
    safetensors.add_argument("out")
    args = parser.parse_args()
    checkpoint = resolve_checkpoint(args.checkpoint)
    if args.format == "nanochat":
        export_nanochat(checkpoint, args.base_dir, args.tokenizer, args.model_tag, args.fp32_embeddings)
    else:
        export_safetensors(checkpoint, args.out)


if __name__ == "__main__":
    main()
