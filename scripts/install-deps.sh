#!/usr/bin/env bash
# Installs the Debian packages nanoforge builds against, and only those that are missing, so that
# `make test` can call it every time at no cost. The CUDA toolkit (nvcc, cuBLASLt, cuDNN, NCCL) is not a
# Debian package here: it is found where it is installed, and the CUDA part is skipped when it is absent.
#
#   scripts/install-deps.sh [PYTHON_ENV]
#
# With PYTHON_ENV (`make` passes BUILD_DIR/python) it also makes that Python environment: a venv of Debian's
# python3 that sees Debian's packages (h5py, numpy, torch) plus scripts/python-requirements.txt from PyPI
# (pyarrow: Arrow's C++ parquet reader for the build, and the tests' parquet writer; tiktoken: nanochat's
# tokenizer.pkl), and scripts/python-headers-requirements.txt without dependencies (cuDNN's C++ frontend
# headers). It is remade only when the requirements change. If PyPI cannot be reached the build goes on
# without parquet input or cuDNN attention (CMake's summary says so) and the tests that need these skip.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libfmt-dev libabsl-dev libhdf5-dev zlib1g-dev libgtest-dev
  libopenblas-openmp-dev libopenblas0-openmp
  libopenmpi-dev openmpi-bin libibverbs-dev rdma-core libpcre2-dev libtomlplusplus-dev libsimdjson-dev
  libzstd-dev zlib1g-dev libyaml-cpp-dev libcsv-dev libssl-dev
  # the compiler cache of every build tree and the faster linker (cmake/CompilerCache.cmake, cmake/Linker.cmake)
  ccache mold
  python3-h5py python3-numpy python3-matplotlib python3-venv python3-torch
  # clang with libFuzzer, the sanitizer runtimes and its OpenMP: the fuzz targets (make fuzz)
  clang libclang-rt-14-dev libomp-dev
  bible-kjv bible-kjv-text
  # the browser the report test opens `nanoforge report`'s page in, headless (tests/watch/)
  chromium
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
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
fi

[[ $# -ge 1 ]] || exit 0
python_env=$1
requirements="$(dirname "$0")/python-requirements.txt"
header_requirements="$(dirname "$0")/python-headers-requirements.txt"
stamp="$python_env/nanoforge-requirements.txt"
if [[ -x "$python_env/bin/python3" ]] && cmp -s <(cat "$requirements" "$header_requirements") "$stamp"; then
  echo "install-deps: Python environment $python_env is up to date"
  exit 0
fi
echo "install-deps: making the Python environment $python_env"
rm -rf "$python_env"
/usr/bin/python3 -m venv --system-site-packages "$python_env"
if "$python_env/bin/python3" -m pip install --quiet --disable-pip-version-check -r "$requirements" &&
   "$python_env/bin/python3" -m pip install --quiet --disable-pip-version-check --no-deps \
     -r "$header_requirements"; then
  cat "$requirements" "$header_requirements" >"$stamp"
else
  echo "install-deps: WARNING: could not install $requirements and $header_requirements from PyPI:" \
       "building without parquet input or cuDNN attention, and the tests that need pyarrow or tiktoken" \
       "will skip" >&2
fi
