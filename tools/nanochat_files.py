"""nanochat's files and nanoforge's, for export_checkpoint.py and import_nanochat.py.

nanochat's layout under NANOCHAT_BASE_DIR (read off nanochat's tokenizer.py, scripts/tok_train.py,
checkpoint_manager.py and common.py; no code of nanochat's is used):
  tokenizer/tokenizer.pkl                    pickle.dump of a tiktoken Encoding(name="rustbpe",
                                             pat_str=SPLIT_PATTERN, mergeable_ranks={bytes: rank},
                                             special_tokens={name: id}) -- what RustBPETokenizer.save writes
  tokenizer/token_bytes.pt                   torch.save of an int32 tensor: bytes of each token, 0 for specials
  base_checkpoints/d<depth>/model_NNNNNN.pt  torch.save of the model's state dict
  base_checkpoints/d<depth>/meta_NNNNNN.json {"step", "model_config" (GPTConfig's fields), ...}
nanoforge's tokenizer directory is tokenizer.tiktoken (base64 token, rank) + special_tokens.txt (name, id), and
its model.h5 is /config attributes + /weights/<state-dict name> float32 (docs/checkpoints.md).
Needs numpy and h5py; tiktoken for tokenizer.pkl, torch for the .pt files.
"""

import base64
import json
import os
import re

import numpy as np

# nanochat/tokenizer.py's SPLIT_PATTERN and SPECIAL_TOKENS (nanoforge's data/tokenizer/bpe_split.h has the same).
SPLIT_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
SPECIAL_TOKENS = ["<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>",
                  "<|python_start|>", "<|python_end|>", "<|output_start|>", "<|output_end|>"]
MODEL_CONFIG_KEYS = ("sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd", "window_pattern")


class Tokenizer:
    """Token bytes by rank (= id) and (name, id) specials following them."""

    def __init__(self, ranks, specials):
        self.ranks, self.specials = ranks, specials

    def vocab_size(self):
        return len(self.ranks) + len(self.specials)

    def token_byte_lengths(self):
        return [len(token) for token in self.ranks] + [0] * len(self.specials)

    def rank_file(self):
        return "".join(f"{base64.b64encode(token).decode()} {rank}\n" for rank, token in enumerate(self.ranks))

    def specials_file(self):
        return "".join(f"{name} {token_id}\n" for name, token_id in self.specials)

    def nanoforge_hash(self):
        """Tokenizer::hash(): FNV-1a 64 over the rank file, the specials file and the split pattern, chained."""
        value = 0xCBF29CE484222325
        for text in (self.rank_file(), self.specials_file(), SPLIT_PATTERN):
            for byte in text.encode():
                value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        return f"{value:016x}"


def read_nanoforge_tokenizer(directory):
    ranks_path = os.path.join(directory, "tokenizer.tiktoken")
    specials_path = os.path.join(directory, "special_tokens.txt")
    for path in (ranks_path, specials_path):
        if not os.path.exists(path):
            raise SystemExit(f"{directory}: not a nanoforge tokenizer directory ({os.path.basename(path)} missing)")
    by_rank = {}
    with open(ranks_path, "rb") as f:
        for line in f.read().splitlines():
            if line.strip():
                token, rank = line.split()
                by_rank[int(rank)] = base64.b64decode(token)
    if sorted(by_rank) != list(range(len(by_rank))):
        raise SystemExit(f"{ranks_path}: ranks are not 0..{len(by_rank) - 1}")
    with open(specials_path, encoding="utf-8") as f:
        specials = [(name, int(token_id)) for name, token_id in (line.split() for line in f if line.strip())]
    return Tokenizer([by_rank[r] for r in range(len(by_rank))], specials)


def write_nanoforge_tokenizer(tokenizer, directory):
    """The two files exactly as Tokenizer::save writes them."""
    os.makedirs(directory, exist_ok=True)
    for name, text in (("tokenizer.tiktoken", tokenizer.rank_file()), ("special_tokens.txt", tokenizer.specials_file())):
        with open(os.path.join(directory, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def write_nanochat_tokenizer(tokenizer, directory):
    """tokenizer.pkl and token_bytes.pt in `directory` (NANOCHAT_BASE_DIR/tokenizer)."""
    import pickle

    import tiktoken
    import torch

    encoding = tiktoken.Encoding(name="rustbpe", pat_str=SPLIT_PATTERN,
                                 mergeable_ranks={token: rank for rank, token in enumerate(tokenizer.ranks)},
                                 special_tokens=dict(tokenizer.specials))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "tokenizer.pkl"), "wb") as f:
        pickle.dump(encoding, f)
    with open(os.path.join(directory, "token_bytes.pt"), "wb") as f:
        torch.save(torch.tensor(tokenizer.token_byte_lengths(), dtype=torch.int32), f)


def read_nanochat_tokenizer(path):
    """A nanochat tokenizer.pkl (or the directory holding it) as a Tokenizer; refuses encodings nanoforge cannot
    apply exactly (another split pattern, ranks with gaps, specials not right after the ranks)."""
    import pickle

    import tiktoken  # noqa: F401  (the pickle names tiktoken.core.Encoding)

    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.pkl")
    with open(path, "rb") as f:
        encoding = pickle.load(f)
    if encoding._pat_str != SPLIT_PATTERN:
        raise SystemExit(f"{path}: its split pattern is not nanochat's, which is the one nanoforge applies:\n"
                         f"  {encoding._pat_str}")
    by_rank = {rank: token for token, rank in encoding._mergeable_ranks.items()}
    if sorted(by_rank) != list(range(len(by_rank))):
        raise SystemExit(f"{path}: ranks are not 0..{len(by_rank) - 1}")
    specials = sorted(encoding._special_tokens.items(), key=lambda item: item[1])
    if [token_id for _, token_id in specials] != list(range(len(by_rank), len(by_rank) + len(specials))):
        raise SystemExit(f"{path}: special token ids do not follow the ranks")
    if "<|bos|>" not in encoding._special_tokens:
        raise SystemExit(f"{path}: no <|bos|> special token (a tiktoken encoding of OpenAI's, not nanochat's?)")
    return Tokenizer([by_rank[r] for r in range(len(by_rank))], specials)


def checkpoint_steps(directory):
    return sorted(int(m.group(1)) for name in os.listdir(directory)
                  if (m := re.fullmatch(r"model_(\d+)\.pt", name)))


def find_nanochat_checkpoint(path, step=None):
    """(directory, step) from a base_checkpoints/<tag> directory, a base_checkpoints directory (the deepest
    d<N>, as nanochat's find_largest_model), or a NANOCHAT_BASE_DIR; the last step unless one is given."""
    if os.path.isdir(os.path.join(path, "base_checkpoints")):
        path = os.path.join(path, "base_checkpoints")
    if os.path.isdir(path) and not checkpoint_steps(path):
        tags = [(int(m.group(1)), name) for name in os.listdir(path)
                if (m := re.fullmatch(r"d(\d+)", name)) and os.path.isdir(os.path.join(path, name))]
        if tags:
            path = os.path.join(path, max(tags)[1])
    if not os.path.isdir(path) or not checkpoint_steps(path):
        raise SystemExit(f"{path}: no nanochat checkpoint (model_NNNNNN.pt) found")
    steps = checkpoint_steps(path)
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise SystemExit(f"{path}: no step {step}; it has {steps}")
    return path, step


def read_nanochat_checkpoint(directory, step):
    """(model_config, {name: float32 array}) the way checkpoint_manager.build_model prepares them."""
    import torch

    with open(os.path.join(directory, f"meta_{step:06d}.json"), encoding="utf-8") as f:
        config = dict(json.load(f)["model_config"])
    config.setdefault("window_pattern", "L")  # nanochat's patch for checkpoints older than sliding windows
    state = torch.load(os.path.join(directory, f"model_{step:06d}.pt"), map_location="cpu")
    state = {name.removeprefix("_orig_mod."): tensor for name, tensor in state.items()}
    # nanochat's patch for checkpoints older than the per-layer residual scalars.
    state.setdefault("resid_lambdas", torch.ones(config["n_layer"]))
    state.setdefault("x0_lambdas", torch.zeros(config["n_layer"]))
    weights = {name: tensor.detach().to(torch.float32).numpy() for name, tensor in state.items()}
    return config, weights


# The checkpoint format nanoforge reads (docs/checkpoints.md); model.h5 carries it as an attribute.
CHECKPOINT_FORMAT = 2


def write_nanoforge_model(config, weights, directory):
    """model.h5 in nanoforge's checkpoint layout (docs/checkpoints.md): a directory model.init_from takes."""
    import h5py

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "model.h5")
    with h5py.File(path + ".partial", "w") as f:
        f.attrs["checkpoint_format"] = np.int64(CHECKPOINT_FORMAT)
        group = f.create_group("config")
        for key in MODEL_CONFIG_KEYS:
            if key == "window_pattern":  # fixed-length: nanoforge never reads variable-length strings
                text = str(config[key]).encode("utf-8")
                group.attrs[key] = np.array(text, dtype=h5py.string_dtype("utf-8", len(text)))
            else:
                group.attrs[key] = np.int64(config[key])
        weights_group = f.create_group("weights")
        for name, array in weights.items():
            array = np.ascontiguousarray(array, dtype=np.float32)
            if array.ndim == 0:
                weights_group.create_dataset(name, data=array)
            else:
                weights_group.create_dataset(name, data=array, chunks=True, fletcher32=True)
    os.replace(path + ".partial", path)
    return path
