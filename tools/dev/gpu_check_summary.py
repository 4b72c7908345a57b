#!/usr/bin/env python3
"""Write scripts/gpu-check.sh's JSON summary and print its closing table.

    python3 tools/dev/gpu_check_summary.py --state DIR --out gpu-check.json [--ctest-log F] [--sanitizer-log F]
                                       [--bench NAME=FILE ...]

DIR holds what the shell script recorded: facts.tsv (key, value), gpu.tsv (key, value; absent without a GPU)
and stages.tsv (stage, status, seconds, note). The logs are parsed for counts; each benchmark's JSON record
(`nanoforge bench step --json-out`) is embedded as written. Standard library only: runs on any python3.
"""

import argparse
import json
import os
import re
import sys


def read_tsv(path, columns):
    """Rows of a tab-separated file as dicts (missing file: no rows)."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            fields += [""] * (len(columns) - len(fields))
            rows.append(dict(zip(columns, fields)))
    return rows


def read_text(path):
    if not path or not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def number(text):
    """'12' -> 12; anything else (versions such as '13.0' included) unchanged."""
    try:
        return int(text)
    except ValueError:
        return text


def ctest_counts(log):
    """Passed/failed/total and the failed tests' names from ctest's closing lines (None: ctest never ran)."""
    found = re.findall(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", log)
    if not found:
        return {"passed": 0, "failed": 0, "total": 0, "failed_names": []} if "No tests were found" in log else None
    _, failed, total = (int(x) for x in found[-1])
    failed_section = log.rsplit("The following tests FAILED:", 1)
    names = re.findall(r"^\s*\d+ - (\S+)", failed_section[1], re.M) if len(failed_section) == 2 else []
    return {"passed": total - failed, "failed": failed, "total": total, "failed_names": names}


def sanitizer_errors(log):
    found = re.findall(r"ERROR SUMMARY: (\d+) error", log)
    return int(found[-1]) if found else None


def bench_record(path):
    """The benchmark's JSON record, or None when the run wrote none (or an unreadable one)."""
    text = read_text(path).strip()
    if not text:
        return None
    try:
        record = json.loads(text.splitlines()[-1])
    except json.JSONDecodeError:
        return None
    tokens, flops = record.get("tokens_per_s"), record.get("flops_per_token")
    if isinstance(tokens, (int, float)) and isinstance(flops, (int, float)):
        record["model_tflops_per_s"] = round(tokens * flops / 1e12, 2)
    return record


def stage_note(stage, tests, sanitizer, benches):
    """What the table says beside a stage, beyond its own note."""
    name = stage["name"]
    if name == "ctest-gpu" and tests:
        return f"{tests['passed']} passed, {tests['failed']} failed of {tests['total']}"
    errors = sanitizer.get("errors") if sanitizer else None
    if name == "sanitizer" and stage["status"] in ("ok", "failed") and errors is not None:
        return f"{errors} errors"
    if name == "bench-attention" and benches.get(name):
        # Per window: each implementation's forward + backward ms (nanoforge bench attention).
        parts = []
        for r in benches[name].get("results", []):
            parts.append(f"{r.get('implementation')} w{r.get('window')} "
                         f"{r.get('forward_ms', 0):.2f}+{r.get('backward_ms', 0):.2f} ms")
        return "; ".join(parts) or stage["note"]
    if name.startswith("bench-") and benches.get(name):
        b = benches[name]
        mfu = b.get("mfu_percent")
        peak = b.get("peak_device_bytes")
        parts = [f"{b.get('tokens_per_s', 0):,.0f} tok/s", f"{b.get('step_ms_median', 0):.1f} ms/step"]
        if mfu is not None:
            parts.append(f"MFU {mfu:.1f}%")
        if isinstance(peak, (int, float)):
            parts.append(f"peak {peak / 2**30:.1f} GiB")
        return ", ".join(parts)
    return stage["note"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--ctest-log")
    parser.add_argument("--sanitizer-log")
    parser.add_argument("--bench", action="append", default=[], help="NAME=FILE (a stage name such as bench-d20)")
    args = parser.parse_args()

    facts = {row["key"]: number(row["value"]) for row in read_tsv(os.path.join(args.state, "facts.tsv"),
                                                                  ["key", "value"])}
    gpu_rows = read_tsv(os.path.join(args.state, "gpu.tsv"), ["key", "value"])
    gpu = {row["key"]: number(row["value"]) for row in gpu_rows} or None
    stages = [dict(row, seconds=number(row["seconds"]))
              for row in read_tsv(os.path.join(args.state, "stages.tsv"), ["name", "status", "seconds", "note"])]
    status_of = {s["name"]: s["status"] for s in stages}

    tests = ctest_counts(read_text(args.ctest_log)) if "ctest-gpu" in status_of else None
    sanitizer = None
    if "sanitizer" in status_of:
        sanitizer = {"status": status_of["sanitizer"], "errors": sanitizer_errors(read_text(args.sanitizer_log))}
    benches = {}
    for item in args.bench:
        name, _, path = item.partition("=")
        benches[name] = bench_record(path)

    failed = [s["name"] for s in stages if s["status"] in ("failed", "timeout")]
    summary = {
        "schema": "nanoforge-gpu-check/1",
        "ok": not failed,
        "failed_stages": failed,
        "machine": facts,
        "gpu": gpu,
        "stages": stages,
        "tests": tests,
        "sanitizer": sanitizer,
        "bench": benches,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")

    if gpu:
        print(f"gpu-check: {gpu.get('name')} (compute capability {gpu.get('compute_cap')}), "
              f"driver {gpu.get('driver')}, nvcc {facts.get('nvcc', '?')}, deps: {facts.get('deps_mode', '?')}")
    else:
        print(f"gpu-check: no GPU found; nvcc {facts.get('nvcc', '?')}, deps: {facts.get('deps_mode', '?')}")
    print(f"{'stage':<15} {'status':<11} {'seconds':>7}  note")
    for stage in stages:
        note = stage_note(stage, tests, sanitizer, benches)
        print(f"{stage['name']:<15} {stage['status']:<11} {stage['seconds']:>7}  {note}")
    print(f"summary: {args.out} ({'ok' if not failed else 'FAILED: ' + ', '.join(failed)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
