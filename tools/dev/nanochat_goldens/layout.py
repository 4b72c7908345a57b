"""The HDF5 layout the model cases and optimizer goldens share (docs/parity.md, tests/parity/golden/README.md):
/config, /meta, float32 copies, and a file written under a temporary name."""

import os

import h5py
import numpy as np
import torch
from upgrade_h5 import text_of, upgrade_string_attributes

STRING = h5py.string_dtype()


def config_attrs(group, config, fp8=False):
    for key in ("sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd"):
        group.attrs[key] = np.int64(getattr(config, key))
    group.attrs["window_pattern"] = config.window_pattern
    if fp8:
        group.attrs["fp8"] = np.int64(1)  # nanochat's FP8 training (base_train --fp8, tensorwise)


def config_from_file(nc, f):
    attrs = f["config"].attrs
    values = {k: int(attrs[k]) for k in ("sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd")}
    return nc.gpt.GPTConfig(window_pattern=text_of(attrs["window_pattern"]), **values)


def f32(t):
    """A float32 numpy copy (never a view: parameters and optimizer state change in place later)."""
    return t.detach().to(torch.float32).numpy().copy()


def common_meta(meta, nc, **extra):
    meta.attrs["nanochat_commit"] = nc.commit
    # The path this tool had when the goldens were made, so that they regenerate byte for byte.
    meta.attrs["generator"] = "nanoforge tools/make_nanochat_goldens.py (nanochat's own PyTorch code)"
    meta.attrs["torch_version"] = str(torch.__version__)
    meta.attrs["compute_dtype"] = "float32"
    for key, value in extra.items():
        meta.attrs[key] = value


def write_atomically(path, fill):
    partial = path + ".partial"
    with h5py.File(partial, "w", libver=("v108", "v110")) as f:
        fill(f)
        upgrade_string_attributes(f)  # fixed-length: nanoforge reads no variable-length data
    os.replace(partial, path)
