#!/usr/bin/env python3
"""Write nanoforge's CORE golden: nanochat's own CORE evaluation run on a nanoforge checkpoint, with the path of
each example through it recorded (what and why: docs/core.md, "Tests and the golden").

Usage:
  python3 tools/dev/make_core_golden.py --nanochat PATH_TO_NANOCHAT_CHECKOUT \\
      --checkpoint tests/eval/core/golden/checkpoint --tokenizer tests/data/tokenizer/golden \\
      --bundle tests/eval/core/bundle --max-per-task -1 12 --out tests/eval/core/golden/core_golden.json
Needs torch (nanochat pins 2.9.1; a CPU build is enough), numpy, h5py, jinja2, pyyaml, tiktoken, filelock, rustbpe
and pyarrow; no GPU, no network. Runs as nanochat does on a CPU: fp32, torch.compile off, one thread.
"""

import argparse
import base64
import json
import math
import os
import pickle
import subprocess
import sys
import tempfile

os.environ["NANOCHAT_DTYPE"] = "float32"
os.environ["TORCH_COMPILE_DISABLE"] = "1"

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tools/, a user tool
import export_checkpoint  # noqa: E402


def write_nanochat_tokenizer(tokenizer_dir, out_dir, split_pattern):
    """nanochat's tokenizer.pkl: a tiktoken Encoding of the nanoforge ranks and special tokens."""
    import tiktoken

    ranks = {}
    with open(os.path.join(tokenizer_dir, "tokenizer.tiktoken")) as f:
        for line in f:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    specials = {}
    with open(os.path.join(tokenizer_dir, "special_tokens.txt")) as f:
        for line in f:
            name, token_id = line.split()
            specials[name] = int(token_id)
    encoding = tiktoken.Encoding(name="nanoforge", pat_str=split_pattern, mergeable_ranks=ranks,
                                 special_tokens=specials)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.pkl"), "wb") as f:
        pickle.dump(encoding, f)


def example_lines(bundle, dataset_uri):
    """Line number (1-based) of each example of a task file, keyed by its canonical JSON."""
    lines = {}
    with open(os.path.join(bundle, "eval_data", dataset_uri), encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            key = json.dumps(json.loads(line.strip()), sort_keys=True)
            if key in lines:
                sys.exit(f"{dataset_uri}: line {number} repeats line {lines[key]}; the golden needs unique examples")
            lines[key] = number
    return lines


class Recorder:
    """Wraps nanochat.core_eval's functions (once); each example's trace lands in self.examples."""

    def __init__(self, core_eval):
        self.examples = []
        self.current = None
        wrappers = {"evaluate_example": self.wrap_evaluate_example, "forward_model": self.wrap_forward_model}
        for kind in ("mc", "schema", "lm"):
            wrappers["render_prompts_" + kind] = self.wrap_render
            wrappers["batch_sequences_" + kind] = self.wrap_batch
        for name, wrap in wrappers.items():
            setattr(core_eval, name, wrap(getattr(core_eval, name)))

    def wrap_evaluate_example(self, original):
        def evaluate_example(idx, model, tokenizer, data, device, task_meta):
            self.current = {"idx": idx, "data": data, "task_type": task_meta["task_type"]}
            correct = original(idx, model, tokenizer, data, device, task_meta)
            trace = self.current
            trace["correct"] = bool(correct)
            del trace["data"]
            self.examples.append(trace)
            return correct
        return evaluate_example

    def wrap_render(self, original):
        def render(item, continuation_delimiter, fewshot_examples=None):
            data = self.current["data"]
            self.current["shots"] = [next(i for i, x in enumerate(data) if x is shot)
                                     for shot in (fewshot_examples or [])]
            self.current["item"] = item
            prompts = original(item, continuation_delimiter, fewshot_examples)
            self.current["prompts"] = prompts
            return prompts
        return render

    def wrap_batch(self, original):
        def batch(tokenizer, prompts):
            tokens, start, end = original(tokenizer, prompts)
            self.current["tokens"], self.current["start"], self.current["end"] = tokens, start, end
            return tokens, start, end
        return batch

    def wrap_forward_model(self, original):
        def forward_model(model, input_ids):
            losses, predictions = original(model, input_ids)
            trace = self.current
            if trace["task_type"] == "language_modeling":
                # How far the argmax is from a tie at each scored position (the capped logits it compares).
                with torch.no_grad():
                    logits = model(input_ids)
                si, ei = trace["start"][0], trace["end"][0]
                top2 = torch.topk(logits[0, si - 1:ei - 1].float(), 2, dim=-1).values
                trace["argmax_margin"] = float((top2[:, 0] - top2[:, 1]).min().item())
            else:
                # As evaluate_example computes them; NaN (an empty span) is written as null (JSON has no NaN).
                means = [losses[i, si - 1:ei - 1].mean().item() for i, (si, ei) in enumerate(zip(trace["start"], trace["end"]))]
                trace["mean_losses"] = [None if math.isnan(m) else m for m in means]
            return losses, predictions
        return forward_model


def run(recorder, base_eval, model, tokenizer, bundle, tasks, max_per_task):
    recorder.examples = []
    results = base_eval.evaluate_core(model, tokenizer, "cpu", max_per_task=max_per_task)
    by_task = []
    examples = iter(recorder.examples)
    for task in tasks:
        lines = example_lines(bundle, task["dataset_uri"])
        count = min(len(lines), max_per_task) if max_per_task > 0 else len(lines)
        traces = []
        for _ in range(count):
            trace = next(examples)
            assert trace["idx"] == len(traces), "one rank evaluates a task's examples in order"
            entry = {
                "line": lines[json.dumps(trace["item"], sort_keys=True)],
                "shots": trace["shots"],
                "prompts": trace["prompts"],
                "lengths": [len(t) for t in trace["tokens"]],
                "start": trace["start"],
                "end": trace["end"],
                "span_tokens": [t[s:e] for t, s, e in zip(trace["tokens"], trace["start"], trace["end"])],
                "correct": trace["correct"],
            }
            for key in ("mean_losses", "argmax_margin"):
                if key in trace:
                    entry[key] = trace[key]
            traces.append(entry)
        by_task.append({"label": task["label"], "examples": traces})
    return {"max_per_task": max_per_task, "results": results["results"],
            "centered_results": results["centered_results"], "core_metric": results["core_metric"],
            "record": json.dumps(results), "tasks": by_task}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanochat", required=True, help="a nanochat checkout")
    parser.add_argument("--checkpoint", required=True, help="nanoforge checkpoint or run directory")
    parser.add_argument("--tokenizer", required=True, help="nanoforge tokenizer directory the model was trained with")
    parser.add_argument("--bundle", required=True, help="eval bundle: core.yaml, eval_meta_data.csv, eval_data/")
    parser.add_argument("--max-per-task", type=int, nargs="+", default=[-1])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    base_dir = tempfile.mkdtemp(prefix="nanoforge_core_golden_")
    os.environ["NANOCHAT_BASE_DIR"] = base_dir
    sys.path.insert(0, os.path.abspath(args.nanochat))
    import yaml
    from nanochat import core_eval, tokenizer as nanochat_tokenizer
    from nanochat.checkpoint_manager import load_model
    from scripts import base_eval

    checkpoint = export_checkpoint.resolve_checkpoint(args.checkpoint)
    export_checkpoint.export_nanochat(checkpoint, os.path.join(base_dir, "base_checkpoints", "golden"),
                                      fp32_embeddings=True)
    write_nanochat_tokenizer(args.tokenizer, os.path.join(base_dir, "tokenizer"), nanochat_tokenizer.SPLIT_PATTERN)
    os.symlink(os.path.abspath(args.bundle), os.path.join(base_dir, "eval_bundle"))
    model, tokenizer, _ = load_model("base", torch.device("cpu"), phase="eval", model_tag="golden")
    with open(os.path.join(args.bundle, "core.yaml")) as f:
        tasks = yaml.safe_load(f)["icl_tasks"]

    recorder = Recorder(core_eval)
    commit = subprocess.run(["git", "-C", args.nanochat, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    golden = {  # "generator": the path it had when the golden was made, so that it regenerates byte for byte
        "generator": "tools/make_core_golden.py",
        "nanochat_commit": commit,
        "torch": torch.__version__,
        "checkpoint": os.path.relpath(checkpoint),
        "tokenizer": os.path.relpath(args.tokenizer),
        "bundle": os.path.relpath(args.bundle),
        "runs": [run(recorder, base_eval, model, tokenizer, args.bundle, tasks, n) for n in args.max_per_task],
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for run_result in golden["runs"]:
        print(f"max_per_task {run_result['max_per_task']}: CORE {run_result['core_metric']:.6f}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
