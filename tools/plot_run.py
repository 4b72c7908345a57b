#!/usr/bin/env python3
"""Plot a nanoforge run: training loss, validation bits per byte, throughput and CORE from RUN/metrics.jsonl.

    python3 tools/plot_run.py RUN_DIR [--out RUN_DIR/run.png] [--smooth 0.9]

The training loss is drawn raw (faint) and smoothed with nanochat's debiased EMA; val bpb points come from the
evaluation lines; tokens/s is per step; the CORE metric (train.core_every) gets a fourth panel when a run has
it; each re-formation by `nanoforge launch` is a dashed line on the loss at the step it resumed from. Several
runs can be given to compare them on the same axes.
"""

import argparse
import json
import math
import os
import sys

import build_python  # the build tree's Python when this one lacks the packages

build_python.require("matplotlib")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_metrics(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    steps, losses, rates, val_steps, val_bpb, core_steps, core, reformations = [], [], [], [], [], [], [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                sys.exit(f"{path}:{number}: not JSON ({error})")
            if record.get("event") == "reformation":
                reformations.append((record["step"], reformation_label(record)))
            elif "core_metric" in record:
                core_steps.append(record["step"])
                core.append(record["core_metric"])
            elif "val_bpb" in record and record["val_bpb"] is not None:
                val_steps.append(record["step"])
                val_bpb.append(record["val_bpb"])
            elif "loss" in record:
                steps.append(record["step"])
                losses.append(record["loss"])
                rates.append(record.get("tokens_per_s", math.nan))
    if not steps and not val_steps and not core_steps:
        sys.exit(f"{path}: no training or evaluation records")
    return steps, losses, rates, (val_steps, val_bpb), (core_steps, core), reformations


def reformation_label(record):
    """As `nanoforge report` labels it: "restart 1: 3 -> 2", or "join: 2 -> 3"."""
    cause = "join" if record.get("cause") == "join" else f"restart {record.get('restart', '?')}"
    return f"{cause}: {record.get('previous_world_size', '?')} -> {record.get('world_size', '?')}"


def debiased_ema(values, beta):
    smoothed, average = [], 0.0
    for i, value in enumerate(values):
        average = beta * average + (1 - beta) * value
        smoothed.append(average / (1 - beta ** (i + 1)))
    return smoothed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories (each with metrics.jsonl)")
    parser.add_argument("--out", help="PNG to write (default: RUN/run.png of the first run)")
    parser.add_argument("--smooth", type=float, default=0.9, help="EMA factor for the training loss")
    args = parser.parse_args()

    metrics = [read_metrics(run) for run in args.runs]
    with_core = any(core_steps for *_, (core_steps, _), _ in metrics)
    figure, axes = plt.subplots(1, 4 if with_core else 3, figsize=(21 if with_core else 16, 4.5))
    loss_axis, bpb_axis, rate_axis = axes[:3]
    for run, (steps, losses, rates, (val_steps, val_bpb), (core_steps, core), reformations) in zip(args.runs, metrics):
        label = os.path.basename(os.path.normpath(run))
        if steps:
            line, = loss_axis.plot(steps, losses, alpha=0.25)
            loss_axis.plot(steps, debiased_ema(losses, args.smooth), color=line.get_color(), label=label)
            rate_axis.plot(steps, rates, color=line.get_color(), label=label)
            for step, text in reformations:
                loss_axis.axvline(step, color=line.get_color(), linestyle="--", linewidth=1)
                loss_axis.annotate(text, (step, 1), xycoords=("data", "axes fraction"), xytext=(3, -12),
                                   textcoords="offset points", fontsize=8, color=line.get_color())
        if val_steps:
            bpb_axis.plot(val_steps, val_bpb, marker="o", label=label)
        if core_steps:
            axes[3].plot(core_steps, core, marker="o", label=label)
    loss_axis.set(title="training loss (nats/token)", xlabel="step")
    bpb_axis.set(title="validation bits per byte", xlabel="step")
    rate_axis.set(title="throughput (tokens/s)", xlabel="step")
    if with_core:
        axes[3].set(title="CORE (mean centred accuracy)", xlabel="step")
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    out = args.out or os.path.join(args.runs[0], "run.png")
    figure.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
