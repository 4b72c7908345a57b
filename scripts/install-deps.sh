#!/usr/bin/env bash
# Installs the Debian packages nanoforge builds against, and only those that are missing, so that
# `make test` can call it every time at no cost. The CUDA toolkit (nvcc, cuBLASLt, cuDNN, NCCL) is not a
# Debian package here: it is found where it is installed, and the CUDA part is skipped when it is absent.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libfmt-dev libabsl-dev libhdf5-dev libgtest-dev
  libopenblas-openmp-dev libopenblas0-openmp
  libopenmpi-dev openmpi-bin libibverbs-dev rdma-core libpcre2-dev libtomlplusplus-dev libsimdjson-dev
  python3-h5py python3-numpy python3-matplotlib
  # clang with libFuzzer, the sanitizer runtimes and its OpenMP: the fuzz targets (make fuzz)
  clang libclang-rt-14-dev libomp-dev
  bible-kjv bible-kjv-text
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    sudo_cmd=(sudo)
  else
    echo "install-deps: not root and no sudo; run as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq || true
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
