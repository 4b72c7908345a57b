"""nanochat's files and nanoforge's, for export_checkpoint.py and import_nanochat.py: nanochat's layout under
NANOCHAT_BASE_DIR as its tokenizer.py, scripts/tok_train.py, checkpoint_manager.py and common.py write it (no code
of nanochat's is used; docs/checkpoints.md, "nanochat, both ways"), nanoforge's tokenizer directory and model.h5.
nanochat's files are read without running anything they name: tokenizer.pkl through an unpickler that admits
tiktoken's Encoding alone (its fields captured, tiktoken never called), the .pt files with torch.load's
weights_only. What the tools write goes beside its name and is renamed into place (StagedFiles).
Needs numpy and h5py; tiktoken to write tokenizer.pkl, torch (1.13 or newer) for the .pt files.
"""

import base64
import json
import os
import pickle
import re
import stat

import numpy as np

# nanochat/tokenizer.py's SPLIT_PATTERN and SPECIAL_TOKENS (nanoforge's data/tokenizer/bpe_split.h has the same).
SPLIT_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
SPECIAL_TOKENS = ["<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>",
                  "<|python_start|>", "<|python_end|>", "<|output_start|>", "<|output_end|>"]
MODEL_CONFIG_KEYS = ("sequence_len", "vocab_size", "n_layer", "n_head", "n_kv_head", "n_embd", "window_pattern")
# The largest tokenizer.pkl read: nanoforge's own rank-file limit (docs/untrusted-input.md), far above any vocabulary's.
MAX_TOKENIZER_PICKLE_BYTES = 64 << 20
MAX_META_BYTES = 1 << 20  # a meta_NNNNNN.json: nanochat's are a few kB (the model, user and loop configs)


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


class StagedFiles:
    """Files written beside their final names (NAME.partial-PID, created exclusively, so never through a link
    found there) and renamed into place together when the block ends without an error; otherwise removed. An
    interrupted export or import leaves what was there before, never a half-written file."""

    def __init__(self):
        self.staged = []  # (temporary, final path)

    def path(self, final):
        """A new temporary path for `final`, for a library that creates the file itself (exclusively)."""
        os.makedirs(os.path.dirname(final) or ".", exist_ok=True)
        temporary = f"{final}.partial-{os.getpid()}"
        if os.path.lexists(temporary):
            os.remove(temporary)
        self.staged.append((temporary, final))
        return temporary

    def open(self, final, binary=True):
        temporary = self.path(final)
        return open(temporary, "xb") if binary else open(temporary, "x", encoding="utf-8", newline="\n")

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        for temporary, final in self.staged:
            if kind is None:
                os.replace(temporary, final)
            elif os.path.lexists(temporary):
                os.remove(temporary)


def refuse_existing(paths, remedy):
    """Exits naming the first of `paths` that exists (a link too), saying `remedy`."""
    for path in paths:
        if os.path.lexists(path):
            raise SystemExit(f"{path} exists: {remedy}")


def tokenizer_files(directory):
    return [os.path.join(directory, name) for name in ("tokenizer.tiktoken", "special_tokens.txt")]


def write_nanoforge_tokenizer(tokenizer, directory):
    """The two files exactly as Tokenizer::save writes them."""
    with StagedFiles() as staged:
        for path, text in zip(tokenizer_files(directory), (tokenizer.rank_file(), tokenizer.specials_file())):
            with staged.open(path, binary=False) as f:
                f.write(text)


def nanochat_tokenizer_files(directory):
    return [os.path.join(directory, name) for name in ("tokenizer.pkl", "token_bytes.pt")]


def write_nanochat_tokenizer(tokenizer, directory, staged=None):
    """tokenizer.pkl and token_bytes.pt in `directory` (NANOCHAT_BASE_DIR/tokenizer), published with the other
    files of `staged`, or at once."""
    import tiktoken
    import torch

    if staged is None:
        with StagedFiles() as staged:
            return write_nanochat_tokenizer(tokenizer, directory, staged)
    encoding = tiktoken.Encoding(name="rustbpe", pat_str=SPLIT_PATTERN,
                                 mergeable_ranks={token: rank for rank, token in enumerate(tokenizer.ranks)},
                                 special_tokens=dict(tokenizer.specials))
    pickle_path, token_bytes_path = nanochat_tokenizer_files(directory)
    with staged.open(pickle_path) as f:
        pickle.dump(encoding, f)
    with staged.open(token_bytes_path) as f:
        torch.save(torch.tensor(tokenizer.token_byte_lengths(), dtype=torch.int32), f)


class _EncodingFields:
    """What a pickled tiktoken Encoding holds (the dict its __getstate__ returns), kept as it is."""

    def __setstate__(self, fields):
        self.fields = fields


class _TokenizerUnpickler(pickle.Unpickler):
    """Admits tiktoken.core.Encoding and nothing else: any other global a pickle names (os.system, eval, ...)
    could run code as it is loaded, and nanochat's tokenizer.pkl names none."""

    def find_class(self, module, name):
        if (module, name) == ("tiktoken.core", "Encoding"):
            return _EncodingFields
        raise pickle.UnpicklingError(f"it names {module}.{name}, which loading would call, and a nanochat "
                                     "tokenizer.pkl names only tiktoken.core.Encoding")


def read_regular_file(path, limit_bytes):
    """The bytes of `path`, a regular file of at most `limit_bytes` (never blocking on a FIFO or a device)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise SystemExit(f"{path}: cannot open it: {error.strerror}")
    with os.fdopen(descriptor, "rb") as f:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise SystemExit(f"{path}: not a regular file (a device, FIFO or socket?): give the file itself")
        if status.st_size > limit_bytes:
            raise SystemExit(f"{path}: {status.st_size} bytes, more than the {limit_bytes} it may have")
        return f.read(limit_bytes + 1)


def read_nanochat_tokenizer(path):
    """A nanochat tokenizer.pkl (or the directory holding it) as a Tokenizer; refuses a pickle that names
    anything but tiktoken's Encoding, and encodings nanoforge cannot apply exactly (another split pattern, ranks
    with gaps, specials not right after the ranks)."""
    import io

    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.pkl")
    data = read_regular_file(path, MAX_TOKENIZER_PICKLE_BYTES)
    try:
        loaded = _TokenizerUnpickler(io.BytesIO(data)).load()
    except Exception as error:  # a damaged pickle fails in many ways; each is a refusal
        raise SystemExit(f"{path}: refused, not read: {error}. Use the tokenizer.pkl nanochat's tok_train.py "
                         "wrote (or tools/export_checkpoint.py); nothing else is unpickled")
    fields = loaded.fields if isinstance(loaded, _EncodingFields) else None
    if not isinstance(fields, dict):
        raise SystemExit(f"{path}: not a tiktoken Encoding with its own ranks (nanochat's RustBPETokenizer.save "
                         "pickles one; an encoding pickled by name, as tiktoken does OpenAI's, is not read)")
    pattern, ranks, special_tokens = (fields.get(key) for key in ("pat_str", "mergeable_ranks", "special_tokens"))
    if not (isinstance(pattern, str) and isinstance(ranks, dict) and isinstance(special_tokens, dict)
            and all(isinstance(token, bytes) and type(rank) is int for token, rank in ranks.items())
            and all(isinstance(name, str) and type(token_id) is int for name, token_id in special_tokens.items())):
        raise SystemExit(f"{path}: its Encoding's fields are not a split pattern, {{bytes: rank}} and "
                         "{name: id} as tiktoken's")
    if pattern != SPLIT_PATTERN:
        raise SystemExit(f"{path}: its split pattern is not nanochat's, which is the one nanoforge applies:\n"
                         f"  {pattern}")
    by_rank = {rank: token for token, rank in ranks.items()}
    if sorted(by_rank) != list(range(len(by_rank))):
        raise SystemExit(f"{path}: ranks are not 0..{len(by_rank) - 1}")
    specials = sorted(special_tokens.items(), key=lambda item: item[1])
    if [token_id for _, token_id in specials] != list(range(len(by_rank), len(by_rank) + len(specials))):
        raise SystemExit(f"{path}: special token ids do not follow the ranks")
    if "<|bos|>" not in special_tokens:
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


def load_tensors(path):
    """torch.load of a .pt file with weights_only: tensors, and the containers and dtypes they come in, and
    nothing else, so that a crafted file cannot run code as it is loaded. Only torch's zip format (torch.save's
    since torch 1.6; nanochat's): weights_only did not cover the older ones before torch 2.6 (CVE-2025-32434)."""
    import inspect
    import zipfile

    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except OSError as error:
        raise SystemExit(f"{path}: cannot read it: {error.strerror}")
    if not regular:
        raise SystemExit(f"{path}: not a regular file (a device, FIFO or socket?): give the file itself")
    if not zipfile.is_zipfile(path):
        raise SystemExit(f"{path}: not in torch's zip format (what torch.save writes since torch 1.6, as nanochat "
                         "does); older formats are not loaded, as torch's weights_only does not make them safe")
    import torch  # after the checks above: it takes seconds to import

    if "weights_only" not in inspect.signature(torch.load).parameters:
        raise SystemExit(f"{path}: torch {torch.__version__} cannot load it without running what it names "
                         "(torch.load's weights_only came with torch 1.13): upgrade torch")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        detail = str(error).split("WeightsUnpickler error: ")[-1]
        raise SystemExit(f"{path}: refused, not loaded: {detail} (a nanochat checkpoint holds tensors only; "
                         "loading what else this file names could run code)")
    except (RuntimeError, EOFError, ValueError) as error:  # torch's errors on a damaged zip or tensor record
        raise SystemExit(f"{path}: not a readable torch checkpoint ({error})")


def read_nanochat_checkpoint(directory, step):
    """(model_config, {name: float32 array}) the way checkpoint_manager.build_model prepares them."""
    meta_path = os.path.join(directory, f"meta_{step:06d}.json")
    try:
        config = dict(json.loads(read_regular_file(meta_path, MAX_META_BYTES))["model_config"])
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        raise SystemExit(f"{meta_path}: not a nanochat meta file with a model_config ({error!r})")
    config.setdefault("window_pattern", "L")  # nanochat's patch for checkpoints older than sliding windows
    if not (all(type(config.get(key)) is int for key in MODEL_CONFIG_KEYS if key != "window_pattern")
            and isinstance(config["window_pattern"], str)):
        raise SystemExit(f"{meta_path}: its model_config lacks one of {', '.join(MODEL_CONFIG_KEYS)} or has "
                         "one of another type")
    model_path = os.path.join(directory, f"model_{step:06d}.pt")
    state = load_tensors(model_path)
    import torch  # imported by load_tensors

    if not (isinstance(state, dict) and all(isinstance(name, str) and isinstance(tensor, torch.Tensor)
                                            for name, tensor in state.items())):
        raise SystemExit(f"{model_path}: not a state dict (names to tensors)")
    state = {name.removeprefix("_orig_mod."): tensor for name, tensor in state.items()}
    # nanochat's patch for checkpoints older than the per-layer residual scalars.
    state.setdefault("resid_lambdas", torch.ones(config["n_layer"]))
    state.setdefault("x0_lambdas", torch.zeros(config["n_layer"]))
    weights = {name: tensor.detach().to(torch.float32).numpy() for name, tensor in state.items()}
    return config, weights


# The checkpoint format nanoforge reads (docs/checkpoints.md); model.h5 carries it as an attribute.
CHECKPOINT_FORMAT = 2


def check_nanoforge_model_dir(directory, overwrite):
    """Exits unless `directory` may take an imported model.h5: new or empty, or holding only an earlier
    import's model.h5 (replaced only with `overwrite`). Anything else there, a nanoforge checkpoint above all
    (whose manifest.txt a new model.h5 would contradict), is never written into."""
    path = os.path.join(directory, "model.h5")
    ours = re.compile(r"model\.h5(\.partial.*)?")  # and what an import killed while writing left
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise SystemExit(f"{directory} is not a directory: give a new OUT_DIR")
    names = os.listdir(directory) if os.path.isdir(directory) else []
    others = sorted(name for name in names if not ours.fullmatch(name))
    if others:
        raise SystemExit(f"{directory} holds {', '.join(others[:4])}{', ...' if len(others) > 4 else ''}"
                         f"{' (a nanoforge checkpoint)' if 'manifest.txt' in others else ''}: the import writes "
                         "model.h5 into a directory of its own; give a new OUT_DIR")
    if not overwrite:
        refuse_existing([path], "an earlier import? Pass --overwrite to replace it, or give another OUT_DIR")


def write_nanoforge_model(config, weights, directory):
    """model.h5 in nanoforge's checkpoint layout (docs/checkpoints.md): a directory model.init_from takes."""
    import h5py

    path = os.path.join(directory, "model.h5")
    with StagedFiles() as staged, h5py.File(staged.path(path), "w-") as f:
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
    return path
