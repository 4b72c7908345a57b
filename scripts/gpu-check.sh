#!/usr/bin/env bash
# The one prepared command for a machine with a GPU: a borrowed H200 (an image without our libraries, no apt,
# no network), a DGX Spark, or your own box. It says what the machine has, builds nanoforge for that GPU alone,
# and checks it: the `gpu` tests, compute-sanitizer's memcheck over one tiny training step, and `bench step`
# at depth 20 and 12 (and depth 20 again with our fused MLP GEMM, in FP8, and in FP8 on our MLP GEMM). Each stage has a time limit inside one budget (GPU_CHECK_BUDGET_S, default 450 s, to fit
# a 10-minute slot); a failed stage is recorded and the next runs where that makes sense. cuDNN attention is
# built where the machine has cuDNN 9 and the frontend headers travel in .gpu-deps/cudnn-frontend (or python3
# has the nvidia-cudnn-frontend wheel); then its gpu test runs with the others and `bench attention` times it
# against flash on one d20 layer. Without cuDNN the rest builds and runs as before.
#
# Dependencies: where the machine has our libraries (Debian/Ubuntu packages, scripts/install-deps.sh) they are
# used as installed. Where it lacks any, the Debian packages that scripts/gpu-deps-bundle.sh fetched into
# .gpu-deps/debs are unpacked into a private prefix (never into /) and CMake is pointed at it; the binaries get
# that prefix as DT_RPATH, so they load those libraries without an LD_LIBRARY_PATH that would also reach cmake
# or python3. Without a GPU the script configures only, says so, and writes "gpu": null.
#
# Output: machine.txt, build.log, ctest.log, sanitizer.log, bench.log and gpu-check.json in $OUT when it is
# set (a folder collected after the run), else in the build folder; a short table is printed last.
# Exit status: 0 when every stage that ran passed. Usage and knobs: docs/build.md, "GPU check".
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

# ---- what the machine has ----

# Prints one fact per line to the terminal and machine.txt; the key ones also go to the summary.
describe_machine() {
  local os_name glibc runtime
  os_name=$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"')
  glibc=$(first_line ldd --version)
  case $(uname -r) in
    4.4.0) runtime="gVisor (kernel 4.4.0): no compute-sanitizer or ncu counters expected" ;;
    *-fc-*) runtime="Firecracker" ;;
    *) runtime="" ;;
  esac
  fact os "${os_name:-unknown}"
  fact kernel "$(uname -r)"
  fact runtime "$runtime"
  fact arch "$(uname -m)"
  fact glibc "$glibc"
  fact cpus "$(nproc)"
  fact memory_gib "$(awk '/^MemTotal/ {printf "%.0f", $2 / 2^20}' /proc/meminfo)"
  fact cmake "$(first_line cmake --version | awk '{print $3}')"
  fact ninja "$(first_line ninja --version)"
  fact cxx "$(first_line "${CXX:-g++}" --version)"
  fact python3 "$(first_line python3 --version)"
  {
    echo "== os: ${os_name:-unknown}; kernel $(uname -r) $(uname -m) ${runtime:+($runtime)}"
    echo "== glibc: $glibc"
    echo "== cpus: $(nproc); $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2-)"
    grep -E '^(MemTotal|MemAvailable)' /proc/meminfo || true
    echo "== disk: $(df -h "$repo_root" 2>/dev/null | tail -1)"
    echo "== cmake: $(first_line cmake --version); ninja: $(first_line ninja --version)"
    echo "== c++: $(first_line "${CXX:-g++}" --version); multiarch: $(first_line gcc -print-multiarch)"
    echo "== python3: $(first_line python3 --version) at $(command -v python3 || echo none)"
    echo "== nvidia-smi:"
    timeout 20 nvidia-smi 2>&1 || echo "(nvidia-smi failed or is missing)"
  } 2>&1 | tee -a "$machine_log"
}

# The first GPU's name, compute capability, driver and memory; sets gpu_arch (9.0 -> 90).
detect_gpu() {
  local line name compute_cap driver memory
  line=$(timeout 20 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total \
         --format=csv,noheader,nounits 2>/dev/null | head -1) || true
  IFS=',' read -r name compute_cap driver memory <<<"$line"
  compute_cap=${compute_cap// /}
  if [[ -z $line || ! $compute_cap =~ ^[0-9]+\.[0-9]+$ ]]; then
    say "NO GPU FOUND (nvidia-smi: ${line:-no answer}); configuring only, GPU stages skipped" | tee -a "$machine_log"
    return 0
  fi
  gpu_arch=${compute_cap/./}
  printf '%s\t%s\n' name "${name# }" compute_cap "$compute_cap" driver "${driver// /}" \
         memory_mib "${memory// /}" cuda_architectures "$gpu_arch" gpus "$(nvidia-smi -L 2>/dev/null | grep -c GPU)" \
         >"$state_dir/gpu.tsv"
  say "GPU: ${name# } (compute capability $compute_cap -> CMAKE_CUDA_ARCHITECTURES=$gpu_arch)" | tee -a "$machine_log"
}

# nvcc on PATH, else in the usual toolkit folders.
find_nvcc() {
  local candidate
  for candidate in "$(command -v nvcc || true)" /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc \
                   /opt/cuda/bin/nvcc; do
    [[ -n $candidate && -x $candidate ]] && { nvcc=$candidate; break; }
  done
  fact nvcc "$([[ -n $nvcc ]] && "$nvcc" --version | grep -o 'release [0-9.]*' | cut -d' ' -f2 || echo missing)"
  { echo "== nvcc: ${nvcc:-missing}"; [[ -z $nvcc ]] || "$nvcc" --version | tail -2; } | tee -a "$machine_log"
}

# NCCL: in the toolkit (as on our machines), in a system library folder, or in a pip wheel of python3's.
find_nccl() {
  local cuda_root="" dirs=() dir site
  if [[ -n $nvcc ]]; then
    cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
    dirs+=("$cuda_root/lib" "$cuda_root/lib64" "$cuda_root"/targets/*/lib)
  fi
  dirs+=(/usr/lib/"$(uname -m)"-linux-gnu /usr/lib64 /usr/local/lib)
  for site in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    dirs+=("$site"/nvidia/nccl/lib "$site"/nvidia/cu*/lib)
  done
  for dir in "${dirs[@]}"; do
    for nccl_library in "$dir/libnccl.so" "$dir/libnccl.so.2"; do
      [[ -e $nccl_library ]] || continue
      for nccl_include in "$dir/../include" "$cuda_root/include" /usr/include; do
        [[ -e $nccl_include/nccl.h ]] && break
      done
      [[ -e $nccl_include/nccl.h ]] || nccl_include=""
      nccl_include=${nccl_include:+$(readlink -f "$nccl_include")}
      fact nccl "$nccl_library"
      echo "== nccl: $nccl_library (nccl.h in ${nccl_include:-NOT FOUND})" | tee -a "$machine_log"
      return 0
    done
  done
  nccl_library=""
  fact nccl missing
  echo "== nccl: NOT FOUND (the CUDA build of dist/ needs it)" | tee -a "$machine_log"
}

# cuDNN (optional: cuDNN attention): in the toolkit, a system library folder, or python3's nvidia/cudnn wheel;
# its C++ frontend's headers from the bundle (scripts/gpu-deps-bundle.sh) or python3's frontend wheel.
find_cudnn() {
  local cuda_root="" dirs=() dir site candidate
  if [[ -n $nvcc ]]; then
    cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
    dirs+=("$cuda_root/lib" "$cuda_root/lib64" "$cuda_root"/targets/*/lib)
  fi
  dirs+=(/usr/lib/"$(uname -m)"-linux-gnu /usr/lib64 /usr/local/lib)
  for site in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    dirs+=("$site"/nvidia/cudnn/lib)
    [[ -n $cudnn_frontend_include || ! -e $site/include/cudnn_frontend.h ]] || cudnn_frontend_include=$site/include
  done
  [[ ! -e $bundle_dir/cudnn-frontend/include/cudnn_frontend.h ]] ||
    cudnn_frontend_include=$bundle_dir/cudnn-frontend/include
  for dir in "${dirs[@]}"; do
    for candidate in "$dir/libcudnn.so" "$dir/libcudnn.so.9"; do
      [[ -e $candidate ]] || continue
      for cudnn_include in "$dir/../include" "$cuda_root/include" /usr/include /usr/include/"$(uname -m)"-linux-gnu; do
        [[ -e $cudnn_include/cudnn_version.h ]] && break
      done
      [[ -e $cudnn_include/cudnn_version.h ]] || { cudnn_include=""; continue; }
      cudnn_library=$candidate
      cudnn_include=$(readlink -f "$cudnn_include")
      break 2
    done
  done
  fact cudnn "${cudnn_library:-missing}"
  fact cudnn_frontend "${cudnn_frontend_include:-missing}"
  echo "== cudnn: ${cudnn_library:-NOT FOUND (cuDNN attention is not built)}${cudnn_include:+ (headers in $cudnn_include)}" |
    tee -a "$machine_log"
  echo "== cudnn frontend headers: ${cudnn_frontend_include:-NOT FOUND (run scripts/gpu-deps-bundle.sh and copy .gpu-deps)}" |
    tee -a "$machine_log"
}

# compute-sanitizer, ncu, nsys: where they are (the sanitizer stage uses the first).
find_tools() {
  local tool path candidate cuda_root=""
  [[ -z $nvcc ]] || cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  for tool in compute-sanitizer ncu nsys; do
    path=$(command -v "$tool" || true)
    for candidate in "$cuda_root/bin/$tool" "$cuda_root/$tool/$tool" /usr/local/cuda/bin/"$tool" \
                     /opt/nvidia/nsight-compute/*/"$tool"; do
      if [[ -z $path && -x $candidate ]]; then path=$candidate; fi
    done
    fact "$tool" "${path:-missing}"
    echo "== $tool: ${path:-missing}" | tee -a "$machine_log"
    [[ $tool != compute-sanitizer ]] || sanitizer=$path
  done
}

# Which of nanoforge's libraries this machine has installed, found by their CMake/pkg-config files or
# headers in the usual places (one pass of find). Sets missing_libraries.
check_libraries() {
  local -A wanted=(
    [fmt]=fmt-config.cmake [absl]=abslConfig.cmake [GTest]=GTestConfig.cmake
    [tomlplusplus]=tomlplusplusConfig.cmake [simdjson]=simdjson-config.cmake [HDF5]=hdf5.h
    [OpenBLAS]=libopenblas.so [MPI]=mpi.h [ibverbs]=verbs.h [PCRE2]=pcre2.h [OpenSSL]=opensslv.h
  )
  local found name names=() path
  for name in "${wanted[@]}"; do names+=(-o -name "$name"); done
  found=$(find /usr/include /usr/local/include /usr/lib /usr/lib64 /usr/local/lib /usr/local/lib64 /usr/share/cmake* \
          -maxdepth 5 \( -false "${names[@]}" \) -size +0 2>/dev/null |
          grep -v -e /python -e /site-packages -e /fortran/ || true)
  missing_libraries=()
  echo "== our libraries (installed on this machine):" | tee -a "$machine_log"
  for name in $(printf '%s\n' "${!wanted[@]}" | sort); do
    path=$(grep -m1 "/${wanted[$name]}\$" <<<"$found" || true)
    [[ -n $path ]] || missing_libraries+=("$name")
    fact "library_$name" "${path:-missing}"
    printf '   %-13s %s\n' "$name" "${path:-MISSING}" | tee -a "$machine_log"
  done
  if ! pkg_config_works; then
    missing_libraries+=(pkg-config)
    echo "   pkg-config    MISSING" | tee -a "$machine_log"
  fi
}

# ---- dependencies from the bundle ----

bundle_usable() {
  local debs=("$bundle_dir"/debs/*.deb) bundle_arch
  ((${#debs[@]})) || return 1
  bundle_arch=$(sed -n 's/^architecture=\([^ ]*\).*/\1/p' "$bundle_dir/manifest.txt" 2>/dev/null)
  case "$(uname -m):$bundle_arch" in
    x86_64:amd64 | aarch64:arm64) return 0 ;;
    *) say "the bundle in $bundle_dir is for ${bundle_arch:-an unknown architecture}, this is $(uname -m)"; return 1 ;;
  esac
}

# Unpacks every .deb into deps_prefix (dpkg-deb where there is one, else ar + tar), once per bundle.
unpack_bundle() {
  local stamp=$deps_prefix/.bundle-manifest debs=("$bundle_dir"/debs/*.deb) deb member
  if [[ -f $stamp ]] && cmp -s "$stamp" "$bundle_dir/manifest.txt"; then
    say "bundle already unpacked in $deps_prefix"
    return 0
  fi
  rm -rf "$deps_prefix"
  mkdir -p "$deps_prefix"
  for deb in "${debs[@]}"; do
    if dpkg-deb --version >/dev/null 2>&1; then
      dpkg-deb -x "$deb" "$deps_prefix"
    else
      member=$(ar t "$deb" | grep '^data\.tar')
      ar p "$deb" "$member" >"$state_dir/$member"  # tar finds the compression from a file's first bytes
      tar -x -f "$state_dir/$member" -C "$deps_prefix" --no-same-owner
      rm "$state_dir/$member"
    fi
  done
  relocate_pkg_config_files
  cp "$bundle_dir/manifest.txt" "$stamp"
  say "unpacked ${#debs[@]} packages into $deps_prefix"
}

# The .pc files say prefix=/usr (libibverbs.pc even libdir=/usr/lib/...): point them into the prefix.
relocate_pkg_config_files() {
  find "$deps_prefix" -name '*.pc' -type f -exec \
    sed -i -E "s#^([A-Za-z_]+)=/usr(/|\$)#\\1=$deps_prefix/usr\\2#" {} +
}

# A pkg-config for machines without one: the bundled pkgconf, run with its own library.
bundled_pkg_config() {
  local wrapper=$deps_prefix/bin/pkg-config
  mkdir -p "$deps_prefix/bin"
  # shellcheck disable=SC2016  # the $ expressions are for the wrapper to expand
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
         "$deps_prefix/usr/lib/$multiarch" "$deps_prefix/usr/bin/pkgconf" >"$wrapper"
  chmod +x "$wrapper"
  echo "$wrapper"
}

# The prefix's libraries that Open MPI's libraries load. Those carry RUNPATH=/usr/lib/.../openmpi/lib, and a
# library with a RUNPATH looks for its own dependencies there and in LD_LIBRARY_PATH, never in the program's
# DT_RPATH. The program therefore loads them itself (bundle_cmake_args), and the loader reuses them.
runpath_dependencies() {
  local lib=$deps_prefix/usr/lib/$multiarch seen=" " file soname dependency
  local queue=("$lib/openmpi/lib/libmpi.so" "$lib/openmpi/lib/libmpi_cxx.so")
  while ((${#queue[@]})); do
    file=$(readlink -f "${queue[0]}")
    queue=("${queue[@]:1}")
    readelf -d "$file" 2>/dev/null | grep -q 'RUNPATH.*\[/usr' || continue
    for soname in $(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      for dependency in "$lib/$soname" "$deps_prefix/lib/$multiarch/$soname"; do
        [[ -e $dependency && $seen != *" $dependency "* ]] || continue
        seen+="$dependency "
        queue+=("$dependency")
        echo "$dependency"
      done
    done
  done
}

# CMake arguments that find every library in the prefix and record it in the binaries' DT_RPATH.
bundle_cmake_args() {
  local lib=$deps_prefix/usr/lib/$multiarch rpath gxx_major preload link_flags
  rpath="$lib:$deps_prefix/lib/$multiarch:$lib/openblas-openmp:$lib/openmpi/lib:$lib/hdf5/serial"
  # DT_RPATH (not RUNPATH) also serves the libraries' own dependencies (HDF5's libcurl, ...); -rpath-link
  # lets the linker see those at link time.
  link_flags="-Wl,--disable-new-dtags -Wl,-rpath-link,$rpath"
  preload=$(runpath_dependencies | tr '\n' ' ')
  [[ -z $preload ]] || link_flags+=" -Wl,--push-state,--no-as-needed ${preload% } -Wl,--pop-state"
  export PKG_CONFIG_PATH="$lib/pkgconfig:$deps_prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  cmake_args+=(
    "-DCMAKE_PREFIX_PATH=$deps_prefix/usr"
    "-DHDF5_ROOT=$lib/hdf5/serial"  # FindHDF5 then searches there alone, without h5cc
    "-DOPENSSL_ROOT_DIR=$deps_prefix/usr"
    # cmake/Dependencies.cmake looks for the OpenMP OpenBLAS under /usr itself.
    "-DNANOFORGE_OPENBLAS_LIBRARY=$lib/openblas-openmp/libopenblas.so"
    "-DNANOFORGE_OPENBLAS_INCLUDE_DIR=$deps_prefix/usr/include/$multiarch/openblas-openmp"
    -DMPI_SKIP_COMPILER_WRAPPER=ON "-DMPI_CXX_HEADER_DIR=$lib/openmpi/include"
    "-DMPI_CXX_ADDITIONAL_INCLUDE_DIRS=$lib/openmpi/include/openmpi" "-DMPI_CXX_LIB_NAMES=mpi_cxx;mpi"
    "-DMPI_mpi_LIBRARY=$lib/openmpi/lib/libmpi.so" "-DMPI_mpi_cxx_LIBRARY=$lib/openmpi/lib/libmpi_cxx.so"
    "-DCMAKE_BUILD_RPATH=${rpath//:/;}"
    "-DCMAKE_EXE_LINKER_FLAGS=$link_flags"
  )
  if ! pkg_config_works && [[ -x $deps_prefix/usr/bin/pkgconf ]]; then
    cmake_args+=("-DPKG_CONFIG_EXECUTABLE=$(bundled_pkg_config)")
  fi
  # GCC 13 stopped including <cstdint> through other headers; Debian 12's Abseil relies on that.
  gxx_major=$("${CXX:-g++}" -dumpversion 2>/dev/null | cut -d. -f1)
  if ((${gxx_major:-0} >= 13)); then
    cmake_args+=("-DCMAKE_CXX_FLAGS=-include cstdint" "-DCMAKE_CUDA_FLAGS=-include cstdint")
  fi
}

# Chooses system or bundle (GPU_CHECK_DEPS overrides) and adds the CMake arguments for it.
choose_dependencies() {
  multiarch=$(gcc -print-multiarch 2>/dev/null || echo "$(uname -m)-linux-gnu")
  deps_mode=$deps_choice
  if [[ $deps_mode == auto ]]; then
    if ((${#missing_libraries[@]} == 0)); then
      deps_mode=system
    elif bundle_usable; then
      deps_mode=bundle
    else
      deps_mode=missing
    fi
  fi
  fact deps_mode "$deps_mode"
  case $deps_mode in
    system)
      say "dependencies: as installed on this machine"
      record_stage deps ok 0 "system"
      ;;
    bundle)
      say "dependencies: the Debian bundle (missing here: ${missing_libraries[*]:-none})"
      local start=$SECONDS
      if unpack_bundle 2>&1 | tee -a "$machine_log"; then
        record_stage deps ok $((SECONDS - start)) "bundle in $deps_prefix"
      else
        record_stage deps failed $((SECONDS - start)) "unpacking the bundle failed (machine.txt)"
      fi
      bundle_cmake_args
      ;;
    missing)
      say "dependencies: MISSING here (${missing_libraries[*]}) and no usable bundle in $bundle_dir;" \
          "run scripts/gpu-deps-bundle.sh where apt works and copy .gpu-deps along (docs/build.md)" | tee -a "$machine_log"
      record_stage deps failed 0 "missing: ${missing_libraries[*]}; no usable bundle"
      ;;
    *) say "GPU_CHECK_DEPS=$deps_choice: use auto, system or bundle"; exit 2 ;;
  esac
}

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
