#!/usr/bin/env python3
"""Keeps a fuzzing campaign's figures in the repository, so that the CPU time fuzzed outlives the machine.

A campaign (tools/dev/fuzz_queue.sh, tools/dev/fuzz_campaign.sh) runs for many hours spread over machines that do not
keep their files; its logs are megabytes of libFuzzer's progress lines. This writes, for each LOG_DIR/NAME.log,
RECORD_DIR/NAME.log with only the lines the campaign's tools read: each round's header, libFuzzer's last status
line (coverage, corpus) and final statistics (executions), the "fuzz-run:" CPU-time line, and what a finding
printed (its sanitizer summary, where its reproducer was written). tools/dev/fuzz_summary.py and
tools/dev/fuzz_queue.sh read a record as they read a log, so a campaign continues on a new machine from a copy:

    cp tests/fuzz/campaign/*.log LOG_DIR/          # before starting the queues: earlier rounds count
    python3 tools/dev/fuzz_record.py LOG_DIR tests/fuzz/campaign   # after: the record gains the new rounds

A log that started from a record keeps the record's lines unchanged, so writing its record again only adds.
"""
import argparse
import os
import re
import sys

KEPT = re.compile(r"^(fuzz-campaign: |fuzz-run: |stat::|SUMMARY: |Test unit written to |artifact_prefix=)")
STATUS = re.compile(r"^#\d+\s+\w+\s+cov: ")


def condensed(lines):
    """The lines to keep, in order: of the status lines, only the last before each run's end."""
    kept, last_status = [], None
    for line in lines:
        if STATUS.match(line):
            last_status = line
            continue
        if line.startswith(("stat::", "fuzz-run: ")) and last_status is not None:
            kept.append(last_status)  # a run's statistics and CPU-time line follow its last status line
            last_status = None
        if KEPT.match(line):
            kept.append(line)
    if last_status is not None:  # a round still running, or one cut short before its statistics
        kept.append(last_status)
    return kept


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir", help="the campaign's LOG_DIR (NAME.log per target)")
    parser.add_argument("record_dir", help="where the records go (tests/fuzz/campaign)")
    args = parser.parse_args()
    names = sorted(f for f in os.listdir(args.log_dir) if f.endswith(".log"))
    if not names:
        sys.exit(f"{args.log_dir}: no NAME.log files (a LOG_DIR of tools/dev/fuzz_queue.sh or fuzz_campaign.sh)")
    os.makedirs(args.record_dir, exist_ok=True)
    for name in names:
        with open(os.path.join(args.log_dir, name), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        record = os.path.join(args.record_dir, name)
        temporary = record + ".partial"
        with open(temporary, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in condensed(lines))
        os.replace(temporary, record)  # never a half-written record under the final name
        print(f"{record}: {sum(1 for line in lines if line.startswith('fuzz-run: '))} rounds")


if __name__ == "__main__":
    main()
