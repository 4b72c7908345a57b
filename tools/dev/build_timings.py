#!/usr/bin/env python3
"""Where a build tree's time went: compile CPU time per target (from ninja's log) and the slowest tests (from
CTest's record of the last run), as the Markdown tables of docs/build.md.

    python3 tools/dev/build_timings.py [--targets N] [--tests N] BUILD_DIR [BUILD_DIR ...]

ninja's .ninja_log holds each output's start and end in milliseconds; an output's time is one job's wall time,
which on a machine running as many jobs as cores is that job's CPU time. CTest keeps each test's time of its
last run in Testing/Temporary/CTestCostData.txt. Run it after a build and a `ctest` of a fresh tree: an
incremental build logs only what it rebuilt. Standard library only.
"""
import argparse
import collections
import os
import re
import sys


def ninja_outputs(build_dir):
    """(seconds, output) of every output in the newest build recorded by .ninja_log."""
    path = os.path.join(build_dir, ".ninja_log")
    latest = {}
    with open(path, encoding="utf-8") as log:
        for line in log:
            if line.startswith("#"):
                continue
            start, end, _, output, _ = line.rstrip("\n").split("\t")
            latest[output] = (int(end) - int(start)) / 1000.0
    return [(seconds, output) for output, seconds in latest.items()]


TARGET = re.compile(r"CMakeFiles/([^/]+)\.dir/")
# GoogleTest's note of a parameterised test's value inside its CTest name (a TEST_SUFFIX follows it).
PARAMETER_NOTE = re.compile(r"  # GetParam\(\) = .*[)>](\.\w+)?$")


def target_of(output):
    """The CMake target an output belongs to: its object folder, or the program or library it is."""
    match = TARGET.search(output)
    if match:
        return match.group(1)
    return "link: " + os.path.basename(output)


def target_table(build_dir, rows):
    per_target = collections.defaultdict(lambda: [0.0, 0])
    outputs = ninja_outputs(build_dir)
    for seconds, output in outputs:
        entry = per_target[target_of(output)]
        entry[0] += seconds
        entry[1] += 1
    total = sum(seconds for seconds, _ in outputs)
    lines = [f"{build_dir}: {len(outputs)} outputs, {total / 60:.1f} CPU-minutes", "",
             "| target | outputs | CPU s | share |", "|---|---:|---:|---:|"]
    for name, (seconds, count) in sorted(per_target.items(), key=lambda item: -item[1][0])[:rows]:
        lines.append(f"| `{name}` | {count} | {seconds:.0f} | {100 * seconds / total:.1f} % |")
    lines += ["", "| slowest outputs | CPU s |", "|---|---:|"]
    for seconds, output in sorted(outputs, reverse=True)[:rows]:
        lines.append(f"| `{output}` | {seconds:.1f} |")
    return lines


def test_table(build_dir, rows):
    path = os.path.join(build_dir, "Testing", "Temporary", "CTestCostData.txt")
    if not os.path.exists(path):
        return [f"{build_dir}: no CTest record (run ctest there first)"]
    tests = []
    with open(path, encoding="utf-8") as record:
        for line in record:
            if line.startswith("---"):  # the failed tests' list follows
                break
            fields = line.rsplit(maxsplit=2)  # a parameterised test's name holds spaces
            if len(fields) == 3:
                tests.append((float(fields[2]), PARAMETER_NOTE.sub(r"\1", fields[0])))
    total = sum(seconds for seconds, _ in tests)
    lines = [f"{build_dir}: {len(tests)} tests, {total:.0f} s of test time", "",
             "| test | s |", "|---|---:|"]
    for seconds, name in sorted(tests, reverse=True)[:rows]:
        lines.append(f"| `{name}` | {seconds:.1f} |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=15, help="rows of the compile tables")
    parser.add_argument("--tests", type=int, default=30, help="rows of the test table")
    parser.add_argument("build_dirs", nargs="+")
    arguments = parser.parse_args()
    for build_dir in arguments.build_dirs:
        if not os.path.exists(os.path.join(build_dir, ".ninja_log")):
            print(f"{build_dir}: no .ninja_log (not a ninja build tree)", file=sys.stderr)
            return 1
        print("\n".join(target_table(build_dir, arguments.targets)))
        print()
        print("\n".join(test_table(build_dir, arguments.tests)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
