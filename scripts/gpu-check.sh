#!/usr/bin/env bash
# The one prepared command for a machine with a GPU (a borrowed H200 without our libraries, no apt and no
# network; a DGX Spark; your own box): it says what the machine has, builds nanoforge for that GPU alone and
# checks it (the `gpu` tests, compute-sanitizer over one tiny step, `bench step` at d20 and d12, in FP8 and on
# our MLP GEMM, cuDNN attention against flash), each stage within one time budget. Where the machine lacks our
# libraries it uses the Debian packages of scripts/gpu-deps-bundle.sh, unpacked into a private prefix. Logs and
# gpu-check.json go to $OUT (else the build folder); exit status 0 when every stage that ran passed.
# Usage, knobs, stages and outputs: docs/build.md, "GPU check".
set -euo pipefail
shopt -s inherit_errexit nullglob

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${GPU_CHECK_BUILD_DIR:-$repo_root/build-gpucheck}
out_dir=${OUT:-$build_dir}
bundle_dir=$repo_root/.gpu-deps
deps_prefix=${GPU_CHECK_DEPS_PREFIX:-/tmp/nanoforge-deps}
deps_choice=${GPU_CHECK_DEPS:-auto}  # auto | system | bundle
budget_s=${GPU_CHECK_BUDGET_S:-450}
reserve_s=15    # kept back for the summary
min_stage_s=10  # a stage with less time left than this is skipped
started_s=$(date +%s)
deadline_s=$((started_s + budget_s))

state_dir=""
machine_log=$out_dir/machine.txt
build_log=$out_dir/build.log
ctest_log=$out_dir/ctest.log
sanitizer_log=$out_dir/sanitizer.log
bench_log=$out_dir/bench.log
summary_json=$out_dir/gpu-check.json

# What the checks found, filled in as they run.
gpu_arch=""       # e.g. 90 (H200) or 121 (DGX Spark); empty without a GPU
nvcc=""
nccl_library=""
nccl_include=""
cudnn_library=""
cudnn_include=""
cudnn_frontend_include=""
sanitizer=""
deps_mode=""      # system | bundle | missing
multiarch=""
missing_libraries=()
cmake_args=()

say() { echo "gpu-check: $*"; }

pkg_config_works() { pkg-config --version >/dev/null 2>&1; }

fact() { printf '%s\t%s\n' "$1" "$2" >>"$state_dir/facts.tsv"; }

record_stage() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$state_dir/stages.tsv"; }

# Rewrites the last recorded stage's status and note (its time kept).
amend_last_stage() {
  local stages=$state_dir/stages.tsv name seconds
  IFS=$'\t' read -r name _ seconds _ < <(tail -n 1 "$stages")
  sed -i '$d' "$stages"
  record_stage "$name" "$1" "$seconds" "$2"
}

stage_status() { awk -F'\t' -v name="$1" '$1 == name {status = $2} END {print status}' "$state_dir/stages.tsv"; }

first_line() { "$@" 2>/dev/null | grep -m1 . || true; }

# What the machine has, and its dependencies as installed or from the bundle: parts of this script, sharing
# its variables and helpers above.
# shellcheck source=scripts/gpu-check/machine.sh
source "$repo_root/scripts/gpu-check/machine.sh"
# shellcheck source=scripts/gpu-check/dependencies.sh
source "$repo_root/scripts/gpu-check/dependencies.sh"

# ---- stages ----

# run_stage NAME CAP_S LOG COMMAND...: runs COMMAND with at most CAP_S seconds (less if the budget is nearly
# spent), appending its output to LOG, and records ok / failed / timeout / skipped. Returns its exit status.
run_stage() {
  local name=$1 cap=$2 log=$3 left limit start offset rc=0 status note=""
  shift 3
  left=$((deadline_s - $(date +%s) - reserve_s))
  limit=$((cap < left ? cap : left))
  if ((limit < min_stage_s)); then
    skip_stage "$name" "out of time (GPU_CHECK_BUDGET_S=$budget_s)"
    return 1
  fi
  say "$name: running (limit ${limit} s)"
  offset=$(($(stat -c %s "$log" 2>/dev/null || echo 0) + 1))
  echo "==== $name: $* (limit ${limit} s)" >>"$log"
  start=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1 || rc=$?
  case $rc in
    0) status=ok ;;
    124 | 137) status=timeout note="stopped after ${limit} s" ;;
    *) status=failed note="exit status $rc" ;;
  esac
  record_stage "$name" "$status" "$(($(date +%s) - start))" "$note"
  say "$name: $status${note:+ ($note)}; log: $log"
  if [[ $status != ok ]]; then
    tail -c +"$offset" "$log" | tail -n 25 | sed 's/^/    /'
  fi
  return "$rc"
}

skip_stage() {
  record_stage "$1" skipped 0 "$2"
  say "$1: skipped ($2)"
}

configure_stage() {
  local cuda_mode=AUTO architectures=${GPU_CHECK_CUDA_ARCHITECTURES:-90}
  local extra=()
  if [[ -n $gpu_arch ]]; then
    cuda_mode=ON
    architectures=$gpu_arch
  fi
  [[ -z $nvcc ]] || cmake_args+=("-DCMAKE_CUDA_COMPILER=$nvcc")
  [[ -z $nccl_library ]] || cmake_args+=("-DNANOFORGE_NCCL_LIBRARY=$nccl_library")
  [[ -z $nccl_include ]] || cmake_args+=("-DNANOFORGE_NCCL_INCLUDE_DIR=$nccl_include")
  [[ -z $cudnn_library ]] || cmake_args+=("-DNANOFORGE_CUDNN_LIBRARY=$cudnn_library")
  [[ -z $cudnn_include ]] || cmake_args+=("-DNANOFORGE_CUDNN_INCLUDE_DIR=$cudnn_include")
  [[ -z $cudnn_frontend_include ]] || cmake_args+=("-DNANOFORGE_CUDNN_FRONTEND_INCLUDE_DIR=$cudnn_frontend_include")
  read -r -a extra <<<"${GPU_CHECK_CMAKE_ARGS:-}"
  # CMake 4 refuses config files that declare compatibility with CMake < 3.5; older CMake ignores this.
  run_stage configure 120 "$build_log" env CMAKE_POLICY_VERSION_MINIMUM=3.5 \
    cmake --fresh -S "$repo_root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DNANOFORGE_CUDA=$cuda_mode" -DNANOFORGE_CUDA_EMULATION=OFF "-DCMAKE_CUDA_ARCHITECTURES=$architectures" \
    "${cmake_args[@]}" "${extra[@]}"
}

# The executables of the tests labelled gpu (gtest_discover_tests writes one include file per executable).
gpu_test_targets() {
  local file
  for file in "$build_dir"/tests/*/*_include.cmake; do
    grep -q 'TEST_PROPERTIES \[==\[LABELS;\([^]]*;\)\?gpu[];]' "$file" || continue
    sed -n 's/.*TEST_EXECUTABLE \[==\[\(.*\)\]==\].*/\1/p' "$file" | xargs -r basename
  done | sort -u
}

build_stage() {
  local targets=()
  if [[ -z ${GPU_CHECK_BUILD_ALL:-} ]]; then
    mapfile -t targets < <(gpu_test_targets)
    ((${#targets[@]} == 0)) || targets=(--target nanoforge "${targets[@]}")
  fi
  echo "==== targets: ${targets[*]:-all}" >>"$build_log"
  run_stage build 330 "$build_log" cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}" -- -k 0 || true
  check_linked_libraries
}

# Every library the program loads must resolve (a bundle build: into the prefix); says which did not.
check_linked_libraries() {
  local program=$build_dir/bin/nanoforge unresolved
  [[ -x $program ]] || return 0
  { echo "==== ldd $program"; ldd "$program"; } >>"$build_log" 2>&1 || true
  unresolved=$(ldd "$program" 2>/dev/null | grep -c 'not found' || true)
  fact unresolved_libraries "$unresolved"
  if ((unresolved > 0)); then
    say "nanoforge cannot load $unresolved libraries:"
    ldd "$program" | grep 'not found' | sed 's/^/    /'
  fi
}

ctest_stage() {
  run_stage ctest-gpu 150 "$ctest_log" \
    ctest --test-dir "$build_dir" -L gpu --output-on-failure --no-tests=error --timeout 120 \
    -j "${GPU_CHECK_CTEST_JOBS:-4}" || true
}

tiny_step_args=(bench step --device cuda --depth 2 --seq 128 --batch 2 --vocab 512 --steps 1 --warmup 0)

sanitizer_stage() {
  if [[ -z $sanitizer ]]; then
    skip_stage sanitizer "compute-sanitizer not found"
    return 0
  fi
  run_stage sanitizer 150 "$sanitizer_log" "$sanitizer" --tool memcheck --error-exitcode 1 --print-limit 20 \
    "$build_dir/bin/nanoforge" "${tiny_step_args[@]}" || true
  if [[ $(stage_status sanitizer) == failed ]] && grep -q 'Device not supported' "$sanitizer_log"; then
    say "sanitizer: compute-sanitizer does not support this device here (gVisor?); not counted as a failure"
    amend_last_stage unsupported "compute-sanitizer: device not supported"
  fi
}

# bench_stage NAME CAP_S ARGS...: one `bench step --device cuda` run, its JSON record in the build folder.
bench_stage() {
  local name=$1 cap=$2
  shift 2
  rm -f "$build_dir/$name.json"
  run_stage "$name" "$cap" "$bench_log" "$build_dir/bin/nanoforge" bench step --device cuda "$@" \
    --json-out "$build_dir/$name.json" || true
}

# cuDNN against flash on one d20 layer's attention (both windows), where configure built cuDNN attention.
bench_attention_stage() {
  if ! grep -q 'nanoforge cuDNN attention: ON' "$build_log"; then
    skip_stage bench-attention "no cuDNN attention in this build ($(grep -o 'nanoforge cuDNN attention: OFF.*' \
      "$build_log" | tail -1 | sed 's/nanoforge cuDNN attention: OFF //'))"
    return 0
  fi
  rm -f "$build_dir/bench-attention.json"
  run_stage bench-attention 60 "$bench_log" "$build_dir/bin/nanoforge" bench attention --device cuda \
    --attention both --depth 20 --seq 2048 --batch 32 --steps 5 --warmup 1 \
    --json-out "$build_dir/bench-attention.json" || true
}

# The stages gpu_stages runs, in order (skipped by name when they cannot run).
gpu_stage_names=(build ctest-gpu sanitizer bench-d20 bench-d12 bench-attention bench-d20-fused bench-d20-fp8
  bench-d20-fp8-fused)

gpu_stages() {
  if [[ -z $gpu_arch ]]; then
    local stage
    for stage in "${gpu_stage_names[@]}"; do
      skip_stage "$stage" "no GPU on this machine"
    done
    return 0
  fi
  build_stage
  if [[ ! -x $build_dir/bin/nanoforge ]]; then
    local stage
    for stage in "${gpu_stage_names[@]:1}"; do
      skip_stage "$stage" "nanoforge was not built"
    done
    return 0
  fi
  ctest_stage
  sanitizer_stage
  bench_stage bench-d20 150 --depth 20 --seq 2048 --batch 32 --vocab 32768 --steps 3 --warmup 1 --profile
  bench_stage bench-d12 90 --depth 12 --seq 2048 --batch 32 --vocab 32768 --steps 5 --warmup 1
  bench_attention_stage
  # Our fused MLP GEMM against cuBLASLt and the ReLU² pass (bench-d20's choice on an H100/H200): the
  # profile's linear_relu_squared_* rows against its matmul and relu_squared_* rows (docs/kernels.md).
  bench_stage bench-d20-fused 90 --depth 20 --seq 2048 --batch 32 --vocab 32768 --steps 2 --warmup 1 --profile \
    --mlp-gemm fused
  # FP8 (model.fp8): the same d20 step with every eligible Linear in FP8, profiled (fp8_matmul and
  # fp8_quantize rows against bench-d20's matmul rows; docs/fp8.md's predicted +28 % on one H200).
  bench_stage bench-d20-fp8 90 --depth 20 --seq 2048 --batch 32 --vocab 32768 --steps 2 --warmup 1 --profile --fp8
  # FP8 on our fused MLP GEMM (mma.sync m16n8k32, the GB10's choice): its fp8_linear_relu_squared_forward and
  # fp8_relu_squared_linear_backward rows against bench-d20-fp8's fp8_matmul and relu_squared_* rows.
  bench_stage bench-d20-fp8-fused 90 --depth 20 --seq 2048 --batch 32 --vocab 32768 --steps 2 --warmup 1 \
    --profile --fp8 --mlp-gemm fused
}

# ---- summary ----

# Keeps each log small enough to collect (16 MiB a file at most): the last 4 MiB.
trim_logs() {
  local log
  for log in "$machine_log" "$build_log" "$ctest_log" "$sanitizer_log" "$bench_log"; do
    [[ -f $log ]] || continue
    if (($(stat -c %s "$log") > 4 * 1024 * 1024)); then
      tail -c $((4 * 1024 * 1024)) "$log" >"$log.tail" && mv "$log.tail" "$log"
    fi
  done
}

write_summary() {
  fact seconds "$(($(date +%s) - started_s))"
  trim_logs
  if ! command -v python3 >/dev/null; then
    say "python3 is missing: no JSON summary; stages:"
    column -t -s $'\t' "$state_dir/stages.tsv" || cat "$state_dir/stages.tsv"
    return 0
  fi
  python3 "$repo_root/tools/dev/gpu_check_summary.py" --state "$state_dir" --out "$summary_json" \
    --ctest-log "$ctest_log" --sanitizer-log "$sanitizer_log" \
    --bench "bench-d20=$build_dir/bench-d20.json" --bench "bench-d12=$build_dir/bench-d12.json" \
    --bench "bench-attention=$build_dir/bench-attention.json" \
    --bench "bench-d20-fused=$build_dir/bench-d20-fused.json" \
    --bench "bench-d20-fp8=$build_dir/bench-d20-fp8.json" \
    --bench "bench-d20-fp8-fused=$build_dir/bench-d20-fp8-fused.json"
}

main() {
  mkdir -p "$build_dir" "$out_dir"
  rm -f "$machine_log" "$build_log" "$ctest_log" "$sanitizer_log" "$bench_log" "$summary_json"
  state_dir=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
  trap 'rm -rf "$state_dir"' EXIT
  : >"$state_dir/stages.tsv"

  describe_machine
  detect_gpu
  find_nvcc
  find_nccl
  find_cudnn
  find_tools
  check_libraries
  choose_dependencies

  configure_stage || true
  if [[ $(stage_status configure) == ok ]]; then
    gpu_stages
  else
    local stage
    for stage in "${gpu_stage_names[@]}"; do
      skip_stage "$stage" "configure failed"
    done
  fi

  write_summary || say "writing the summary failed"
  ! grep -q -E $'\t(failed|timeout)\t' "$state_dir/stages.tsv"
}

main "$@"
