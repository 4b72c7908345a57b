#!/usr/bin/env python3
"""Turn `nanoforge bench scaling` records into a scaling table and plot.

    python3 tools/scaling_report.py np1.json np2.json np4.json np8.json [--out scaling.png] [--markdown]

Each file holds the JSON record a run printed last (written with --json-out, or the last line of its output).
Speedup and efficiency are recomputed here against the one-device record (there must be exactly one), so the
runs need not have been given --baseline. The table goes to stdout (--markdown: as a Markdown table); the plot
has tokens/s against devices with the ideal line, and the step time split into compute, exposed communication
and data wait.
"""

import argparse
import json
import sys

import build_python  # the build tree's Python when this one lacks the packages

build_python.require("matplotlib")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_record(path):
    try:
        with open(path) as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
    except OSError as error:
        sys.exit(f"{path}: {error.strerror}")
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("bench") == "scaling":
            return record
    sys.exit(f"{path}: no bench scaling JSON record (run `nanoforge bench scaling ... --json-out {path}`)")


def build_rows(records):
    singles = [r for r in records if r["devices"] == 1]
    if len(singles) != 1:
        sys.exit(f"need exactly one one-device record to compare with, got {len(singles)}")
    base = singles[0]["tokens_per_s"]
    rows = []
    for r in sorted(records, key=lambda r: r["devices"]):
        speedup = r["tokens_per_s"] / base
        rows.append(
            {
                "devices": r["devices"],
                "tokens_per_s": r["tokens_per_s"],
                "per_device": r["tokens_per_s"] / r["devices"],
                "speedup": speedup,
                "efficiency": speedup / r["devices"],
                "step_ms": 1e3 * r["step_s"],
                "compute_ms": 1e3 * r["compute_s"],
                "comm_ms": 1e3 * r["exposed_comm_s"],
                "data_ms": 1e3 * r["data_wait_s"],
            }
        )
    return rows


def print_table(rows, markdown):
    header = ["devices", "tokens/s", "per device", "speedup", "efficiency", "step ms", "compute", "exposed comm",
              "data wait"]
    cells = [
        [
            str(r["devices"]),
            f"{r['tokens_per_s']:,.0f}",
            f"{r['per_device']:,.0f}",
            f"{r['speedup']:.2f}x",
            f"{100 * r['efficiency']:.1f}%",
            f"{r['step_ms']:.1f}",
            f"{r['compute_ms']:.1f}",
            f"{r['comm_ms']:.1f}",
            f"{r['data_ms']:.1f}",
        ]
        for r in rows
    ]
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---:|" * len(header))
        for row in cells:
            print("| " + " | ".join(row) + " |")
        return
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for row in cells:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))


def plot(rows, out):
    devices = [r["devices"] for r in rows]
    figure, (rate_axis, time_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    base = rows[0]["tokens_per_s"]
    rate_axis.plot(devices, [base * d for d in devices], "--", color="grey", label="ideal (linear)")
    rate_axis.plot(devices, [r["tokens_per_s"] for r in rows], "o-", label="measured")
    for r in rows:
        rate_axis.annotate(f"{100 * r['efficiency']:.0f}%", (r["devices"], r["tokens_per_s"]),
                           textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8)
    rate_axis.set_xlabel("devices")
    rate_axis.set_ylabel("tokens/s")
    rate_axis.set_xticks(devices)
    rate_axis.set_title("throughput (labels: efficiency)")
    rate_axis.legend()
    labels = [str(d) for d in devices]
    compute = [r["compute_ms"] for r in rows]
    comm = [r["comm_ms"] for r in rows]
    data = [r["data_ms"] for r in rows]
    time_axis.bar(labels, compute, label="compute")
    time_axis.bar(labels, comm, bottom=compute, label="exposed communication")
    time_axis.bar(labels, data, bottom=[c + m for c, m in zip(compute, comm)], label="data wait")
    time_axis.set_xlabel("devices")
    time_axis.set_ylabel("ms per step")
    time_axis.set_title("median step time")
    time_axis.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=120)
    print(f"wrote {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="bench scaling JSON files, one per world size")
    parser.add_argument("--out", default="scaling.png", help="where to write the plot")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args()
    rows = build_rows([read_record(path) for path in args.records])
    print_table(rows, args.markdown)
    plot(rows, args.out)


if __name__ == "__main__":
    main()
