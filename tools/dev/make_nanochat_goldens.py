"""Write nanoforge's committed parity files (model cases and optimizer goldens) from nanochat's own PyTorch code.

What: imports nanochat's GPT, GPTConfig and MuonAdamW from a nanochat checkout, runs them in fp32 on the CPU
and writes, in the layouts of docs/parity.md and tests/parity/golden/README.md:
  - model cases: weights (nanochat's init plus small Gaussian noise, so every gradient is non-zero), inputs,
    and nanochat's loss, softcapped logits and gradients of the mean loss;
  - optimizer goldens: three consecutive MuonAdamW steps (grads consumed, weights and optimizer state after
    each step, the groups as applied) plus nanochat's schedules at every iteration of the run.
With --verify it instead recomputes the numbers of existing files (these or any others in the same layouts)
from their stored weights, inputs and gradients with nanochat's code, and prints the largest differences.

Why: nanoforge's parity tests must prove agreement with nanochat itself, not with a re-implementation
(tools/dev/nanochat_reference.py is ours and is not used here), and must run from a plain clone, so the files
are small and committed, and this tool is how they were made.

How the optimizer is set up: the optimizer goldens are made exactly as nanochat's scripts/base_train.py
makes them. This tool reads base_train.py's syntax tree and executes its own statements: the argument
parser (so every default is base_train's), build_model_meta, get_scaling_params, the horizon / batch size /
LR scale / weight-decay scaling block, the `optimizer = model.setup_optimizer(...)` call, the
num_iterations block, get_lr_multiplier, get_muon_momentum, get_weight_decay, and, from the training loop,
the statements that put the scheduled lr / momentum / weight decay on the groups before optimizer.step().
The script as a whole is never run (it needs a tokenizer, data and wandb). It stops with a message when
base_train.py no longer has those pieces.

Deviations from a GPU run, all deliberate:
  - NANOCHAT_DTYPE=float32 (nanochat's CPU default): fp32 activations, fp32 wte / value embeddings.
  - torch.compile is disabled (TORCH_COMPILE_DISABLE=1): nanochat's fused optimizer functions and the model
    run eagerly, which is their mathematical definition; compiled CPU code would depend on the machine.
  - For the bf16-orthogonalisation golden only nanochat.optim's COMPUTE_DTYPE is switched to bfloat16
    during optimizer.step(), so Muon's Polar Express runs in bf16 as on a GPU while everything else stays
    fp32. Nothing is stubbed: on a CPU nanochat never imports the GPU-only `kernels` package.
  - Each optimizer step consumes the gradient of one micro-batch of random tokens (2 x sequence_len), drawn
    fresh at the current weights; base_train's gradient accumulation would only average more of the same.
  - torch runs single-threaded and deterministic, so a rerun on the same machine writes identical files.

Usage:
  python3 tools/dev/make_nanochat_goldens.py --nanochat PATH_TO_NANOCHAT_CHECKOUT --out tests/parity/golden
  python3 tools/dev/make_nanochat_goldens.py --nanochat PATH --verify FILE.h5 [FILE.h5 ...]
  python3 tools/dev/make_nanochat_goldens.py --nanochat PATH --case gqa.h5 --n-layer 3 --n-embd 128 \
      --n-head 4 --n-kv-head 2 --vocab 300 --seq 160 [--window-pattern SL --batch 2 --seed 1 --perturb 0.1
      --ignored-targets 0]
The first writes the committed files (MODEL_CASES and OPTIM_GOLDENS below); the last writes one model case
of any shape, for checks beyond the committed ones.
PATH is a nanochat checkout (git clone https://github.com/karpathy/nanochat; the files were made at the
commit in PINNED_COMMIT). The commit is read with git; pass --nanochat-commit when PATH is not a git work
tree (for example an exported archive).

Needs: Python 3.10+, torch 2.9.1 (nanochat's pin; a CPU build is enough), numpy, h5py, filelock (imported by
nanochat.common). No GPU, no network.
"""

import argparse
import ast
import builtins
import contextlib
import inspect
import io
import math
import os
import re
import subprocess
import sys

# Before torch and nanochat are imported: nanochat reads NANOCHAT_DTYPE at import, dynamo reads this.
os.environ["NANOCHAT_DTYPE"] = "float32"
os.environ["TORCH_COMPILE_DISABLE"] = "1"

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tools/, a user tool
from upgrade_h5 import text_of, upgrade_string_attributes  # noqa: E402

PINNED_COMMIT = "92d63d4e8bb4df75c3b71618f31ddde2378b2bcd"

# Model parity cases. Sequence lengths above 128 so that the short window (nanochat rounds it up to a multiple
# of 128) really cuts; one vocabulary that nanochat pads (100 -> 128) and one it does not (64).
MODEL_CASES = [
    dict(name="model_gqa_windows",
         config=dict(sequence_len=160, vocab_size=100, n_layer=3, n_head=4, n_kv_head=2, n_embd=32,
                     window_pattern="SL"),
         batch=2, seed=1, perturb=0.1, ignored_targets=0),
    dict(name="model_mha",
         config=dict(sequence_len=144, vocab_size=64, n_layer=4, n_head=2, n_kv_head=2, n_embd=24,
                     window_pattern="SSL"),
         batch=2, seed=2, perturb=0.1, ignored_targets=8),
    # FP8 (base_train --fp8): the smallest shapes its filter converts (both sides of a Linear divisible by 16,
    # the smaller >= 128). With all heads full (c_q, c_k, c_v each converted, each with its own scales) and
    # with GQA (c_k, c_v 128 -> 64 stay in full precision beside an FP8 c_q); lm_head converted in both
    # (vocabulary 200 padded to 256).
    dict(name="model_fp8_mha",
         config=dict(sequence_len=64, vocab_size=200, n_layer=1, n_head=4, n_kv_head=4, n_embd=128,
                     window_pattern="L"),
         batch=2, seed=3, perturb=0.02, ignored_targets=4, fp8=True),
    dict(name="model_fp8_gqa",
         config=dict(sequence_len=64, vocab_size=200, n_layer=1, n_head=4, n_kv_head=2, n_embd=128,
                     window_pattern="L"),
         batch=2, seed=4, perturb=0.02, ignored_targets=0, fp8=True),
]

# Optimizer goldens: base_train's command line for the model and the horizon; n_kv_head, when given, replaces
# base_train's n_kv_head = n_head (base_train itself never builds a GQA model).
OPTIM_GOLDENS = [
    dict(name="optim_real_init",
         cli=["--depth=2", "--aspect-ratio=12", "--head-dim=12", "--max-seq-len=160", "--window-pattern=SL",
              "--num-iterations=100"],
         vocab_size=60, n_kv_head=None, batch=2, seed=42, perturb=0.0, ortho_dtype="float32",
         iterations=[0, 1, 2]),
    dict(name="optim_perturbed",
         cli=["--depth=2", "--aspect-ratio=12", "--head-dim=6", "--max-seq-len=160", "--window-pattern=SL",
              "--num-iterations=100"],
         vocab_size=60, n_kv_head=2, batch=2, seed=3, perturb=0.05, ortho_dtype="float32",
         iterations=[0, 1, 2]),
    dict(name="optim_bf16_ortho",
         cli=["--depth=2", "--aspect-ratio=12", "--head-dim=6", "--max-seq-len=160", "--window-pattern=SL",
              "--num-iterations=100"],
         vocab_size=60, n_kv_head=2, batch=2, seed=3, perturb=0.05, ortho_dtype="bfloat16",
         iterations=[0, 1, 2]),
]

# base_train arguments that shape the model, the horizon, the optimizer or the schedules (recorded as arg_*).
RELEVANT_ARGS = {"depth", "aspect_ratio", "head_dim", "max_seq_len", "window_pattern", "num_iterations",
                 "target_flops", "target_param_data_ratio", "total_batch_size", "embedding_lr",
                 "unembedding_lr", "weight_decay", "matrix_lr", "scalar_lr", "warmup_steps", "warmdown_ratio",
                 "final_lr_frac"}

STRING = h5py.string_dtype()


def fail(message):
    sys.exit(f"make_nanochat_goldens: {message}")


# ----------------------------------------------------------------------------------------------------------
# nanochat


class Nanochat:
    """nanochat's modules, imported from a checkout, and the pieces of scripts/base_train.py this tool runs."""

    def __init__(self, root, commit):
        if not os.path.isfile(os.path.join(root, "nanochat", "gpt.py")):
            fail(f"{root} is not a nanochat checkout (no nanochat/gpt.py)")
        self.root = os.path.abspath(root)
        self.commit = commit or self._git_commit()
        if self.commit != PINNED_COMMIT:
            print(f"note: nanochat at {self.commit}, the committed files were made at {PINNED_COMMIT}")
        sys.path.insert(0, self.root)
        with contextlib.redirect_stdout(io.StringIO()):
            import nanochat.common
            import nanochat.gpt
            import nanochat.optim
        if nanochat.common.COMPUTE_DTYPE != torch.float32:
            fail("nanochat did not pick float32 as COMPUTE_DTYPE")
        self.common, self.gpt, self.optim = nanochat.common, nanochat.gpt, nanochat.optim
        self._read_base_train()

    def _git_commit(self):
        try:
            out = subprocess.run(["git", "-C", self.root, "rev-parse", "HEAD"], capture_output=True, text=True,
                                 check=True)
        except (OSError, subprocess.CalledProcessError):
            fail(f"cannot read the commit of {self.root} with git; pass --nanochat-commit")
        return out.stdout.strip()

    def _read_base_train(self):
        self.base_train_path = os.path.join(self.root, "scripts", "base_train.py")
        with open(self.base_train_path) as f:
            tree = ast.parse(f.read(), self.base_train_path)
        body = tree.body

        def find(predicate, what):
            for i, node in enumerate(body):
                if predicate(node):
                    return i
            fail(f"{self.base_train_path}: no {what}; this tool follows nanochat {PINNED_COMMIT[:7]}")

        def assigns(node, name):
            return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                        for t in node.targets)

        def function(name):
            return body[find(lambda n: isinstance(n, ast.FunctionDef) and n.name == name, f"def {name}")]

        def uses_parser(node):
            if assigns(node, "parser"):
                return True
            return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "add_argument"
                    and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id == "parser")

        parser_nodes = [n for n in body if uses_parser(n)]
        if not parser_nodes:
            fail(f"{self.base_train_path}: no argument parser")
        self._parser_code = self._compile(parser_nodes)
        self._functions_code = self._compile([function("build_model_meta"), function("get_lr_multiplier"),
                                              function("get_muon_momentum"), function("get_weight_decay")])
        # From `def get_scaling_params` through `optimizer = model.setup_optimizer(...)`.
        start = find(lambda n: isinstance(n, ast.FunctionDef) and n.name == "get_scaling_params",
                     "def get_scaling_params")
        stop = find(lambda n: assigns(n, "optimizer"), "optimizer = model.setup_optimizer(...)")
        self._setup_code = self._compile(body[start:stop + 1])
        # The num_iterations block: from its assert up to `def get_lr_multiplier`.
        start = find(lambda n: isinstance(n, ast.Assert) and "num_iterations" in ast.unparse(n.test),
                     "assert on num_iterations")
        stop = find(lambda n: isinstance(n, ast.FunctionDef) and n.name == "get_lr_multiplier",
                    "def get_lr_multiplier")
        self._iterations_code = self._compile(body[start:stop])
        # In the training loop: lrm / muon_momentum / muon_weight_decay and the loop over the groups.
        self._schedule_step_code = self._compile(self._find_group_update(tree))
        # base_train's FP8 layer filter, defined inside its `if args.fp8:` block.
        fp8_filter = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "fp8_module_filter"]
        if not fp8_filter:
            fail(f"{self.base_train_path}: no def fp8_module_filter")
        self._fp8_filter_code = self._compile(fp8_filter)

    def _compile(self, nodes):
        return compile(ast.Module(body=list(nodes), type_ignores=[]), self.base_train_path, "exec")

    def _find_group_update(self, tree):
        for node in ast.walk(tree):
            for field in ("body", "orelse"):
                block = getattr(node, field, None)
                if not isinstance(block, list):
                    continue
                for i, stmt in enumerate(block):
                    if (isinstance(stmt, ast.For) and ast.unparse(stmt.iter) == "optimizer.param_groups"
                            and "initial_lr" in ast.unparse(stmt) and i >= 3):
                        before = block[i - 3:i]
                        names = [ast.unparse(s.targets[0]) if isinstance(s, ast.Assign) else "" for s in before]
                        if names == ["lrm", "muon_momentum", "muon_weight_decay"]:
                            return before + [stmt]
        fail(f"{self.base_train_path}: no per-step schedule assignment to optimizer.param_groups")

    def base_train(self, cli, vocab_size):
        """A namespace holding base_train's parsed args (defaults + cli) and its model/schedule functions."""
        ns = {"__builtins__": builtins, "argparse": argparse, "math": math, "torch": torch, "GPT": self.gpt.GPT,
              "GPTConfig": self.gpt.GPTConfig, "print0": lambda *a, **k: None, "vocab_size": vocab_size}
        exec(self._parser_code, ns)
        ns["args"] = ns["parser"].parse_args(cli)
        exec(self._functions_code, ns)
        return ns

    def setup_optimizer(self, ns, model):
        """Runs base_train's horizon block and its setup_optimizer call for `model`; fills ns."""
        ns["model"] = model
        ns["num_flops_per_token"] = model.estimate_flops()
        with contextlib.redirect_stdout(io.StringIO()):  # GPT() announces its vocabulary padding
            exec(self._setup_code, ns)
            exec(self._iterations_code, ns)
        return ns["optimizer"]

    def apply_schedule(self, ns, step):
        """base_train's per-step lines: the scheduled lr, Muon momentum and weight decay on every group."""
        ns["step"] = step
        exec(self._schedule_step_code, ns)
        return ns["lrm"], ns["muon_momentum"], ns["muon_weight_decay"]

    @contextlib.contextmanager
    def ortho_dtype(self, name):
        """Muon's orthogonalisation dtype: nanochat.optim casts to bf16 when its COMPUTE_DTYPE is bf16."""
        saved = self.optim.COMPUTE_DTYPE
        self.optim.COMPUTE_DTYPE = {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]
        try:
            yield
        finally:
            self.optim.COMPUTE_DTYPE = saved

    def convert_to_fp8(self, model):
        """base_train's --fp8: nanochat.fp8's tensorwise Float8Linear for every Linear its filter accepts.
        Returns the converted layers' names."""
        import nanochat.fp8
        ns = {"__builtins__": builtins, "nn": torch.nn}
        exec(self._fp8_filter_code, ns)
        config = nanochat.fp8.Float8LinearConfig.from_recipe_name("tensorwise")
        nanochat.fp8.convert_to_float8_training(model, config=config, module_filter_fn=ns["fp8_module_filter"])
        return [name for name, m in model.named_modules() if isinstance(m, nanochat.fp8.Float8Linear)]

    def new_model(self, config):
        """A GPT as base_train builds it: on the meta device, then storage on the CPU, then init_weights()
        (which draws from torch's global generator)."""
        with torch.device("meta"), contextlib.redirect_stdout(io.StringIO()):
            model = self.gpt.GPT(config)
        model.to_empty(device="cpu")
        model.init_weights()
        return model

    def model_facts(self, model):
        """The informative /meta facts: window sizes, value-embedding layers, constants of the forward pass."""
        forward = inspect.getsource(self.gpt.GPT.forward)
        softcap = re.search(r"softcap\s*=\s*([0-9.]+)", forward)
        backout = re.search(r"backout_layer\s*=\s*n_layer\s*//\s*(\d+)", forward)
        rotary = inspect.signature(self.gpt.GPT._precompute_rotary_embeddings).parameters["base"].default
        if not softcap or not backout:
            fail("cannot read softcap / backout_layer from nanochat's GPT.forward")
        n_layer = model.config.n_layer
        return {
            "window_sizes": np.array(model.window_sizes, dtype=np.int64),
            "ve_layers": np.array(sorted(int(k) for k in model.value_embeds.keys()), dtype=np.int64),
            "backout_layer": np.int64(n_layer // int(backout.group(1))),
            "rms_eps": np.float64(torch.finfo(torch.float32).eps),  # F.rms_norm(eps=None) on fp32 input
            "softcap": np.float64(float(softcap.group(1))),
            "rotary_base": np.float64(rotary),
            "padded_vocab_size": np.int64(model.transformer.wte.weight.shape[0]),
        }


# ----------------------------------------------------------------------------------------------------------
# helpers


def perturb_(model, generator, std):
    """Adds N(0, std^2) noise to every parameter, in state-dict order."""
    if std == 0:
        return
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator, dtype=torch.float32) * std)


def random_batch(generator, batch, seq, vocab, ignored=0):
    idx = torch.randint(0, vocab, (batch, seq), generator=generator)
    targets = torch.randint(0, vocab, (batch, seq), generator=generator)
    if ignored:
        positions = torch.randperm(batch * seq, generator=generator)[:ignored]
        targets.view(-1)[positions] = -1
    return idx, targets


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


# ----------------------------------------------------------------------------------------------------------
# model cases


def model_numbers(model, idx, targets):
    """nanochat's mean loss, softcapped logits and gradients of the mean loss (fp32, CPU)."""
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        logits = model(idx)
    loss = model(idx, targets)
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return loss.detach(), logits, grads


def make_model_case(nc, spec, path):
    config = nc.gpt.GPTConfig(**spec["config"])
    torch.manual_seed(spec["seed"])
    model = nc.new_model(config)
    generator = torch.Generator().manual_seed(spec["seed"])
    perturb_(model, generator, spec["perturb"])
    fp8_linears = nc.convert_to_fp8(model) if spec.get("fp8") else []
    if spec.get("fp8") and not fp8_linears:
        fail(f"{path}: --fp8 converted no Linear (each needs both sides divisible by 16, the smaller >= 128)")
    idx, targets = random_batch(generator, spec["batch"], config.sequence_len, config.vocab_size,
                                spec["ignored_targets"])
    loss, logits, grads = model_numbers(model, idx, targets)
    zero = [name for name, g in grads.items() if not torch.count_nonzero(g)]
    if zero and "name" in spec:
        fail(f"{path}: gradients that are all zero: {zero}")  # the committed cases must test every gradient
    if zero:
        print(f"note: gradients that are all zero: {zero}")
    weights = model.state_dict()

    def fill(f):
        config_attrs(f.create_group("config"), config, fp8=bool(fp8_linears))
        meta = f.create_group("meta")
        if fp8_linears:
            meta.attrs["fp8_linears"] = np.array(fp8_linears, dtype=STRING)
        common_meta(meta, nc, seed=np.int64(spec["seed"]), perturb=np.float64(spec["perturb"]),
                    ignored_targets=np.int64(spec["ignored_targets"]),
                    param_names=np.array(list(weights), dtype=STRING), **nc.model_facts(model))
        for name, w in weights.items():
            f.create_dataset(f"weights/{name}", data=f32(w))
        f.create_dataset("inputs/idx", data=idx.numpy())
        f.create_dataset("inputs/targets", data=targets.numpy())
        f.create_dataset("expected/loss", data=np.float32(loss.item()))
        f.create_dataset("expected/logits", data=f32(logits))
        for name, g in grads.items():
            f.create_dataset(f"expected/grads/{name}", data=f32(g))

    write_atomically(path, fill)
    print(f"{path}: loss {loss.item():.6f}, windows {model.window_sizes}, fp8 linears {len(fp8_linears)}, "
          f"{sum(w.numel() for w in weights.values())} parameters")


def verify_model_case(nc, f):
    config = config_from_file(nc, f)
    model = nc.new_model(config)
    if int(f["config"].attrs.get("fp8", 0)):
        nc.convert_to_fp8(model)
    names = [name for name, _ in model.named_parameters()]
    model.load_state_dict({name: torch.from_numpy(f["weights/" + name][()]) for name in names}, strict=True)
    idx = torch.from_numpy(f["inputs/idx"][()].astype(np.int64))
    targets = torch.from_numpy(f["inputs/targets"][()].astype(np.int64))
    loss, logits, grads = model_numbers(model, idx, targets)
    results = [compare("loss", loss, f["expected/loss"][()], rtol=1e-4, atol=1e-7),
               compare("logits", logits, f["expected/logits"][()], rtol=1e-4, atol=1e-7)]
    for name in names:
        results.append(compare(f"grads/{name}", grads[name], f[f"expected/grads/{name}"][()], rtol=1e-4, atol=1e-7))
    return results


# ----------------------------------------------------------------------------------------------------------
# optimizer goldens


def muon_group_facts(group):
    m, n = group["params"][0].shape
    return {"shape": np.array([m, n], dtype=np.int64),
            "lr_shape_scale": np.float64(max(1.0, m / n) ** 0.5),  # as MuonAdamW._compute_muon scales lr
            "red_dim": np.int64(-1 if m >= n else -2),
            "second_moment_shape": np.array([m, 1] if m >= n else [1, n], dtype=np.int64)}


def group_attrs(h5group, group, names, applied):
    h5group.attrs["kind"] = group["kind"]
    h5group.attrs["params"] = np.array([names[id(p)] for p in group["params"]], dtype=STRING)
    h5group.attrs["initial_lr"] = np.float64(group["initial_lr"])
    h5group.attrs["lr"] = np.float64(group["lr"])
    h5group.attrs["weight_decay"] = np.float64(group["weight_decay"])
    if group["kind"] == "adamw":
        h5group.attrs["betas"] = np.array(group["betas"], dtype=np.float64)
        h5group.attrs["eps"] = np.float64(group["eps"])
    else:
        h5group.attrs["momentum"] = np.float64(group["momentum"])
        h5group.attrs["ns_steps"] = np.int64(group["ns_steps"])
        h5group.attrs["beta2"] = np.float64(group["beta2"])
        facts = muon_group_facts(group)
        for key, value in facts.items():
            h5group.attrs[key] = value
        if applied:
            h5group.attrs["lr_effective"] = np.float64(group["lr"] * facts["lr_shape_scale"])


def optimizer_state(optimizer, names):
    """Per parameter: AdamW step / exp_avg / exp_avg_sq; Muon's stacked buffers split into per-matrix rows."""
    state = {}
    for group in optimizer.param_groups:
        if group["kind"] == "adamw":
            for p in group["params"]:
                s = optimizer.state[p]
                state[names[id(p)]] = {"step": np.int64(s["step"]), "exp_avg": f32(s["exp_avg"]),
                                       "exp_avg_sq": f32(s["exp_avg_sq"])}
        else:
            s = optimizer.state[group["params"][0]]
            for i, p in enumerate(group["params"]):
                state[names[id(p)]] = {"momentum_buffer": f32(s["momentum_buffer"][i]),
                                       "second_momentum_buffer": f32(s["second_momentum_buffer"][i])}
    return state


def build_optim_model(nc, spec):
    """base_train's model for the spec's command line (n_kv_head optionally replaced), and its namespace."""
    ns = nc.base_train(spec["cli"], spec["vocab_size"])
    with contextlib.redirect_stdout(io.StringIO()):  # GPT() announces its vocabulary padding
        config = ns["build_model_meta"](ns["args"].depth).config
    if spec["n_kv_head"] is not None:
        config.n_kv_head = spec["n_kv_head"]
    torch.manual_seed(spec["seed"])  # base_train: compute_init seeds torch's global generator with 42
    model = nc.new_model(config)
    return ns, model


def run_steps(nc, ns, model, optimizer, iterations, ortho, next_grads):
    """Runs optimizer steps at `iterations`; next_grads(k) sets p.grad and returns (loss, idx, targets)."""
    names = {id(p): name for name, p in model.named_parameters()}
    steps = []
    for k, it in enumerate(iterations):
        loss, idx, targets = next_grads(k)
        grads = {name: f32(p.grad) for name, p in model.named_parameters()}
        lrm, momentum, decay = nc.apply_schedule(ns, it)
        with nc.ortho_dtype(ortho):
            optimizer.step()
        model.zero_grad(set_to_none=True)
        steps.append(dict(iteration=it, lrm=lrm, momentum=momentum, decay=decay, loss=loss, idx=idx,
                          targets=targets, grads=grads,
                          groups=[dict(g) for g in optimizer.param_groups],
                          weights_after={name: f32(p) for name, p in model.named_parameters()},
                          state=optimizer_state(optimizer, names)))
    return steps


def make_optim_golden(nc, spec, path):
    ns, model = build_optim_model(nc, spec)
    generator = torch.Generator().manual_seed(spec["seed"])
    perturb_(model, generator, spec["perturb"])
    optimizer = nc.setup_optimizer(ns, model)
    names = {id(p): name for name, p in model.named_parameters()}
    param_names = [name for name, _ in model.named_parameters()]
    weights_before = {name: f32(p) for name, p in model.named_parameters()}
    initial_groups = [dict(g) for g in optimizer.param_groups]
    config = model.config
    num_iterations = ns["num_iterations"]

    def next_grads(k):
        idx, targets = random_batch(generator, spec["batch"], config.sequence_len, config.vocab_size)
        loss = model(idx, targets)  # base_train: loss = model(x, y); (loss / grad_accum_steps).backward()
        loss.backward()
        return loss.item(), idx, targets

    steps = run_steps(nc, ns, model, optimizer, spec["iterations"], spec["ortho_dtype"], next_grads)
    schedule = {"lr_multiplier": [], "muon_momentum": [], "muon_weight_decay": []}
    for it in range(num_iterations + 1):
        schedule["lr_multiplier"].append(ns["get_lr_multiplier"](it))
        schedule["muon_momentum"].append(ns["get_muon_momentum"](it))
        schedule["muon_weight_decay"].append(ns["get_weight_decay"](it))
    group_of = {}
    for g, group in enumerate(initial_groups):
        for p in group["params"]:
            group_of[names[id(p)]] = g
    args = ns["args"]
    buildable = spec["n_kv_head"] is None

    def fill(f):
        config_attrs(f.create_group("config"), config, fp8=bool(fp8_linears))
        meta = f.create_group("meta")
        if fp8_linears:
            meta.attrs["fp8_linears"] = np.array(fp8_linears, dtype=STRING)
        common_meta(meta, nc, seed=np.int64(spec["seed"]), perturb=np.float64(spec["perturb"]),
                    batch=np.int64(spec["batch"]), num_steps=np.int64(len(steps)),
                    ortho_dtype=spec["ortho_dtype"], param_dtype="float32", state_steps="all",
                    grads="mean cross-entropy loss of nanochat's GPT on fresh random tokens at the current weights",
                    param_names=np.array(param_names, dtype=STRING), **nc.model_facts(model))
        oc = f.create_group("optim_config")
        oc.attrs["optimizer"] = "nanochat.optim.MuonAdamW (single process: world_size 1)"
        oc.attrs["ortho_dtype"] = spec["ortho_dtype"]
        oc.attrs["base_train_cli"] = " ".join(spec["cli"])
        oc.attrs["base_train_buildable"] = np.bool_(buildable)
        if not buildable:
            oc.attrs["n_kv_head_override"] = np.int64(spec["n_kv_head"])
        for key, value in sorted(vars(args).items()):
            if key not in RELEVANT_ARGS:
                continue
            if isinstance(value, int):
                oc.attrs[f"arg_{key}"] = np.int64(value)
            elif isinstance(value, float):
                oc.attrs[f"arg_{key}"] = np.float64(value)
            elif isinstance(value, str) and value:
                oc.attrs[f"arg_{key}"] = value
        for key in ("num_scaling_params", "target_tokens", "D_REF", "B_REF", "total_batch_size",
                    "num_iterations"):
            value = ns[key]
            if float(value) != int(value):
                fail(f"{key} = {value} is not an integer")
            oc.attrs[key] = np.int64(int(value))
        for key in ("batch_lr_scale", "weight_decay_scaled"):
            oc.attrs[key] = np.float64(ns[key])
        oc.attrs["dmodel_lr_scale"] = np.float64((config.n_embd / 768) ** -0.5)  # GPT.setup_optimizer
        oc.attrs["ref12_n_embd"] = np.int64(ns["d12_ref"].config.n_embd)
        oc.attrs["setup_unembedding_lr"] = np.float64(args.unembedding_lr * ns["batch_lr_scale"])
        oc.attrs["setup_embedding_lr"] = np.float64(args.embedding_lr * ns["batch_lr_scale"])
        oc.attrs["setup_scalar_lr"] = np.float64(args.scalar_lr * ns["batch_lr_scale"])
        oc.attrs["setup_matrix_lr"] = np.float64(args.matrix_lr * ns["batch_lr_scale"])
        oc.attrs["setup_weight_decay"] = np.float64(ns["weight_decay_scaled"])
        oc.attrs["iterations"] = np.array([s["iteration"] for s in steps], dtype=np.int64)
        oc.attrs["lr_multiplier"] = np.array([s["lrm"] for s in steps], dtype=np.float64)
        oc.attrs["muon_momentum"] = np.array([s["momentum"] for s in steps], dtype=np.float64)
        oc.attrs["muon_weight_decay"] = np.array([s["decay"] for s in steps], dtype=np.float64)
        oc.attrs["polar_express_coeffs"] = np.array(nc.optim.polar_express_coeffs, dtype=np.float64)
        oc.attrs["num_groups"] = np.int64(len(initial_groups))
        oc.attrs["param_group"] = np.array([group_of[name] for name in param_names], dtype=np.int64)
        for g, group in enumerate(initial_groups):
            group_attrs(oc.create_group(f"groups/{g:02d}"), group, names, applied=False)

        f.create_dataset("schedule/iteration", data=np.arange(num_iterations + 1, dtype=np.int64))
        for key, values in schedule.items():
            f.create_dataset(f"schedule/{key}", data=np.array(values, dtype=np.float64))
        for name, w in weights_before.items():
            f.create_dataset(f"weights_before/{name}", data=w)
        for k, s in enumerate(steps):
            step = f.create_group(f"steps/{k}")
            step.attrs["iteration"] = np.int64(s["iteration"])
            step.attrs["lr_multiplier"] = np.float64(s["lrm"])
            step.attrs["muon_momentum"] = np.float64(s["momentum"])
            step.attrs["muon_weight_decay"] = np.float64(s["decay"])
            step.attrs["loss"] = np.float64(s["loss"])
            step.create_dataset("inputs/idx", data=s["idx"].numpy())
            step.create_dataset("inputs/targets", data=s["targets"].numpy())
            for g, group in enumerate(s["groups"]):
                group_attrs(step.create_group(f"groups/{g:02d}"), group, names, applied=True)
            for name in param_names:
                step.create_dataset(f"grads/{name}", data=s["grads"][name])
            for name in param_names:
                step.create_dataset(f"weights_after/{name}", data=s["weights_after"][name])
            for name in param_names:
                for key, value in s["state"][name].items():
                    step.create_dataset(f"state/{name}/{key}", data=value)

    write_atomically(path, fill)
    print(f"{path}: {len(initial_groups)} groups, losses {[round(s['loss'], 6) for s in steps]}, "
          f"{sum(w.size for w in weights_before.values())} parameters")


def verify_optim_golden(nc, f):
    """Replays a golden's stored gradients through nanochat's MuonAdamW, set up by base_train from the
    golden's base_train_cli, and compares weights, state, group values and the schedule table."""
    oc = f["optim_config"].attrs
    config = config_from_file(nc, f)
    cli = str(oc["base_train_cli"]).split()
    ns = nc.base_train(cli, config.vocab_size)
    model = nc.new_model(config)
    names = [name for name, _ in model.named_parameters()]
    model.load_state_dict({name: torch.from_numpy(f["weights_before/" + name][()]) for name in names})
    optimizer = nc.setup_optimizer(ns, model)
    ortho = text_of(oc.get("ortho_dtype", f["meta"].attrs.get("ortho_dtype", "float32")))
    params = dict(model.named_parameters())
    steps = sorted(f["steps"], key=int)

    def next_grads(k):
        for name in names:
            params[name].grad = torch.from_numpy(f[f"steps/{steps[k]}/grads/{name}"][()]).clone()
        return None, None, None

    iterations = [int(f[f"steps/{k}"].attrs["iteration"]) for k in steps]
    results = []
    for key in ("batch_lr_scale", "weight_decay_scaled"):
        results.append(compare(f"optim_config/{key}", torch.tensor(ns[key], dtype=torch.float64), oc[key],
                               rtol=1e-15, atol=0))
    for g, group in enumerate(optimizer.param_groups):
        stored = f[f"optim_config/groups/{g:02d}"].attrs
        results.append(compare(f"groups/{g:02d}/initial_lr", torch.tensor(group["initial_lr"], dtype=torch.float64),
                               stored["initial_lr"], rtol=1e-15, atol=0))
    if "schedule" in f:
        for key, fn in (("lr_multiplier", "get_lr_multiplier"), ("muon_momentum", "get_muon_momentum"),
                        ("muon_weight_decay", "get_weight_decay")):
            its = f["schedule/iteration"][()]
            got = torch.tensor([ns[fn](int(i)) for i in its], dtype=torch.float64)
            results.append(compare(f"schedule/{key}", got, f[f"schedule/{key}"][()], rtol=1e-15, atol=0))
    replay = run_steps(nc, ns, model, optimizer, iterations, ortho, next_grads)
    muon_group = {}  # parameter name -> its Muon group's key
    for g, group in enumerate(optimizer.param_groups):
        if group["kind"] == "muon":
            for p in group["params"]:
                muon_group[next(n for n in names if params[n] is p)] = f"{g:02d}"
    decay_sum = {}
    before = {name: f[f"weights_before/{name}"][()] for name in names}
    for k, s in zip(steps, replay):
        for key in set(muon_group.values()):
            attrs = f[f"steps/{k}/groups/{key}"].attrs
            decay_sum[key] = decay_sum.get(key, 0.0) + float(attrs["lr_effective"]) * float(attrs["weight_decay"])
        for name in names:
            expected = f[f"steps/{k}/weights_after/{name}"][()]
            results.append(compare_step(f"steps/{k}/weights_after/{name}", int(k), s["weights_after"][name],
                                        expected, before[name], decay_sum.get(muon_group.get(name), 0.0),
                                        bf16=ortho == "bfloat16" and name in muon_group))
            before[name] = expected
            if f"steps/{k}/state/{name}" in f:
                for key, value in s["state"][name].items():
                    results.append(compare(f"steps/{k}/state/{name}/{key}", torch.as_tensor(value),
                                           f[f"steps/{k}/state/{name}/{key}"][()],
                                           rtol=0.5 if ortho == "bfloat16" else 1e-4, atol=0))
    return results


# ----------------------------------------------------------------------------------------------------------
# comparison


def compare(name, got, expected, rtol, atol):
    """(name, max |got - expected|, tolerance atol + rtol * max |expected|, passed)."""
    got = np.asarray(got.detach().to(torch.float64).numpy() if torch.is_tensor(got) else got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        return (name, math.inf, 0.0, False)
    error = float(np.max(np.abs(got - expected))) if got.size else 0.0
    tolerance = atol + rtol * (float(np.max(np.abs(expected))) if expected.size else 0.0)
    return (name, error, tolerance, bool(np.all(np.isfinite(got))) and error <= tolerance)


def compare_step(name, k, got, expected, before, decay_sum, bf16):
    """The optimizer rule of docs/parity.md: per element |got - exp| <= 1e-3 max|exp - before| + (k+1) fp32
    ulps of max|exp|, except up to ceil(1e-4 numel) cautious-decay sign flips within 1.05 decay_sum |w|; for
    Muon tensors of a bf16 orthogonalisation, ||got - exp|| <= 0.5 ||exp - before|| (Frobenius)."""
    got, expected, before = (np.asarray(a, dtype=np.float64) for a in (got, expected, before))
    if got.shape != expected.shape or not np.all(np.isfinite(got)):
        return (name, math.inf, 0.0, False)
    if bf16:
        error = float(np.linalg.norm(got - expected))
        tolerance = 0.5 * float(np.linalg.norm(expected - before))
        return (name, error, tolerance, error <= tolerance)
    top = float(np.max(np.abs(expected)))
    tolerance = 1e-3 * float(np.max(np.abs(expected - before))) + (k + 1) * float(
        np.spacing(np.float32(top)))
    error = np.abs(got - expected)
    outside = error > tolerance
    flips = outside & (error <= 1.05 * decay_sum * np.maximum(np.abs(before), np.abs(expected)))
    worst = float(np.max(np.where(outside & ~flips | ~outside, error, 0.0)))
    allowed = math.ceil(1e-4 * expected.size)
    return (name, worst, tolerance, worst <= tolerance and int(flips.sum()) <= allowed)


def verify(nc, paths):
    all_passed = True
    for path in paths:
        with h5py.File(path, "r") as f:
            results = verify_optim_golden(nc, f) if "optim_config" in f else verify_model_case(nc, f)
        failed = [r for r in results if not r[3]]
        worst = max(results, key=lambda r: r[1] / r[2] if r[2] else (0 if r[1] == 0 else math.inf))
        print(f"{path}: {len(results) - len(failed)}/{len(results)} within tolerance; "
              f"largest relative to its tolerance: {worst[0]} error {worst[1]:.3g} (tolerance {worst[2]:.3g})")
        for name, error, tolerance, _ in failed[:20]:
            print(f"  FAIL {name}: error {error:.3g} > tolerance {tolerance:.3g}")
        all_passed &= not failed
    return all_passed


# ----------------------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanochat", required=True, help="path to a nanochat checkout")
    parser.add_argument("--nanochat-commit", help="the checkout's commit, when it is not a git work tree")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", help="folder to write the committed files into")
    mode.add_argument("--verify", nargs="+", metavar="FILE", help="recompute these files' numbers instead")
    mode.add_argument("--case", metavar="FILE", help="write one model case of the shape given below")
    parser.add_argument("--only", nargs="+", help="with --out: names of the files to write (default: all)")
    shape = parser.add_argument_group("shape of a --case")
    shape.add_argument("--n-layer", type=int)
    shape.add_argument("--n-embd", type=int)
    shape.add_argument("--n-head", type=int)
    shape.add_argument("--n-kv-head", type=int)
    shape.add_argument("--vocab", type=int)
    shape.add_argument("--seq", type=int, help="sequence_len, and the inputs' T")
    shape.add_argument("--window-pattern", default="SL")
    shape.add_argument("--batch", type=int, default=2)
    shape.add_argument("--seed", type=int, default=1)
    shape.add_argument("--perturb", type=float, default=0.1, help="std of the noise added to every weight")
    shape.add_argument("--ignored-targets", type=int, default=0, help="how many targets are set to -1")
    shape.add_argument("--fp8", action="store_true", help="train in FP8 as base_train --fp8 does")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if args.case:
        needed = ("n_layer", "n_embd", "n_head", "n_kv_head", "vocab", "seq")
        missing = [f"--{k.replace('_', '-')}" for k in needed if getattr(args, k) is None]
        if missing:
            parser.error(f"--case needs {' '.join(missing)}")
        spec = dict(config=dict(sequence_len=args.seq, vocab_size=args.vocab, n_layer=args.n_layer,
                                n_head=args.n_head, n_kv_head=args.n_kv_head, n_embd=args.n_embd,
                                window_pattern=args.window_pattern),
                    batch=args.batch, seed=args.seed, perturb=args.perturb, ignored_targets=args.ignored_targets,
                    fp8=args.fp8)
        nc = Nanochat(args.nanochat, args.nanochat_commit)
        os.makedirs(os.path.dirname(os.path.abspath(args.case)), exist_ok=True)
        make_model_case(nc, spec, args.case)
        return
    nc = Nanochat(args.nanochat, args.nanochat_commit)
    if args.verify:
        sys.exit(0 if verify(nc, args.verify) else 1)

    known = [s["name"] for s in MODEL_CASES + OPTIM_GOLDENS]
    unknown = set(args.only or []) - set(known)
    if unknown:
        parser.error(f"unknown names {sorted(unknown)}; known: {known}")
    os.makedirs(args.out, exist_ok=True)
    for spec in MODEL_CASES:
        if not args.only or spec["name"] in args.only:
            make_model_case(nc, spec, os.path.join(args.out, spec["name"] + ".h5"))
    for spec in OPTIM_GOLDENS:
        if not args.only or spec["name"] in args.only:
            make_optim_golden(nc, spec, os.path.join(args.out, spec["name"] + ".h5"))


if __name__ == "__main__":
    main()
