"""Reads an export the way nanochat's loaders do (tokenizer.py get_tokenizer/get_token_bytes,
checkpoint_manager.load_model("base"): find the deepest d<N>, its last step, torch.load, bf16 -> float on the
CPU, strip "_orig_mod.", GPTConfig(**model_config), a strict load_state_dict) with tools/dev/nanochat_reference.py
standing in for nanochat's GPT, and checks it against what nanoforge expects.

    python3 check_nanochat_export.py NANOCHAT_BASE_DIR EXPECTED_JSON   # exit 1 and why on a mismatch

EXPECTED_JSON: {"texts": [...], "ids": [[...]] (nanoforge's encode), "token_bytes": [...], "bos_id": N}.
"""

import json
import os
import pickle
import re
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "dev"))
import nanochat_reference  # noqa: E402


def fail(message):
    print(f"check_nanochat_export: {message}")
    sys.exit(1)


def main():
    base_dir, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path, encoding="utf-8") as f:
        expected = json.load(f)

    tokenizer_dir = os.path.join(base_dir, "tokenizer")
    with open(os.path.join(tokenizer_dir, "tokenizer.pkl"), "rb") as f:
        encoding = pickle.load(f)
    bos = encoding.encode_single_token("<|bos|>")
    if bos != expected["bos_id"]:
        fail(f"<|bos|> is {bos}, nanoforge's is {expected['bos_id']}")
    for text, ids in zip(expected["texts"], expected["ids"]):
        if encoding.encode_ordinary(text) != ids:
            fail(f"tiktoken encodes {text!r} as {encoding.encode_ordinary(text)}, nanoforge as {ids}")
    token_bytes = torch.load(os.path.join(tokenizer_dir, "token_bytes.pt"), map_location="cpu")
    if token_bytes.dtype != torch.int32 or token_bytes.tolist() != expected["token_bytes"]:
        fail("token_bytes.pt differs from nanoforge's token byte lengths")

    checkpoints = os.path.join(base_dir, "base_checkpoints")
    tags = sorted((int(m.group(1)), name) for name in os.listdir(checkpoints) if (m := re.match(r"d(\d+)", name)))
    checkpoint_dir = os.path.join(checkpoints, tags[-1][1])
    step = max(int(m.group(1)) for name in os.listdir(checkpoint_dir) if (m := re.search(r"model_(\d+)\.pt$", name)))
    state = torch.load(os.path.join(checkpoint_dir, f"model_{step:06d}.pt"), map_location="cpu")
    with open(os.path.join(checkpoint_dir, f"meta_{step:06d}.json"), encoding="utf-8") as f:
        meta = json.load(f)
    state = {k.removeprefix("_orig_mod."): (v.float() if v.dtype == torch.bfloat16 else v) for k, v in state.items()}
    config = meta["model_config"]
    if set(config) != {"sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd", "window_pattern"}:
        fail(f"model_config has {sorted(config)}, not GPTConfig's fields")
    if config["vocab_size"] != encoding.n_vocab:
        fail(f"model vocab {config['vocab_size']} but the tokenizer has {encoding.n_vocab}")
    model = nanochat_reference.GPT(config)
    model.load_state_dict(state, strict=True)
    tokens = [expected["bos_id"]] + [token for ids in expected["ids"] for token in ids]
    ids = torch.tensor([tokens[: config["sequence_len"] + 1]], dtype=torch.int64)
    loss, _ = model(ids[:, :-1], ids[:, 1:])
    if not torch.isfinite(loss):
        fail(f"the loaded model's loss is {loss}")
    print(f"check_nanochat_export: {checkpoint_dir} step {step} and {tokenizer_dir} read as nanochat reads them "
          f"(loss {loss.item():.4f} on {ids.shape[1] - 1} tokens)")


if __name__ == "__main__":
    main()
