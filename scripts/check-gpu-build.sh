#!/usr/bin/env bash
# `make check-gpu-build`, a CI stage (docs/build.md, "The GPU build in CI"): the build a user makes for a GPU
# machine, made here where there is no GPU, so that it compiles and links before anyone runs it: the real
# CUDA backend (no emulator) linked against NVIDIA's runtime, cuBLASLt, cuDNN and NCCL, warnings as errors.
# Nothing runs on a GPU; the programs only print --version.
#  1. The installed toolkit (CUDA 13): every target (the program, cuDNN attention, every test program) for
#     sm_90 and sm_121, in build-gpu/. It is configured as `make test` configures build/, but for
#     NANOFORGE_CUDA_EMULATION=OFF, so the compiler cache serves every object that is the same code in both
#     trees; what is new is the links against NVIDIA's libraries.
#  2. CUDA 12.4, the oldest toolkit nanoforge supports, assembled by scripts/cuda-toolkit-cache.sh in a cache
#     outside the clone: configured with the default architectures, which must be sm_90 alone with the line
#     saying why (an explicit 121 must be refused, with the sentence of cmake/CudaToolkit.cmake), then the
#     targets that touch CUDA built, in build-gpu-cuda12.4/: kernels/cuda, cuDNN attention, dist's NCCL
#     engine and doctor, all of which the nanoforge program links.
#  3. The ptxas of CUDA 12.9, the first that knows the GB10, assembles for sm_121 every kernel of the 12.4
#     build's compute_90 PTX: what a GB10's driver does when it runs a 12.4 build.
# Usage: scripts/check-gpu-build.sh PYTHON (the build tree's Python, whose wheel holds cuDNN's frontend headers)
# Environment: JOBS, CMAKE_FLAGS (what `make` passes), GPU_BUILD_DIR, GPU_BUILD_CUDA12_DIR.
set -euo pipefail
shopt -s inherit_errexit

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
python=${1:?usage: scripts/check-gpu-build.sh PYTHON}
jobs=${JOBS:-$(nproc)}
read -r -a extra_flags <<<"${CMAKE_FLAGS:-}"
gpu_build_dir=${GPU_BUILD_DIR:-build-gpu}
cuda12_build_dir=${GPU_BUILD_CUDA12_DIR:-build-gpu-cuda12.4}
toolchain_cache=${NANOFORGE_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nanoforge-toolchains}

say() { echo "check-gpu-build: $*"; }
die() {
  echo "check-gpu-build: $*" >&2
  exit 1
}
# Seconds since the script started, for the lines that end each part.
started=$SECONDS
took() { echo "$((SECONDS - started)) s"; }

real_gpu_build=(-G Ninja -DCMAKE_BUILD_TYPE=Release "-DPython3_EXECUTABLE=$python" -DNANOFORGE_CUDA=ON
                -DNANOFORGE_CUDA_EMULATION=OFF -DNANOFORGE_WERROR=ON -DNANOFORGE_CUDNN=ON)

# --- 1. CUDA 13, everything --------------------------------------------------------------------------------
say "CUDA $(nvcc --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p'): every target, warnings as errors, in $gpu_build_dir/"
cmake -S . -B "$gpu_build_dir" "${real_gpu_build[@]}" "${extra_flags[@]}"
cmake --build "$gpu_build_dir" -j "$jobs"
"$gpu_build_dir/bin/nanoforge" --version
[[ ! -e $gpu_build_dir/bin/nanoforge-emulated ]] || die "$gpu_build_dir has the emulator although it was configured without"
say "CUDA 13 build done ($(took))"

# --- 2. CUDA 12.4: the configure checks, then what touches CUDA ----------------------------------------------
scripts/cuda-toolkit-cache.sh 12.4 "$toolchain_cache"
toolkit=$toolchain_cache/cuda-12.4
# What cmake/CudaToolkit.cmake says of the 12.4 toolkit, white space made single (CMake wraps its errors).
configure_output() { tr -s ' \n' ' ' <"$1"; }

refused_dir=$(mktemp -d)
if cmake -S . -B "$refused_dir" -C "$toolkit/nanoforge-cuda.cmake" "${real_gpu_build[@]}" \
     "-DCMAKE_CUDA_ARCHITECTURES=90;121" >"$refused_dir.log" 2>&1; then
  die "CUDA 12.4 with CMAKE_CUDA_ARCHITECTURES=90;121 configured; it must be refused (the GB10 needs CUDA 12.9)"
fi
configure_output "$refused_dir.log" | grep -q "the DGX Spark's GB10 (sm_121) needs CUDA 12.9 or newer" ||
  die "CUDA 12.4 with an explicit 121 failed, but not with the GB10 sentence:$(tail -20 "$refused_dir.log")"
rm -rf "$refused_dir" "$refused_dir.log"
say "CUDA 12.4 refuses CMAKE_CUDA_ARCHITECTURES=90;121, naming the GB10 and CUDA 12.9"

mkdir -p "$cuda12_build_dir"
rm -f "$cuda12_build_dir/CMakeCache.txt"  # the default architectures are what is checked
cmake -S . -B "$cuda12_build_dir" -C "$toolkit/nanoforge-cuda.cmake" "${real_gpu_build[@]}" \
  "${extra_flags[@]}" 2>&1 | tee "$cuda12_build_dir/configure.log"
configure_output "$cuda12_build_dir/configure.log" |
  grep -q "building for sm_90 only: the DGX Spark's GB10 (sm_121) needs CUDA 12.9 or newer" ||
  die "CUDA 12.4's configure did not say it builds for sm_90 only, and why"
grep -qx "CMAKE_CUDA_ARCHITECTURES:STRING=90" "$cuda12_build_dir/CMakeCache.txt" ||
  die "CUDA 12.4's default architectures are not 90: $(grep CMAKE_CUDA_ARCHITECTURES "$cuda12_build_dir/CMakeCache.txt")"
cmake --build "$cuda12_build_dir" -j "$jobs" --target nanoforge
"$cuda12_build_dir/bin/nanoforge" --version
# NVIDIA's fatbinaries say which architectures they hold: sm_90's code and compute_90's PTX, nothing else.
elf_archs=$("$toolkit/bin/cuobjdump" --list-elf "$cuda12_build_dir/kernels/cuda/libnanoforge_cuda_kernels.a" |
            sed -n 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/p' | sort -u | tr '\n' ' ')
[[ $elf_archs == "sm_90 " ]] || die "the CUDA 12.4 build holds code for '$elf_archs', expected sm_90 alone"
# No header of the newer toolkit on this machine may stand in for one of 12.4's.
if ninja -C "$cuda12_build_dir" -t deps | grep -E '^ +/usr/local/(cuda|include)'; then
  die "the CUDA 12.4 build read the headers above from another CUDA"
fi
say "CUDA 12.4 build done: sm_90 alone ($(took))"

# --- 3. ptxas 12.9 on the 12.4 build's PTX, for sm_121 --------------------------------------------------------
ptxas_129=$toolkit/ptxas-12.9/bin/ptxas
ptx_dir=$cuda12_build_dir/ptx-sm_121
rm -rf "$ptx_dir"
mkdir -p "$ptx_dir"
(cd "$ptx_dir" && "$toolkit/bin/cuobjdump" --extract-ptx all \
   "$repo_root/$cuda12_build_dir/kernels/cuda/libnanoforge_cuda_kernels.a" >/dev/null)
ptx_files=("$ptx_dir"/*.ptx)
[[ -e ${ptx_files[0]} ]] || die "no PTX in the CUDA 12.4 build's kernels"
for ptx in "${ptx_files[@]}"; do
  "$ptxas_129" -arch=sm_121 "$ptx" -o "${ptx%.ptx}.cubin" ||
    die "ptxas 12.9 refused ${ptx##*/} for sm_121"
done
say "ptxas 12.9 assembled the ${#ptx_files[@]} PTX files of the CUDA 12.4 kernels for sm_121 ($(took))"
say "all done in $(took)"
