# Sourced by scripts/gpu-check.sh: what the machine has (OS, GPU, nvcc, NCCL, cuDNN, the CUDA tools, our
# libraries), said on the terminal and in machine.txt, recorded as facts for the summary, and kept in the
# script's variables (gpu_arch, nvcc, nccl_*, cudnn_*, sanitizer, missing_libraries) for the stages.

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
