#!/usr/bin/env bash
# Installs the distribution packages nanoforge builds against, and only those that are missing, so that
# `make test` can call it every time at no cost. The CUDA toolkit (nvcc, cuBLASLt, cuDNN, NCCL) is not a
# distribution package here: it is found where it is installed, and the CUDA part is skipped when it is absent.
#
#   scripts/install-deps.sh [PYTHON_ENV]
#
# It knows three releases by /etc/os-release (ID, VERSION_ID, VERSION_CODENAME): Debian 12 (bookworm), where
# every package exists, and Ubuntu 24.04 (noble) and 22.04 (jammy), what DGX OS 7 and older DGX OS images and
# most H100/H200 clusters run (DGX OS keeps Ubuntu's os-release; arm64 has the same package names as amd64).
# On Ubuntu the names that differ are mapped, and what a release does not have is left out with one line
# saying what is lost and what to do; universe must be enabled. Ubuntu 22.04 also needs g++-12 (its g++ is 11,
# and nanoforge's C++20 needs 12), a newer CMake and toml++ from source: its lines say how. Any other
# distribution gets Debian 12's names and a warning.
#
# With PYTHON_ENV (`make` passes BUILD_DIR/python) it also makes that Python environment: a venv of the
# system's python3 that sees its packages (h5py, numpy, torch) plus scripts/python-requirements.txt from PyPI
# (pyarrow: Arrow's C++ parquet reader for the build, and the tests' parquet writer; tiktoken: nanochat's
# tokenizer.pkl), and scripts/python-headers-requirements.txt without dependencies (cuDNN's C++ frontend
# headers). It is remade only when the requirements change. If PyPI cannot be reached the build goes on
# without parquet input or cuDNN attention (CMake's summary says so) and the tests that need these skip.
set -euo pipefail

say() { echo "install-deps: $*"; }
warn() { echo "install-deps: WARNING: $*" >&2; }

os_release_field() {
  [[ -r /etc/os-release ]] || return 0
  # shellcheck disable=SC1091  # os-release is shell assignments by its specification
  (. /etc/os-release && printf '%s' "${!1:-}")
}
os_id=$(os_release_field ID)
os_version=$(os_release_field VERSION_ID)
os_codename=$(os_release_field VERSION_CODENAME)
os_name=$(os_release_field PRETTY_NAME)
os_name=${os_name:-${os_id:-an unknown distribution}}

case "$os_id/$os_version/$os_codename" in
  debian/12/* | debian/*/bookworm) release="Debian 12" ;;
  ubuntu/24.04/* | ubuntu/*/noble) release="Ubuntu 24.04" ;;
  ubuntu/22.04/* | ubuntu/*/jammy) release="Ubuntu 22.04" ;;
  *)
    # Ubuntu's derivatives name the Ubuntu release they are built on.
    case " $(os_release_field ID_LIKE) /$(os_release_field UBUNTU_CODENAME)" in
      *" ubuntu "*/noble) release="Ubuntu 24.04" ;;
      *" ubuntu "*/jammy) release="Ubuntu 22.04" ;;
      *) release=unknown ;;
    esac
    if [[ $release == unknown ]]; then
      warn "$os_name is not Debian 12 or Ubuntu 22.04/24.04: trying Debian 12's package names"
    else
      say "$os_name is built on $release: using its package names"
    fi
    ;;
esac

# The same on every release. make: the Makefile's commands, which a minimal image may lack.
packages=(
  make cmake ninja-build pkg-config
  libfmt-dev libabsl-dev libhdf5-dev zlib1g-dev libgtest-dev
  libopenblas-openmp-dev libopenblas0-openmp
  libopenmpi-dev openmpi-bin libibverbs-dev rdma-core libpcre2-dev libsimdjson-dev
  libzstd-dev libyaml-cpp-dev libcsv-dev libssl-dev
  # the compiler cache of every build tree and the faster linker (cmake/CompilerCache.cmake, cmake/Linker.cmake)
  ccache mold
  python3-h5py python3-numpy python3-matplotlib python3-venv
  bible-kjv bible-kjv-text
  clang libomp-dev
)
# What differs: the C++ compiler (g++ 12 or newer), toml++ (recipes), torch (tools/ and the nanochat interop
# tests), clang's libFuzzer and sanitizer runtimes for the fuzz targets (make fuzz: the runtime package of the
# release's default clang) and the headless browser of the report test (tests/watch/).
left_out() { say "left out on $release: $*"; }
no_chromium() {
  left_out "chromium (a snap on Ubuntu, not a package): the report test's browser check (tests/watch/) skips;" \
           "\`snap install chromium\` may stand in (untested)"
}
case $release in
  "Ubuntu 24.04")
    packages+=(g++ libtomlplusplus-dev libclang-rt-18-dev)
    left_out "python3-torch (Ubuntu 24.04 has none): tools/export_checkpoint.py and import_nanochat.py cannot run" \
             "and the nanochat interop tests skip; \`build/python/bin/pip install torch\` (CPU wheels: --index-url" \
             "https://download.pytorch.org/whl/cpu) adds it until the environment is remade"
    no_chromium
    ;;
  "Ubuntu 22.04")
    # clang 14's libFuzzer and sanitizer runtimes are in libclang-common-14-dev, which clang-14 depends on.
    packages+=(g++-12 python3-torch)
    # toml++ is header-only, and its own CMake build installs it where nanoforge's finds it.
    if [[ ! -e /usr/local/lib/cmake/tomlplusplus/tomlplusplusConfig.cmake ]]; then
      left_out "libtomlplusplus-dev (toml++, recipes; Ubuntu 22.04 has none), without which nanoforge does not" \
               "configure: build it into /usr/local, \`git clone --depth 1 --branch v3.4.0" \
               "https://github.com/marzer/tomlplusplus && cmake -S tomlplusplus -B tomlplusplus/build -G Ninja" \
               "-DCMAKE_CXX_COMPILER=g++-12 && sudo cmake --install tomlplusplus/build\`, or use Ubuntu 24.04"
    fi
    no_chromium
    ;;
  *)
    packages+=(g++ libtomlplusplus-dev python3-torch libclang-rt-14-dev chromium)
    ;;
esac

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  say "all ${#packages[@]} packages present"
else
  say "installing ${missing[*]}"
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
  unavailable=()
  for package in "${missing[@]}"; do
    policy=$(apt-cache policy "$package" 2>/dev/null || true)
    [[ $policy =~ Candidate:\ [^\(] ]] || unavailable+=("$package")
  done
  if [[ ${#unavailable[@]} -gt 0 ]]; then
    hint=""
    [[ $release == Ubuntu* ]] && hint=" (on Ubuntu they are in universe: add-apt-repository universe)"
    echo "install-deps: the apt sources of $os_name have no ${unavailable[*]}$hint" >&2
    exit 1
  fi
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# What a build tree is configured with, where the release's own is too old (Ubuntu 22.04's g++ and cmake).
compiler=${CXX:-g++}
compiler_major=$("$compiler" -dumpfullversion -dumpversion 2>/dev/null | cut -d. -f1 || true)
if [[ ${compiler_major:-0} -lt 12 ]]; then
  newer=""
  for candidate in g++-14 g++-13 g++-12; do
    if command -v "$candidate" >/dev/null; then newer=$candidate; break; fi
  done
  if [[ -z $newer ]]; then
    warn "$compiler is not g++ 12 or newer, which nanoforge's C++20 needs: install g++-12, configure with CXX=g++-12"
  else
    say "$compiler is ${compiler_major:-not installed}, nanoforge needs g++ 12 or newer: CMake takes a new build" \
        "tree's compilers from CC, CXX and CUDAHOSTCXX (nvcc's host compiler), so run" \
        "\`CC=gcc-${newer#g++-} CXX=$newer CUDAHOSTCXX=$newer make test\` (\`rm -rf build\` first if it was" \
        "configured with $compiler), or give cmake -DCMAKE_C_COMPILER=gcc-${newer#g++-}" \
        "-DCMAKE_CXX_COMPILER=$newer -DCMAKE_CUDA_HOST_COMPILER=$newer"
  fi
fi
cmake_lists="$(dirname "$0")/../CMakeLists.txt"
cmake_needed=$(sed -n 's/^cmake_minimum_required(VERSION \([0-9.]*\).*/\1/p' "$cmake_lists" 2>/dev/null || true)
cmake_have=$(cmake --version 2>/dev/null | sed -n 's/^cmake version \([0-9.]*\).*/\1/p' || true)
if [[ -n $cmake_needed && -n $cmake_have ]] &&
   [[ $(printf '%s\n' "$cmake_needed" "$cmake_have" | sort -V | head -n1) != "$cmake_needed" ]]; then
  warn "cmake $cmake_have is older than the $cmake_needed nanoforge needs: put a newer one first on PATH, e.g." \
       "\`python3 -m venv ~/.local/cmake && ~/.local/cmake/bin/pip install 'cmake>=$cmake_needed'\` and" \
       "PATH=~/.local/cmake/bin:\$PATH, or Kitware's APT repository (apt.kitware.com)"
fi

[[ $# -ge 1 ]] || exit 0
python_env=$1
requirements="$(dirname "$0")/python-requirements.txt"
header_requirements="$(dirname "$0")/python-headers-requirements.txt"
stamp="$python_env/nanoforge-requirements.txt"
if [[ -x "$python_env/bin/python3" ]] && cmp -s <(cat "$requirements" "$header_requirements") "$stamp"; then
  say "Python environment $python_env is up to date"
  exit 0
fi
say "making the Python environment $python_env"
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
