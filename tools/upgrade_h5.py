#!/usr/bin/env python3
"""Rewrite HDF5 files of an older nanoforge (or written by h5py's defaults) into the form nanoforge reads now:
strings fixed-length, never variable-length (docs/untrusted-input.md says why), and checkpoints in format 2.

    python3 tools/upgrade_h5.py strings FILE...          # token shards, parity goldens: string attributes only
    python3 tools/upgrade_h5.py checkpoint CHECKPOINT...  # a format-1 checkpoint directory (step_NNNNNN/)

`strings` rewrites each variable-length string attribute in place, as a fixed-length UTF-8 one with the same text.
`checkpoint` writes the upgraded checkpoint beside the old one, which stays as CHECKPOINT.format1 until deleted.
"""

import argparse
import os
import shutil
import sys
import zlib

import build_python  # the build tree's Python when this one lacks the packages

build_python.require("h5py", "numpy")
import h5py  # noqa: E402
import numpy as np  # noqa: E402

CHECKPOINT_FORMAT = 2
CHECKPOINT_FILES = ("model.h5", "optimizer.h5", "trainer.h5")


def fixed_strings(values):
    """A fixed-length UTF-8 string (or array of them) holding `values` (str or a sequence of str)."""
    scalar = isinstance(values, (str, bytes))
    items = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in ([values] if scalar else values)]
    encoded = [item.encode("utf-8") for item in items]
    dtype = h5py.string_dtype("utf-8", max([len(e) for e in encoded] + [1]))
    return np.array(encoded[0] if scalar else encoded, dtype=dtype)


def is_variable_string(attrs, name):
    info = h5py.check_string_dtype(attrs.get_id(name).dtype)
    return attrs.get_id(name).dtype.kind == "O" or (info is not None and info.length is None)


def upgrade_string_attributes(h5):
    """Rewrites the variable-length string attributes of every object of an open file; returns their count."""
    objects = [h5]
    h5.visititems(lambda name, obj: objects.append(obj))
    count = 0
    for obj in objects:
        for name in list(obj.attrs.keys()):
            if not is_variable_string(obj.attrs, name):
                continue
            value = obj.attrs[name]
            text = value if isinstance(value, (str, bytes)) else list(np.asarray(value).ravel())
            del obj.attrs[name]
            obj.attrs[name] = fixed_strings(text)
            count += 1
    return count


def text_of(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def checksummed(h5, name, values):
    """A 1-D dataset with a Fletcher-32 checksum (chunked: filters need chunks), as nanoforge writes them."""
    values = np.asarray(values)
    h5.create_dataset(name, data=values, chunks=(max(len(values), 1),), maxshape=(None,) if len(values) == 0 else None,
                      fletcher32=True, track_times=False)


def write_manifest(directory):
    lines = [f"nanoforge-checkpoint {CHECKPOINT_FORMAT}"]
    for name in CHECKPOINT_FILES:
        if not os.path.exists(os.path.join(directory, name)):
            continue  # a checkpoint kept for inference has no optimizer.h5
        path = os.path.join(directory, name)
        crc = 0
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                crc = zlib.crc32(block, crc)
        lines.append(f"{name} {os.path.getsize(path)} {crc:08x}")
    with open(os.path.join(directory, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())


def upgrade_checkpoint(checkpoint):
    checkpoint = checkpoint.rstrip("/")
    if os.path.exists(os.path.join(checkpoint, "manifest.txt")):
        print(f"{checkpoint}: already format {CHECKPOINT_FORMAT} (has manifest.txt)")
        return
    work = checkpoint + ".upgrading"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # A checkpoint kept only for inference (eval, sample) may have no optimizer.h5; it stays without one.
    with_optimizer = os.path.exists(os.path.join(checkpoint, "optimizer.h5"))
    for name in ("model.h5", "optimizer.h5") if with_optimizer else ("model.h5",):
        shutil.copy2(os.path.join(checkpoint, name), os.path.join(work, name))
    with h5py.File(os.path.join(work, "model.h5"), "r+") as f:
        upgrade_string_attributes(f)
        f.attrs["checkpoint_format"] = np.int64(CHECKPOINT_FORMAT)
    if with_optimizer:
        with h5py.File(os.path.join(work, "optimizer.h5"), "r+") as f:
            steps = np.int64(f.attrs["steps_taken"])
            del f.attrs["steps_taken"]
            checksummed(f, "steps_taken", np.array([steps], dtype=np.int64))
            f.attrs["checkpoint_format"] = np.int64(CHECKPOINT_FORMAT)
    with h5py.File(os.path.join(checkpoint, "trainer.h5"), "r") as old, \
            h5py.File(os.path.join(work, "trainer.h5"), "w", track_order=False) as new:
        new.attrs["checkpoint_format"] = np.int64(CHECKPOINT_FORMAT)
        checksummed(new, "step", np.array([int(old.attrs["step"])], dtype=np.int64))
        checksummed(new, "training_seconds", np.array([float(old["training_seconds"][()])], dtype=np.float64))
        for name in ("recipe", "tokenizer_hash", "nanoforge_version", "git_commit"):
            checksummed(new, name, np.frombuffer(text_of(old.attrs[name]).encode("utf-8"), dtype=np.uint8))
        checksummed(new, "loader_state", np.asarray(old["loader_state"][()], dtype=np.uint8))
    write_manifest(work)
    backup = checkpoint + ".format1"
    os.rename(checkpoint, backup)
    os.rename(work, checkpoint)
    print(f"{checkpoint}: upgraded to checkpoint format {CHECKPOINT_FORMAT}; the original is {backup}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("strings", "checkpoint"))
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    for path in args.paths:
        if args.what == "strings":
            with h5py.File(path, "r+") as f:
                print(f"{path}: {upgrade_string_attributes(f)} string attributes rewritten as fixed-length")
        else:
            upgrade_checkpoint(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
