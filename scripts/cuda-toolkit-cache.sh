#!/usr/bin/env bash
# Puts an older CUDA toolkit into a private cache folder, so that CI can compile and link nanoforge's real
# CUDA backend against the oldest toolkit it supports (CUDA 12.4: the first whose ptxas takes the FP8
# mma.sync.m16n8k32 of kernels/cuda/mma_ptx.cuh) on a machine that has a newer CUDA, or none, and no GPU.
# Nothing is installed: the packages are downloaded and unpacked into CACHE_DIR/cuda-VERSION only.
#
# What goes in (docs/build.md, "CUDA 12.4 in CI"):
#  - NVIDIA's CUDA 12.4 as Debian repackages it (suite trixie, non-free): nvcc and its compiler pipeline
#    (cicc, ptxas, nvlink, fatbinary, cudafe++, libdevice, libnvvm), the headers with CCCL 2.3
#    (thrust, cub, libcu++), the static and shared runtime, cuBLASLt, NVRTC and the link stubs, fetched
#    with `apt-get download` through a private apt configuration (the machine's own sources, lists and
#    package database are neither read nor changed) and rearranged into the usual CUDA layout
#    (bin/ include/ lib64/ nvvm/), with an nvcc.profile whose paths are relative to nvcc;
#  - from PyPI wheels (downloaded with pip, never installed): cuDNN 9 (headers and the libcudnn.so.9 that
#    programs link; not the engine libraries it loads at run time), NCCL (nccl.h, libnccl.so.2), and the
#    ptxas of CUDA 12.9, which knows the GB10 (sm_121), into ptxas-12.9/;
#  - nanoforge-cuda.cmake, an initial cache for `cmake -C` naming all of the above.
# The folder is built beside its final place and renamed into it when complete, with a stamp: a second run
# finds the stamp and does nothing; an interrupted one leaves no stamp and is started over.
#
# Usage: scripts/cuda-toolkit-cache.sh 12.4 [CACHE_DIR]
#   CACHE_DIR defaults to $NANOFORGE_TOOLCHAIN_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/nanoforge-toolchains.
#   NANOFORGE_DEBIAN_MIRROR (default http://deb.debian.org/debian) picks the Debian mirror; pip takes its
#   usual settings (PIP_INDEX_URL, ...). Needs apt-get, dpkg-deb, tar, python3 with pip, network; no root.
set -euo pipefail
shopt -s inherit_errexit

# Bump when the layout of the folder changes, so that existing caches are rebuilt.
layout_version=2

die() {
  echo "cuda-toolkit-cache: $*" >&2
  exit 1
}

say() {
  echo "cuda-toolkit-cache: $*"
}

usage() {
  echo "usage: $0 12.4 [CACHE_DIR]" >&2
  exit 2
}

[[ $# -ge 1 && $# -le 2 ]] || usage
cuda_version=$1
cache_dir=${2:-${NANOFORGE_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nanoforge-toolchains}}
debian_mirror=${NANOFORGE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
debian_suite=trixie
debian_keyring=/usr/share/keyrings/debian-archive-keyring.gpg

# Per toolkit version: the Debian packages as "name=upstream-version" (any Debian revision of that upstream
# version is taken) and the PyPI wheels as "name==version".
case $cuda_version in
  12.4)
    debian_packages=(
      nvidia-cuda-toolkit=12.4.131~12.4.1   # nvcc, cicc, ptxas, nvlink, fatbinary, cudafe++, libdevice
      nvidia-cuda-dev=12.4.127~12.4.1       # headers, cudart_static, cudadevrt, link stubs, .so links
      libcudart12=12.4.127~12.4.1
      libcublaslt12=12.4.5.8~12.4.1
      libnvrtc12=12.4.127~12.4.1
      libnvrtc-builtins12.4=12.4.127~12.4.1
      libnvvm4=12.4.131~12.4.1
      libcu++-dev=2.3.2                     # CCCL as CUDA 12.4 ships it
      libcub-dev=2.3.2
      libthrust-dev=2.3.2
    )
    # cuDNN and NCCL as PyTorch pairs them with CUDA 12.4 (its cu124 builds).
    cudnn_wheel=nvidia-cudnn-cu12==9.1.0.70
    nccl_wheel=nvidia-nccl-cu12==2.21.5
    ;;
  *) die "CUDA '$cuda_version' is not one this script knows: it provides 12.4" ;;
esac
# ptxas of the first CUDA that knows sm_121 (the DGX Spark's GB10).
ptxas_wheel=nvidia-cuda-nvcc-cu12==12.9.86
ptxas_version=12.9

target=$cache_dir/cuda-$cuda_version
stamp=$target/.nanoforge-toolkit-stamp
recipe="layout $layout_version; debian ${debian_packages[*]}; pypi $cudnn_wheel $nccl_wheel $ptxas_wheel"

if [[ -f $stamp && $(<"$stamp") == "$recipe" ]]; then
  say "$target is up to date (CUDA $cuda_version, $cudnn_wheel, $nccl_wheel, $ptxas_wheel)"
  exit 0
fi

check_tools() {
  local tool
  for tool in apt-get apt-cache dpkg dpkg-deb tar python3 awk find du stat; do
    command -v "$tool" >/dev/null || die "needs $tool, which is not on PATH (a Debian or Ubuntu machine has it)"
  done
  python3 -m pip --version >/dev/null 2>&1 ||
    die "needs pip for python3 (python3 -m pip): apt-get install python3-pip"
  [[ $(dpkg --print-architecture) == amd64 ]] ||
    die "fetches x86-64 (amd64) packages only, and this machine is $(dpkg --print-architecture)"
  [[ -r $debian_keyring ]] ||
    die "needs $debian_keyring (package debian-archive-keyring) to check Debian's signatures"
}
check_tools

mkdir -p "$cache_dir" || die "cannot create the cache folder $cache_dir"
cache_dir=$(cd "$cache_dir" && pwd)
target=$cache_dir/cuda-$cuda_version
stamp=$target/.nanoforge-toolkit-stamp

# One run at a time per toolkit; a second waits, then finds the stamp.
if command -v flock >/dev/null; then
  exec 9>"$cache_dir/.cuda-$cuda_version.lock"
  flock 9
  if [[ -f $stamp && $(<"$stamp") == "$recipe" ]]; then
    say "$target is up to date (built by a run that held the lock)"
    exit 0
  fi
  # Left behind by a run that was killed (the lock says that none is running now).
  find "$cache_dir" -maxdepth 1 -name ".cuda-$cuda_version.partial.*" -exec rm -rf {} +
fi

work=$(mktemp -d "$cache_dir/.cuda-$cuda_version.partial.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP
started=$SECONDS
toolkit=$work/cuda-$cuda_version
unpacked=$work/unpacked
mkdir -p "$toolkit" "$unpacked" "$work/debs" "$work/wheels"
manifest=()
downloaded_bytes=0

size_of() {
  stat -c %s "$1"
}

megabytes() {
  awk -v bytes="$1" 'BEGIN { printf "%.1f MB", bytes / 1e6 }'
}

# --- Debian packages --------------------------------------------------------------------------------------

apt_dir=$work/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.list.d" \
  "$apt_dir/preferences.d"
: >"$apt_dir/status"
: >"$apt_dir/preferences"
echo "deb [signed-by=$debian_keyring] $debian_mirror $debian_suite non-free main" >"$apt_dir/sources.list"
# Only the private sources, lists, cache and (empty) package database; the machine's apt.conf.d still
# applies, so that a proxy configured there is used. As root, apt would drop to the _apt user to download,
# who cannot write into this folder: download as the user running the script.
apt_options=(
  -o "Dir::Etc::SourceList=$apt_dir/sources.list"
  -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
  -o "Dir::Etc::Preferences=$apt_dir/preferences"
  -o "Dir::Etc::PreferencesParts=$apt_dir/preferences.d"
  -o "Dir::State::Lists=$apt_dir/lists"
  -o "Dir::State::status=$apt_dir/status"
  -o "Dir::Cache=$apt_dir/cache"
  -o "APT::Architecture=amd64"
  -o "APT::Architectures=amd64"
  -o "Acquire::Languages=none"
  -o "APT::Sandbox::User=$(id -un)"
)

say "reading the package lists of Debian $debian_suite from $debian_mirror"
apt-get "${apt_options[@]}" -qq --error-on=any update ||
  die "could not read the package lists of Debian $debian_suite from $debian_mirror (no network? a proxy" \
    "to set in /etc/apt/apt.conf.d, or another mirror in NANOFORGE_DEBIAN_MIRROR?)"

# name=version of each package, the version being the candidate of the private lists, which must be the
# wanted upstream version.
package_requests=()
for entry in "${debian_packages[@]}"; do
  name=${entry%%=*}
  wanted=${entry#*=}
  candidate=$(apt-cache "${apt_options[@]}" policy "$name" | sed -n 's/^ *Candidate: //p')
  if [[ -z $candidate || $candidate == "(none)" ]]; then
    die "Debian $debian_suite has no package $name (wanted: version $wanted)"
  fi
  [[ $candidate == "$wanted"-* ]] ||
    die "Debian $debian_suite has $name $candidate, not the version $wanted this script unpacks"
  package_requests+=("$name=$candidate")
done

say "downloading ${#package_requests[@]} Debian packages"
(cd "$work/debs" && apt-get "${apt_options[@]}" -qq download "${package_requests[@]}") ||
  die "could not download the Debian packages ${package_requests[*]} from $debian_mirror"
for deb in "$work/debs"/*.deb; do
  manifest+=("$(basename "$deb") ($(megabytes "$(size_of "$deb")"))")
  downloaded_bytes=$((downloaded_bytes + $(size_of "$deb")))
done

# Downloads the wheel REQUIREMENT (name==version) into $work/wheels; wheel_files[REQUIREMENT] is its path.
declare -A wheel_files
download_wheel() {
  local requirement=$1 path
  say "downloading $requirement"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --no-cache-dir --disable-pip-version-check \
    --dest "$work/wheels" "$requirement" ||
    die "could not download $requirement from PyPI (no network? pip's index settings, PIP_INDEX_URL?)"
  path=$(find "$work/wheels" -maxdepth 1 -name "$(echo "${requirement%%==*}" | tr - _)-*.whl" -print -quit)
  [[ -n $path ]] || die "pip download $requirement left no wheel"
  manifest+=("$(basename "$path") ($(megabytes "$(size_of "$path")"))")
  downloaded_bytes=$((downloaded_bytes + $(size_of "$path")))
  wheel_files[$requirement]=$path
}

# Everything is downloaded before anything is unpacked, so that a missing download fails early.
for requirement in "$cudnn_wheel" "$nccl_wheel" "$ptxas_wheel"; do
  download_wheel "$requirement"
done

downloads_done=$SECONDS

# The files of a .deb matching the tar patterns, under $unpacked; the .deb is deleted afterwards.
unpack_deb() {
  local name=$1 deb
  shift
  deb=$(find "$work/debs" -maxdepth 1 -name "${name}_*.deb" -print -quit)
  [[ -n $deb ]] || die "the download of $name left no .deb"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$unpacked" --wildcards "$@" "./usr/share/doc/$name/copyright" ||
    die "could not unpack $deb"
  rm -f "$deb"
}

say "unpacking"
unpack_deb nvidia-cuda-toolkit './usr/bin/*' './usr/lib/nvidia-cuda-toolkit/bin/*' \
  './usr/lib/nvidia-cuda-toolkit/libdevice/*' './usr/include/*'
# Not the static libraries of cuBLAS, cuFFT, cuSPARSE, NPP, ... (2.3 GB): only the runtime's.
unpack_deb nvidia-cuda-dev './usr/include/*' './usr/lib/x86_64-linux-gnu/*.so' \
  './usr/lib/x86_64-linux-gnu/libcudart_static.a' './usr/lib/x86_64-linux-gnu/libcudadevrt.a' \
  './usr/lib/x86_64-linux-gnu/libculibos.a'
for name in libcudart12 libcublaslt12 libnvrtc12 libnvrtc-builtins12.4 libnvvm4; do
  unpack_deb "$name" './usr/lib/x86_64-linux-gnu/*'
done
for name in libcu++-dev libcub-dev libthrust-dev; do
  unpack_deb "$name" './usr/include/*'
done

# Debian's scattered layout (tools in /usr/bin and /usr/lib/nvidia-cuda-toolkit/bin, headers in
# /usr/include, libraries in /usr/lib/x86_64-linux-gnu, an nvcc.profile with absolute paths) becomes the
# layout of NVIDIA's own installer, which nvcc, CMake's CUDA support and FindCUDAToolkit know.
mkdir -p "$toolkit"/{bin/crt,include,lib64,nvvm/{bin,include,lib64,libdevice},licenses}
debian_tools=$unpacked/usr/lib/nvidia-cuda-toolkit
mv "$debian_tools/bin/nvcc" "$toolkit/bin/"
mv "$debian_tools/bin/crt/"*.stub "$toolkit/bin/crt/"
mv "$debian_tools/bin/cicc" "$toolkit/nvvm/bin/"
mv "$debian_tools/libdevice/"* "$toolkit/nvvm/libdevice/"
# /usr/bin/nvcc is Debian's wrapper script, and compute-sanitizer a link to a tool not unpacked.
for tool in ptxas nvlink fatbinary cudafe++ bin2c cuobjdump nvdisasm nvprune cu++filt __nvcc_device_query; do
  mv "$unpacked/usr/bin/$tool" "$toolkit/bin/"
done
mv "$unpacked/usr/include/nvvm.h" "$toolkit/nvvm/include/"
mv "$unpacked/usr/include/"* "$toolkit/include/"
mv "$unpacked/usr/lib/x86_64-linux-gnu/"libnvvm.so* "$toolkit/nvvm/lib64/"
mv "$unpacked/usr/lib/x86_64-linux-gnu/"* "$toolkit/lib64/"
# The development links of the libraries not unpacked (cuFFT, NPP, ...) point nowhere: CMake then finds
# their stubs, as it would in a toolkit without them.
find "$toolkit/lib64" -xtype l -delete
for copyright in "$unpacked"/usr/share/doc/*/copyright; do
  name=${copyright%/copyright}
  cp "$copyright" "$toolkit/licenses/${name##*/}.copyright"
done

# nvcc reads nvcc.profile from its own folder; _HERE_ is that folder, so the toolkit can move. Its tools, and
# its include and library folders, come before those of the PATH and of the host compiler, which may hold
# another CUDA; a header this toolkit lacks would still be found there (docs/build.md).
cat >"$toolkit/bin/nvcc.profile" <<'EOF'
# Written by nanoforge's scripts/cuda-toolkit-cache.sh: paths relative to this folder.
TOP                = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH   += $(TOP)/lib64:
PATH              += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES          += "-I$(TOP)/include" $(_SPACE_)
LIBRARIES          =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS      +=
PTXAS_FLAGS       +=
EOF

# --- PyPI wheels ------------------------------------------------------------------------------------------

# The wheel's files matching the glob patterns (fnmatch), under DEST; fails when a pattern matches nothing.
unpack_wheel() {
  python3 - "$@" <<'EOF'
import fnmatch, sys, zipfile
wheel, dest, patterns = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as archive:
    names = archive.namelist()
    unmatched = [p for p in patterns if not fnmatch.filter(names, p)]
    if unmatched:
        sys.exit(f"{wheel} has no {', '.join(unmatched)}")
    archive.extractall(dest, [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)])
EOF
}

# Unpacks the files of REQUIREMENT's wheel that match the glob PATTERNs into $work/wheel (emptied first), and
# its licence into licenses/NAME.license; deletes the wheel.
take_from_wheel() {
  local requirement=$1 name=$2 wheel license
  shift 2
  wheel=${wheel_files[$requirement]}
  rm -rf "$work/wheel"
  unpack_wheel "$wheel" "$work/wheel" "$@" '*.dist-info/*icense*'
  license=$(find "$work/wheel" -path '*.dist-info/*' -type f -iname '*license*' -print -quit)
  [[ -n $license ]] || die "$wheel has no licence file"
  cp "$license" "$toolkit/licenses/$name.license"
  rm -f "$wheel"
}

# LIBRARY.so for the linker, beside the LIBRARY.so.N of a wheel (which has no development link).
link_library() {
  local dir=$1 name=$2 versioned
  versioned=$(cd "$dir" && echo "$name".so.[0-9]*)
  [[ -e $dir/$versioned ]] || die "$dir has no $name.so.N"
  ln -s "$versioned" "$dir/$name.so"
}

take_from_wheel "$cudnn_wheel" nvidia-cudnn 'nvidia/cudnn/include/*.h' 'nvidia/cudnn/lib/libcudnn.so.*'
mkdir -p "$toolkit/cudnn"
mv "$work/wheel/nvidia/cudnn/include" "$work/wheel/nvidia/cudnn/lib" "$toolkit/cudnn/"
link_library "$toolkit/cudnn/lib" libcudnn

take_from_wheel "$nccl_wheel" nvidia-nccl 'nvidia/nccl/include/*.h' 'nvidia/nccl/lib/libnccl.so.*'
mkdir -p "$toolkit/nccl"
mv "$work/wheel/nvidia/nccl/include" "$work/wheel/nvidia/nccl/lib" "$toolkit/nccl/"
link_library "$toolkit/nccl/lib" libnccl

take_from_wheel "$ptxas_wheel" "nvidia-cuda-nvcc-$ptxas_version" 'nvidia/cuda_nvcc/bin/ptxas'
mkdir -p "$toolkit/ptxas-$ptxas_version/bin"
mv "$work/wheel/nvidia/cuda_nvcc/bin/ptxas" "$toolkit/ptxas-$ptxas_version/bin/"
chmod 755 "$toolkit/ptxas-$ptxas_version/bin/ptxas"   # zip keeps no file modes
rm -rf "$work/wheel"

# --- CMake initial cache ----------------------------------------------------------------------------------

# Paths relative to the file's own folder, so that a cache restored elsewhere still works.
ptxas_variable=NANOFORGE_PTXAS_${ptxas_version//./_}
cat >"$toolkit/nanoforge-cuda.cmake" <<EOF
# CUDA $cuda_version for nanoforge, written by scripts/cuda-toolkit-cache.sh: an initial cache for
# cmake -C, with paths relative to this file. Building the real CUDA backend on a machine without a GPU
# is nanoforge's own setting (NANOFORGE_CUDA, NANOFORGE_CUDA_EMULATION: docs/build.md).
set(_nanoforge_toolkit "\${CMAKE_CURRENT_LIST_DIR}")
set(CMAKE_CUDA_COMPILER "\${_nanoforge_toolkit}/bin/nvcc" CACHE FILEPATH "nvcc of CUDA $cuda_version")
set(CUDAToolkit_ROOT "\${_nanoforge_toolkit}" CACHE PATH "CUDA $cuda_version")
set(NANOFORGE_NCCL_LIBRARY "\${_nanoforge_toolkit}/nccl/lib/libnccl.so" CACHE FILEPATH "NCCL ($nccl_wheel)")
set(NANOFORGE_NCCL_INCLUDE_DIR "\${_nanoforge_toolkit}/nccl/include" CACHE PATH "NCCL's nccl.h")
set(NANOFORGE_CUDNN_LIBRARY "\${_nanoforge_toolkit}/cudnn/lib/libcudnn.so" CACHE FILEPATH "cuDNN ($cudnn_wheel)")
set(NANOFORGE_CUDNN_INCLUDE_DIR "\${_nanoforge_toolkit}/cudnn/include" CACHE PATH "cuDNN's headers")
set($ptxas_variable "\${_nanoforge_toolkit}/ptxas-$ptxas_version/bin/ptxas" CACHE FILEPATH
    "ptxas of CUDA $ptxas_version ($ptxas_wheel), which knows sm_121")
unset(_nanoforge_toolkit)
EOF

# --- Check, then put in place -----------------------------------------------------------------------------

"$toolkit/bin/nvcc" --version | grep -q "release $cuda_version," ||
  die "the unpacked nvcc does not say it is CUDA $cuda_version: $("$toolkit/bin/nvcc" --version 2>&1 | tail -1)"
"$toolkit/ptxas-$ptxas_version/bin/ptxas" --version | grep -q "release $ptxas_version," ||
  die "the unpacked ptxas-$ptxas_version does not say it is CUDA $ptxas_version"
# The whole pipeline (host compiler, cudafe++, cicc, ptxas, fatbinary) on a kernel for sm_90.
mkdir -p "$work/check"
printf '__global__ void nanoforge_check(float *x) { x[threadIdx.x] *= 2.0f; }\n' >"$work/check/check.cu"
if ! output=$("$toolkit/bin/nvcc" -arch=sm_90 -c "$work/check/check.cu" -o "$work/check/check.o" 2>&1); then
  die "the unpacked nvcc cannot compile a kernel for sm_90 (is the host compiler one CUDA" \
    "$cuda_version supports, GCC <= 13?):"$'\n'"$output"
fi

{
  echo "CUDA $cuda_version for nanoforge, unpacked by scripts/cuda-toolkit-cache.sh from:"
  printf '  %s\n' "${manifest[@]}"
} >"$toolkit/MANIFEST"
echo "$recipe" >"$toolkit/.nanoforge-toolkit-stamp"

if [[ -e $target ]]; then
  mv "$target" "$work/replaced"
fi
mv "$toolkit" "$target"

printf '  %s\n' "${manifest[@]}"
say "downloaded $(megabytes "$downloaded_bytes") in $((downloads_done - started)) s, unpacked and checked in" \
  "$((SECONDS - downloads_done)) s: $(du -sh "$target" | cut -f1) in $target"
say "configure with: cmake -C $target/nanoforge-cuda.cmake ..."
