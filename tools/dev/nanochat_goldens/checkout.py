"""nanochat's modules imported from a checkout, and the pieces of its scripts/base_train.py that this tool runs
(read from base_train's syntax tree, never the script as a whole: docs/parity.md, "Generating cases")."""

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

import numpy as np
import torch

from nanochat_goldens import fail

PINNED_COMMIT = "92d63d4e8bb4df75c3b71618f31ddde2378b2bcd"


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
