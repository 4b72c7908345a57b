#!/usr/bin/env bash
# Runs one libFuzzer target from its committed seed corpus (docs/fuzzing.md): for FUZZ_SECONDS (default 30)
# as `make fuzz` does, or, with FUZZ_RUNS set, for exactly that many inputs from the seeds alone and the
# fixed random seed FUZZ_SEED (default 1), as CI's `make fuzz-ci` does: a stage whose work does not depend
# on the machine's speed or on earlier runs.
# New inputs go to WORK_DIR/corpus (a fixed run's to a scratch folder it removes; the seed folder is only
# read), crash, timeout and out-of-memory
# reproducers to WORK_DIR/artifacts/. Ends with a line "fuzz-run: NAME user U s, system S s, wall W s"
# (tools/dev/fuzz_summary.py adds them up). Exits non-zero when the target found something.
#   run_fuzz_target.sh FUZZER SEED_CORPUS WORK_DIR [extra libFuzzer flags...]
# The body is one function, read whole before it runs: editing this file cannot disturb a run.
main() {
  set -uo pipefail
  fuzzer=$1 seeds=$2 work=$3
  shift 3
  corpus=$work/corpus
  if [[ -n ${FUZZ_RUNS:-} ]]; then
    # A fixed run starts from the seeds alone: what earlier runs added would change the inputs tried.
    budget=(-runs="$FUZZ_RUNS" -seed="${FUZZ_SEED:-1}")
    corpus=$work/corpus-$$
    trap 'rm -rf "$corpus"' EXIT
  else
    budget=(-max_total_time="${FUZZ_SECONDS:-30}")
  fi
  mkdir -p "$corpus" "$work/artifacts"
  # -timeout: an input running longer than FUZZ_TIMEOUT (10) s of wall time is a hang. -rss_limit_mb: a process past 2 GiB is an
  # out-of-memory finding (a file must not make nanoforge allocate what it claims before checking it).
  # max_allocation_size_mb + allocator_may_return_null: a C malloc over 2 GiB returns NULL, as it would on a
  # machine without overcommit (libhdf5 asks for sizes a damaged file claims, handles the NULL, and would
  # otherwise spend the timeout on ASan's bookkeeping of a 12 GB block it never touches), while a C++ new over
  # 2 GiB is still reported: a finding in our code. libFuzzer's own malloc limit is lifted for the same reason.
  export ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=2048${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export LSAN_OPTIONS="suppressions=$(dirname "$0")/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  TIMEFORMAT="fuzz-run: ${fuzzer##*/} user %3U s, system %3S s, wall %3R s"
  status=0
  time "$fuzzer" "${budget[@]}" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -malloc_limit_mb=1048576 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$@" "$corpus" "$seeds" || status=$?
  exit "$status"
}
main "$@"
exit
