#!/usr/bin/env python3
"""Export a nanoforge checkpoint to nanochat's files (model and tokenizer) or to safetensors.

    python3 tools/export_checkpoint.py nanochat    CHECKPOINT BASE_DIR [--tokenizer DIR] [--model-tag d20] [--overwrite]
    python3 tools/export_checkpoint.py safetensors CHECKPOINT OUT.safetensors

CHECKPOINT is a checkpoint directory or a run directory (its latest); BASE_DIR becomes a NANOCHAT_BASE_DIR that
nanochat's own loaders open. The files: docs/checkpoints.md, "nanochat, both ways"; what an export refuses and
never replaces: docs/untrusted-input.md. Needs h5py, and torch and tiktoken (nanochat) or safetensors.
"""

import argparse
import errno
import json
import math
import os
import stat
import sys

import build_python  # the build tree's Python when this one lacks the packages

build_python.require("h5py", "numpy")
import h5py  # noqa: E402
import numpy as np  # noqa: E402

import nanochat_files  # noqa: E402


MAX_METRICS_LINE_BYTES = 1 << 20  # a metrics.jsonl record; the trainer's longest (a sample) is a few kB
# Tries at opening a run's newest checkpoint before it is pruned: each fails only when a whole checkpoint is
# written and the one `latest` named deleted between reading `latest` and opening two files.
OPEN_ATTEMPTS = 20


def resolve_checkpoint(path):
    if os.path.exists(os.path.join(path, "model.h5")):
        return path
    latest = os.path.join(path, "checkpoints", "latest")
    if os.path.exists(latest):
        with open(latest) as f:
            return os.path.join(path, "checkpoints", f.read().strip())
    sys.exit(f"{path}: neither a checkpoint directory (model.h5) nor a run directory with checkpoints/latest")


def open_checkpoint(path):
    """(checkpoint directory, its model.h5 and trainer.h5 open): open files stay readable when the run prunes
    their checkpoint, and a checkpoint gone before they are open is replaced by the run's newest."""
    for _ in range(OPEN_ATTEMPTS):
        checkpoint = resolve_checkpoint(path)
        try:
            model = h5py.File(os.path.join(checkpoint, "model.h5"), "r")
        except FileNotFoundError:
            continue
        try:
            return checkpoint, model, h5py.File(os.path.join(checkpoint, "trainer.h5"), "r")
        except FileNotFoundError:
            model.close()
    sys.exit(f"{path}: its checkpoint was deleted before it could be opened, {OPEN_ATTEMPTS} times (a run pruning "
             "with checkpoint.keep_last faster than that?): export a copy of a checkpoint directory")


def read_model(f):
    config = {key: (value.decode() if isinstance(value, bytes) else value) for key, value in f["config"].attrs.items()}
    config = {key: (str(value) if key == "window_pattern" else int(value)) for key, value in config.items()}
    weights = {name: f["weights"][name][()] for name in f["weights"]}
    return config, weights


def read_trainer(f):
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


def metrics_lines(path):
    """The lines of a run's metrics.jsonl, each at most MAX_METRICS_LINE_BYTES (a longer one is passed over);
    OSError where it cannot be opened or is not a regular file (a FIFO would hold the export)."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        while line := f.readline(MAX_METRICS_LINE_BYTES):
            if line.endswith(b"\n") or len(line) < MAX_METRICS_LINE_BYTES:
                yield line
                continue
            while (rest := f.readline(MAX_METRICS_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass


def run_val_bpb(checkpoint, step):
    """(val_bpb, min_val_bpb, why they are null or ""), as nanochat's meta has them when it saves at `step`: the
    run's last evaluation at or before it, and the lowest of those, from RUN/metrics.jsonl (a checkpoint is
    RUN/checkpoints/step_NNNNNN). A line that is not a JSON record with a whole step and a finite val_bpb is
    passed over: the file is the run's, not the export's to judge."""
    checkpoints = os.path.dirname(os.path.abspath(checkpoint))
    if os.path.basename(checkpoints) != "checkpoints":
        return None, None, f"{checkpoint} is not in a run directory's checkpoints/ (a copy?): no metrics.jsonl"
    path = os.path.join(os.path.dirname(checkpoints), "metrics.jsonl")
    last_step, last, lowest = -1, None, None
    try:
        for line in metrics_lines(path):
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(record, dict):
                continue
            record_step, value = record.get("step"), record.get("val_bpb")
            if (type(record_step) is not int or not 0 <= record_step <= step or isinstance(value, bool)
                    or not isinstance(value, (int, float)) or not math.isfinite(value)):
                continue
            if record_step >= last_step:  # the newest of a step evaluated again after a resume
                last_step, last = record_step, float(value)
            lowest = float(value) if lowest is None else min(lowest, float(value))
    except FileNotFoundError:
        return None, None, f"the run has no {path}"
    except OSError as error:
        return None, None, f"{path}: {error.strerror}"
    if last is None:
        return None, None, f"{path} has no val bpb at or before step {step} (the run evaluated none: train.eval_every)"
    return last, lowest, ""


def tokenizer_to_write(tokenizer, tokenizer_out, overwrite):
    """Whether the export writes BASE_DIR/tokenizer/: not when this tokenizer is there (another checkpoint of the
    run exported before); refused when anything else is, unless --overwrite."""
    pickle_path, token_bytes_path = nanochat_files.nanochat_tokenizer_files(tokenizer_out)
    if overwrite or not (os.path.lexists(pickle_path) or os.path.lexists(token_bytes_path)):
        return True
    try:
        there = nanochat_files.read_nanochat_tokenizer(pickle_path)
        if (there.ranks, there.specials) == (tokenizer.ranks, tokenizer.specials):
            if os.path.lexists(token_bytes_path):
                return False
            found = "this run's tokenizer, but no token_bytes.pt beside it"
        else:
            found = f"another tokenizer (vocab {there.vocab_size()}; this run's has {tokenizer.vocab_size()})"
    except SystemExit as unreadable:
        found = f"something else than a nanochat tokenizer ({unreadable})"
    sys.exit(f"{pickle_path}: BASE_DIR already holds {found}. A NANOCHAT_BASE_DIR has one tokenizer for all its "
             "checkpoints: export into another BASE_DIR, or pass --overwrite to replace it")


def export_nanochat(checkpoint, model_file, trainer_file, base_dir, tokenizer_dir, model_tag, fp32_embeddings,
                    overwrite):
    config, weights = read_model(model_file)
    step, recipe, tokenizer_hash = read_trainer(trainer_file)
    tokenizer = run_tokenizer(tokenizer_dir, recipe, tokenizer_hash, config)
    out_dir = os.path.join(base_dir, "base_checkpoints", model_tag or f"d{config['n_layer']}")
    model_path = os.path.join(out_dir, f"model_{step:06d}.pt")
    meta_path = os.path.join(out_dir, f"meta_{step:06d}.json")
    if not overwrite:
        nanochat_files.refuse_existing([model_path, meta_path], "another run's checkpoint at this step, or an "
                                       "earlier export? Export into another BASE_DIR or --model-tag, or pass "
                                       "--overwrite to replace it")
    tokenizer_out = os.path.join(base_dir, "tokenizer")
    write_tokenizer = tokenizer_to_write(tokenizer, tokenizer_out, overwrite)
    import torch  # after the refusals above: it takes seconds to import

    state = {}
    for name, array in weights.items():
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        embedding = name == "transformer.wte.weight" or name.startswith("value_embeds.")
        state[name] = tensor if fp32_embeddings or not embedding else tensor.to(torch.bfloat16)
    train = recipe.get("train", {})
    model = recipe.get("model", {})
    val_bpb, min_val_bpb, no_val_bpb = run_val_bpb(checkpoint, step)
    meta = {
        "step": step,
        "val_bpb": val_bpb,
        "model_config": {key: config[key] for key in nanochat_files.MODEL_CONFIG_KEYS},
        "user_config": {"source": "nanoforge", "checkpoint": os.path.abspath(checkpoint), "recipe": recipe},
        "device_batch_size": train.get("device_batch_size"),
        "max_seq_len": model.get("max_seq_len", config["sequence_len"]),
        "total_batch_size": train.get("total_batch_size"),
        "dataloader_state_dict": None,
        "loop_state": {"min_val_bpb": min_val_bpb, "smooth_train_loss": None, "total_training_time": None},
    }
    # The tokenizer first and the model last: nanochat finds a checkpoint by its model_NNNNNN.pt.
    with nanochat_files.StagedFiles() as staged:
        if write_tokenizer:
            nanochat_files.write_nanochat_tokenizer(tokenizer, tokenizer_out, staged)
        with staged.open(meta_path, binary=False) as f:
            json.dump(meta, f, indent=2)
        with staged.open(model_path) as f:
            torch.save(state, f)
    print(f"wrote {model_path} and {meta_path} ({len(state)} tensors), and "
          f"{'' if write_tokenizer else 'kept the same '}{tokenizer_out}/tokenizer.pkl and token_bytes.pt "
          f"(vocab {tokenizer.vocab_size()}): NANOCHAT_BASE_DIR={base_dir}")
    print(f"val_bpb {val_bpb:.6f} (min {min_val_bpb:.6f})" if no_val_bpb == "" else f"val_bpb null: {no_val_bpb}")


def export_safetensors(model_file, out_path):
    from safetensors.numpy import save_file

    config, weights = read_model(model_file)
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
    nanochat.add_argument("--overwrite", action="store_true",
                          help="replace the checkpoint at this step and the tokenizer already in BASE_DIR")
    safetensors = sub.add_parser("safetensors", help="one .safetensors file with every parameter in float32")
    safetensors.add_argument("checkpoint")
    safetensors.add_argument("out")
    args = parser.parse_args()
    checkpoint, model_file, trainer_file = open_checkpoint(args.checkpoint)
    with model_file, trainer_file:
        if args.format == "nanochat":
            export_nanochat(checkpoint, model_file, trainer_file, args.base_dir, args.tokenizer, args.model_tag,
                            args.fp32_embeddings, args.overwrite)
        else:
            export_safetensors(model_file, args.out)


if __name__ == "__main__":
    main()
