#!/usr/bin/env bash
# The whole fuzzing campaign, one fuzzer at a time (a shared machine): each turn runs one round
# (tools/dev/fuzz_campaign.sh, ROUND_SECONDS of wall time, 600 by default; a target's last round only what it
# still needs) of the target with the least CPU time fuzzed so far, counting every round already in LOG_DIR,
# until each has CPU_SECONDS. A target whose round found something is set aside (a line in
# LOG_DIR/queue-findings.txt) until the fix: delete its line to queue it again.
# Progress: python3 tools/dev/fuzz_summary.py LOG_DIR; the round running is the newest LOG_DIR/NAME.log; the
# queue's own lines go to standard output (keep them out of LOG_DIR/*.log, which the summary reads).
#   nice -n 19 tools/dev/fuzz_queue.sh FUZZ_BUILD_DIR CPU_SECONDS LOG_DIR [NAME...] >LOG_DIR/queue.txt
# (default: every target built).
# The body is one function, read whole before it runs: editing this file cannot disturb a run.
main() {
  set -uo pipefail
  build=$1 goal=$2 logs=$3
  shift 3
  repo=$(cd "$(dirname "$0")/../.." && pwd)
  round=${ROUND_SECONDS:-600}
  names=("$@")
  if (( ${#names[@]} == 0 )); then
    for fuzzer in "$build"/fuzz/fuzz_*; do names+=("${fuzzer##*/fuzz_}"); done
  fi
  mkdir -p "$logs"
  touch "$logs/queue-findings.txt"
  cpu_of() {
    awk '/^fuzz-run: /{total += $4 + $7} END {printf "%d", total}' "$logs/$1.log" 2>/dev/null || echo 0
  }
  while true; do
    next="" least=""
    for name in "${names[@]}"; do
      grep -q "^$name:" "$logs/queue-findings.txt" && continue
      cpu=$(cpu_of "$name")
      (( cpu >= goal )) && continue
      if [[ -z $least ]] || (( cpu < least )); then next=$name least=$cpu; fi
    done
    if [[ -z $next ]]; then
      echo "fuzz-queue: every target has $goal CPU seconds or is set aside ($(date -u +%FT%TZ))"
      return 0
    fi
    # A target's last round runs only as long as it still needs (a fuzzer on a free core uses about all of
    # its wall time: 98 % measured), not a whole ROUND_SECONDS; a shorter round on a busy machine just
    # leaves one more. 60 s at least, so libFuzzer's start-up (reading the corpus) stays a small part.
    needed=$((goal - least + 30))
    seconds=$(( needed < round ? (needed > 60 ? needed : 60) : round ))
    echo "fuzz-queue: $next ($least CPU seconds so far, a round of $seconds s) at $(date -u +%FT%TZ)"
    if ! ROUND_SECONDS=$seconds "$repo/tools/dev/fuzz_campaign.sh" "$build" "$next" $((least + 1)) "$logs"; then
      echo "$next: stopped with a finding" >>"$logs/queue-findings.txt"
    fi
  done
}
main "$@"
exit
