#!/usr/bin/env bash
# A long fuzzing run of one target, measured in CPU time rather than wall time (a niced fuzzer on a busy
# machine gets a fraction of a core): rounds of tests/fuzz/run_fuzz_target.sh, ROUND_SECONDS (600) of wall
# time each, appended to LOG_DIR/NAME.log, until the rounds' CPU time adds up to CPU_SECONDS or a round
# finds something. The corpus grows in LOG_DIR/work/NAME/corpus from round to round; reproducers land in
# LOG_DIR/work/NAME/artifacts/; a round that fails without one (a fuzzer being rebuilt) is retried.
# tools/dev/fuzz_summary.py LOG_DIR makes the table.
#   tools/dev/fuzz_campaign.sh FUZZ_BUILD_DIR NAME CPU_SECONDS LOG_DIR
# The body is one function, read whole before it runs: editing this file cannot disturb a run.
main() {
  set -euo pipefail
  build=$1 name=$2 cpu_target=$3 logs=$4
  repo=$(cd "$(dirname "$0")/../.." && pwd)
  round=${ROUND_SECONDS:-600}
  # A niced fuzzer on a busy machine can wait seconds for a core, and libFuzzer's timeout is wall time: 10 s
  # turned builds running beside a campaign into "hangs" that ran in milliseconds alone. A real hang still
  # shows at 120 s.
  export FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-120}
  log="$logs/$name.log"
  mkdir -p "$logs"
  cpu_done() {  # CPU seconds of the rounds logged so far
    awk '/^fuzz-run: /{total += $4 + $7} END {printf "%d", total}' "$log" 2>/dev/null \
      || echo 0
  }
  dict=()  # the target's libFuzzer dictionary, as CTest passes it
  [[ -f "$repo/tests/fuzz/dict/$name.dict" ]] && dict=("-dict=$repo/tests/fuzz/dict/$name.dict")
  findings() { ls "$logs/work/$name/artifacts" 2>/dev/null | grep -cE '^(crash|timeout|oom|leak)-' || true; }
  while (( $(cpu_done) < cpu_target )); do
    echo "fuzz-campaign: $name round at $(date -u +%FT%TZ), $(cpu_done) of $cpu_target CPU seconds done" >>"$log"
    before=$(findings)
    if ! FUZZ_SECONDS=$round "$repo/tests/fuzz/run_fuzz_target.sh" "$build/fuzz/fuzz_$name" \
        "$repo/tests/fuzz/corpus/$name" "$logs/work/$name" "${dict[@]}" >>"$log" 2>&1; then
      if (( $(findings) > before )); then
        echo "fuzz-campaign: $name stopped: the round found something (see $logs/work/$name/artifacts)" >>"$log"
        exit 1
      fi
      # No reproducer: the round did not run (the fuzzer being rebuilt, say); try again in a minute.
      echo "fuzz-campaign: $name round failed without a finding; retrying" >>"$log"
      sleep 60
    fi
  done
  echo "fuzz-campaign: $name done: $(cpu_done) CPU seconds" >>"$log"
}
main "$@"
exit
