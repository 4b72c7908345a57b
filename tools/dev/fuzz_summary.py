#!/usr/bin/env python3
"""The fuzzing table: per target, CPU time fuzzed, executions, coverage, corpus, and what was found and fixed.

Reads LOG_DIR/NAME.log as tests/fuzz/run_fuzz_target.sh and tools/dev/fuzz_campaign.sh write them (libFuzzer's
output with -print_final_stats=1, then a "fuzz-run: ... user U s, system S s, wall W s" line per run) and the
reproducers under LOG_DIR/work/NAME/artifacts/. A finding is a reproducer a log names ("Test unit written to",
which tools/dev/fuzz_record.py keeps) or one on disk, so a record without its reproducers still counts them. With
--build FUZZ_BUILD_DIR, each reproducer on disk is run once by the current build of its target: one that no
longer fails counts as fixed ("F of K kept" where only K of the findings are on disk). Prints a Markdown table.

    python3 tools/dev/fuzz_summary.py LOG_DIR [--build build-fuzz]
"""
import argparse
import os
import re
import subprocess
import sys

RUN = re.compile(r"^fuzz-run: \S+ user ([\d.]+) s, system ([\d.]+) s, wall ([\d.]+) s", re.MULTILINE)
EXECUTED = re.compile(r"^stat::number_of_executed_units: (\d+)", re.MULTILINE)
STATUS = re.compile(r"^#\d+\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/", re.MULTILINE)
WRITTEN = re.compile(r"Test unit written to (\S+)")
FINDING_PREFIXES = ("crash-", "timeout-", "oom-", "leak-")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kept_reproducers(log_dir, name):
    directory = os.path.join(log_dir, "work", name, "artifacts")
    if not os.path.isdir(directory):
        return []
    return sorted(os.path.join(directory, f) for f in os.listdir(directory) if f.startswith(FINDING_PREFIXES))


def logged_findings(text):
    """Reproducer file names the log says were written (a run may also write slow units, not findings)."""
    return {os.path.basename(path) for path in WRITTEN.findall(text)
            if os.path.basename(path).startswith(FINDING_PREFIXES)}


def still_fails(build_dir, name, reproducer):
    fuzzer = os.path.join(build_dir, "fuzz", "fuzz_" + name)
    env = dict(os.environ, ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=2048",
               LSAN_OPTIONS="suppressions=" + os.path.join(REPO, "tests/fuzz/lsan.supp"))  # as run_fuzz_target.sh
    result = subprocess.run([fuzzer, "-runs=1", "-timeout=10", "-rss_limit_mb=2048", "-malloc_limit_mb=1048576",
                             reproducer], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            check=False)
    return result.returncode != 0


def summarise(log_dir, name, build_dir):
    with open(os.path.join(log_dir, name + ".log"), encoding="utf-8", errors="replace") as f:
        text = f.read()
    runs = RUN.findall(text)
    statuses = STATUS.findall(text)
    kept = kept_reproducers(log_dir, name)
    found = logged_findings(text) | {os.path.basename(path) for path in kept}
    fixed = None
    if build_dir is not None:
        fixed = sum(1 for reproducer in kept if not still_fails(build_dir, name, reproducer))
    return {
        "name": name,
        "runs": len(runs),
        "cpu_seconds": sum(float(user) + float(system) for user, system, _ in runs),
        "executions": sum(int(n) for n in EXECUTED.findall(text)),
        "cov": max((int(c) for c, _, _ in statuses), default=0),
        "ft": max((int(f) for _, f, _ in statuses), default=0),
        "corpus": int(statuses[-1][2]) if statuses else 0,
        "found": len(found),
        "kept": len(kept),
        "fixed": fixed,
    }


def fixed_cell(fixed, found, kept):
    if fixed is None:
        return "—"
    return str(fixed) if kept == found else f"{fixed} of {kept} kept"


def hours_minutes(seconds):
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir")
    parser.add_argument("--build", help="fuzz build tree: re-run each reproducer to see whether it is fixed")
    args = parser.parse_args()
    names = sorted(f[:-4] for f in os.listdir(args.log_dir) if f.endswith(".log"))
    if not names:
        sys.exit(f"{args.log_dir}: no NAME.log files")
    rows = [summarise(args.log_dir, name, args.build) for name in names]
    print("| target | runs | CPU time | executions | exec/s (CPU) | cov | ft | corpus | found | fixed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        rate = r["executions"] / r["cpu_seconds"] if r["cpu_seconds"] else 0
        fixed = fixed_cell(r["fixed"], r["found"], r["kept"])
        print(f"| {r['name']} | {r['runs']} | {hours_minutes(r['cpu_seconds'])} | {r['executions']:,} | "
              f"{rate:,.0f} | {r['cov']} | {r['ft']} | {r['corpus']} | {r['found']} | {fixed} |")
    total_cpu = sum(r["cpu_seconds"] for r in rows)
    total_exec = sum(r["executions"] for r in rows)
    total_fixed = None if args.build is None else sum(r["fixed"] for r in rows)
    total_found = sum(r["found"] for r in rows)
    print(f"| all | {sum(r['runs'] for r in rows)} | {hours_minutes(total_cpu)} | {total_exec:,} | | | | | "
          f"{total_found} | {fixed_cell(total_fixed, total_found, sum(r['kept'] for r in rows))} |")


if __name__ == "__main__":
    main()
