#!/usr/bin/env bash
# Makes what cross-building nanoforge for aarch64 (the DGX Spark's CPU) and testing it under qemu needs:
# the cross compiler and qemu-user from Debian (amd64 packages), and an arm64 sysroot of the libraries nanoforge
# builds against (cmake/toolchains/aarch64-linux-gnu.cmake, `make test-arm64`; docs/build.md, "aarch64").
#
#   scripts/arm64-sysroot.sh [CACHE_DIR]
#
# The sysroot is CACHE_DIR/arm64-sysroot (default CACHE_DIR: ${NANOFORGE_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-
# $HOME/.cache}/nanoforge-toolchains}), outside the clone so that a fresh clone finds it made. The arm64 -dev
# packages cannot be installed beside their amd64 twins, so they are not installed: apt resolves their
# dependency closure as if on an empty arm64 machine, the packages are downloaded (CACHE_DIR/arm64-debs) and
# unpacked with `dpkg -x`. Left out: what only runs on the target (compilers, binutils, perl, autotools: the
# build uses the amd64 cross compiler, whose own C and C++ headers and start files come first) — the runtime
# libraries (libc6, libstdc++6, libgomp1) stay, for qemu. A stamp makes a second run a no-op. Needs root (or
# sudo) only for what it installs on the host: the amd64 packages, the arm64 package lists, and qemu's
# registration as the interpreter of aarch64 programs (binfmt_misc), without which programs that tests start
# (nanoforge, mpirun's ranks) cannot run.
set -euo pipefail
shopt -s inherit_errexit

cache_dir=${1:-${NANOFORGE_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nanoforge-toolchains}}
sysroot=$cache_dir/arm64-sysroot
deb_dir=$cache_dir/arm64-debs
stamp=$sysroot/.nanoforge-sysroot
started=$(date +%s)

# On the host (amd64): the cross compiler (g++ 12, as the host's) and qemu-user, statically linked so that
# binfmt_misc's F flag can keep it open for programs started in any mount namespace.
host_packages=(crossbuild-essential-arm64 g++-12-aarch64-linux-gnu qemu-user-static)

# The arm64 packages nanoforge links against: scripts/install-deps.sh's libraries, and openmpi-bin for the
# arm64 Open MPI's plugins and help files (the ranks load them; mpirun itself is the host's).
target_packages=(
  libfmt-dev libabsl-dev libhdf5-dev libgtest-dev libopenblas-openmp-dev libopenblas0-openmp
  libopenmpi-dev openmpi-bin libibverbs-dev libpcre2-dev libtomlplusplus-dev libsimdjson-dev libzstd-dev
  zlib1g-dev libyaml-cpp-dev libcsv-dev libssl-dev
  # the runtime of the cross compiler's programs, for qemu (the cross toolchain has its own for linking)
  libc6 libstdc++6 libgcc-s1 libgomp1
)

# Pulled in by the packages above but never used: programs that run on an arm64 machine (compilers,
# binutils, perl, autotools, dpkg, ssh) and the sanitizer runtimes of the arm64 gcc. Headers and start files
# come from the cross toolchain (/usr/aarch64-linux-gnu), which the compiler searches before the sysroot.
excluded_packages='^(gcc-12|cpp-12|gfortran-12|g[+][+]-12|binutils.*|libbinutils|libctf0|libctf-nobfd0|libgprofng0|'\
'libjansson4|libisl23|libmpfr6|libmpc3|libcc1-0|perl|perl-base|perl-modules-.*|libperl.*|m4|autoconf|automake|'\
'autotools-dev|dpkg|tar|passwd|adduser|debconf|debianutils|openssh-client|libjs-jquery.*|libasan8|libtsan2|'\
'libhwasan0|liblsan0|libubsan1|libitm1|libc6-dev|libc-dev-bin|linux-libc-dev|libcrypt-dev|libtirpc-dev|'\
'libnsl-dev|rpcsvc-proto|libgcc-12-dev|libgfortran-12-dev|libstdc[+][+]-12-dev)$'

say() { echo "arm64-sysroot: $*"; }
die() {
  echo "arm64-sysroot: $*" >&2
  exit 1
}

as_root=()
if [[ $(id -u) -ne 0 ]]; then
  as_root=(sudo)
fi
root_or_die() {
  [[ ${#as_root[@]} -eq 0 ]] || command -v sudo >/dev/null || die "not root and no sudo: $* needs root"
}

install_host_packages() {
  local package status missing=()
  for package in "${host_packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$package")
  done
  [[ ${#missing[@]} -eq 0 ]] && return
  root_or_die "apt-get install ${missing[*]}"
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update -qq || true
  "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# arm64 package lists beside the host's: dpkg must know the architecture for apt to fetch them.
add_arm64_lists() {
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    root_or_die "dpkg --add-architecture arm64"
    say "adding arm64 to dpkg's architectures (for its package lists; nothing arm64 is installed)"
    "${as_root[@]}" dpkg --add-architecture arm64
  fi
  if ! apt-cache policy libc6:arm64 2>/dev/null | grep -q '^ *Candidate: [0-9]'; then
    root_or_die "apt-get update"
    "${as_root[@]}" apt-get update -qq
  fi
}

# apt as if on an empty arm64 machine: its own status file and cache, the host's sources and lists.
private_apt() {
  local state=$cache_dir/arm64-apt
  mkdir -p "$state/cache/archives/partial"
  touch "$state/status"
  apt-get -q -o Dir::State::status="$state/status" -o Dir::State::extended_states="$state/extended_states" \
    -o Dir::Cache="$state/cache" -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
    -o APT::Install-Recommends=false -o APT::Sandbox::User="$(id -un)" -o Debug::NoLocking=1 "$@"
}

# "name=version" of every package of the closure, less the excluded ones.
resolve_packages() {
  private_apt install --simulate "${target_packages[@]}" |
    sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*/\1=\2/p' |
    awk -F= -v excluded="$excluded_packages" '$1 !~ excluded' | sort
}

# Where apt-get download puts NAME=VERSION (a version's epoch colon is written %3a).
deb_file() {
  local name=${1%%=*} version=${1#*=}
  compgen -G "$deb_dir/${name}_${version//:/%3a}_*.deb" || true
}

# Every absolute symlink of the tree points into the tree: /usr/lib/x/libz.so -> /lib/x/libz.so.1 becomes a
# relative link to the sysroot's own copy (a link to the host's file would mix architectures).
relativize_symlinks() {
  local root=$1 link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    [[ $target == /* ]] || continue
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$root$target")" "$link"
  done < <(find "$root" -type l -print0)
}

# The shared libraries whose DT_NEEDED names no file of the sysroot has (a package the exclusions took).
unresolved_libraries() {
  local root=$1
  find "$root"/lib "$root"/usr/lib -name '*.so*' -type f -print0 |
    xargs -0 -r aarch64-linux-gnu-readelf -d 2>/dev/null |
    sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u |
    comm -23 - <(find "$root" -name '*.so*' \( -type f -o -type l \) -print0 | xargs -0 -r basename -a | sort -u)
}

# The sysroot is remade when the lists above change (delete CACHE_DIR to take newer Debian versions).
make_sysroot() {
  local inputs
  inputs=$(printf '%s\n' "${target_packages[@]}" "$excluded_packages" | sha256sum | cut -c1-16)
  if [[ -f $stamp && $(cat "$stamp") == "$inputs" ]]; then
    say "$sysroot is up to date"
    return
  fi
  add_arm64_lists
  local packages
  mapfile -t packages < <(resolve_packages)
  [[ ${#packages[@]} -gt 0 ]] || die "apt resolved no arm64 packages (are the arm64 lists there? apt-get update)"
  say "downloading ${#packages[@]} arm64 packages into $deb_dir"
  mkdir -p "$deb_dir"
  local missing=() package
  for package in "${packages[@]}"; do
    [[ -n $(deb_file "$package") ]] || missing+=("$package")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    (cd "$deb_dir" && private_apt download "${missing[@]}" >/dev/null)
  fi

  say "unpacking into $sysroot"
  local staging=$sysroot.partial
  rm -rf "$staging"
  mkdir -p "$staging"
  for package in "${packages[@]}"; do
    dpkg -x "$(deb_file "$package")" "$staging"
  done
  relativize_symlinks "$staging"
  local unresolved
  unresolved=$(unresolved_libraries "$staging" | tr '\n' ' ')
  [[ -z $unresolved ]] || say "warning: libraries of the sysroot need what it lacks: $unresolved"
  rm -rf "$sysroot"
  mv "$staging" "$sysroot"
  printf '%s\n' "${packages[@]}" >"$sysroot/.nanoforge-packages"
  echo "$inputs" >"$stamp"
}

# qemu as binfmt_misc's interpreter of aarch64 ELF programs, so that an aarch64 program started by another
# (a test starting nanoforge, mpirun starting its ranks, nanoforge re-executing itself) runs. ctest itself
# needs none of this (the toolchain file's CMAKE_CROSSCOMPILING_EMULATOR puts qemu in front of each test).
register_binfmt() {
  local binfmt=/proc/sys/fs/binfmt_misc
  if [[ -e $binfmt/qemu-aarch64 ]] && grep -qx enabled "$binfmt/qemu-aarch64"; then
    say "qemu-aarch64 runs aarch64 programs (binfmt_misc)"
    return
  fi
  local rule=/usr/lib/binfmt.d/qemu-aarch64.conf
  [[ -f $rule ]] || die "$rule is missing (qemu-user-static installs it)"
  if [[ ! -e $binfmt/register ]]; then
    "${as_root[@]}" mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null || true
  fi
  if [[ -e $binfmt/register ]] && "${as_root[@]}" sh -c "cat $rule > $binfmt/register" 2>/dev/null; then
    say "registered qemu-aarch64 with binfmt_misc (until the machine restarts)"
  else
    say "warning: cannot register qemu with binfmt_misc here: tests run under qemu through ctest, but those" \
        "that start aarch64 programs fail (make test-arm64 leaves them out; docs/build.md)"
  fi
}

install_host_packages
make_sysroot
register_binfmt
say "sysroot $sysroot: $(du -sh "$sysroot" | cut -f1), packages $(du -sh "$deb_dir" | cut -f1);" \
    "$(($(date +%s) - started)) s"
