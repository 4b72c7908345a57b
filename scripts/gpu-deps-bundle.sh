#!/usr/bin/env bash
# Fetches the Debian packages nanoforge builds against into .gpu-deps/debs, so that a machine without them
# (a borrowed GPU machine: another distribution, no apt, no network) can build nanoforge from a private prefix:
# scripts/gpu-check.sh unpacks them there with `dpkg -x`, never into /. Run it here, on Debian 12 with
# scripts/install-deps.sh done, before a GPU session; copy `.gpu-deps` along with the checkout (docs/build.md).
#
# What goes in: the -dev packages (headers, link-time .so, CMake and pkg-config files), and the runtime
# packages of every library the linked libraries load, found with ldd on this machine's copies — except what
# any machine that compiles C++ has (glibc, libstdc++, libgcc, libgomp). The versions are the installed ones,
# so the bundle matches what this machine builds and tests against. Needs no root.
# Also the headers of cuDNN's C++ frontend (cuDNN attention; header-only): the pinned PyPI wheel of
# scripts/python-headers-requirements.txt, its include/ folder and licences unpacked into
# .gpu-deps/cudnn-frontend, which gpu-check.sh hands to CMake. cuDNN itself is the GPU machine's own.
# Usage: scripts/gpu-deps-bundle.sh [OUT_DIR]   (default .gpu-deps in the repository)
set -euo pipefail
shopt -s inherit_errexit

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle_dir=${1:-$repo_root/.gpu-deps}
deb_dir=$bundle_dir/debs
multiarch=$(gcc -print-multiarch)
architecture=$(dpkg --print-architecture)

# Headers, link-time symlinks, CMake config files and .pc files of what cmake/Dependencies.cmake, data/ and
# dist/ find. libnl-*-dev: libibverbs.pc requires their .pc files. Not bundled: OpenMP (the compiler's),
# hdf5-helpers (h5cc: the prefix build finds HDF5 by its headers and library instead), openmpi-bin (only the
# `mpi`-labelled tests run mpiexec, and the GPU check does not run them).
dev_packages=(
  libfmt-dev libabsl-dev libhdf5-dev libgtest-dev libopenblas-openmp-dev libopenmpi-dev
  libibverbs-dev libnl-3-dev libnl-route-3-dev libpcre2-dev libtomlplusplus-dev libsimdjson-dev
  libzstd-dev zlib1g-dev libssl-dev
)

# The libraries nanoforge links (under /usr/lib/MULTIARCH); the closure of what each loads is bundled.
linked_libraries=(
  libfmt.so 'libabsl_*.so' hdf5/serial/libhdf5.so openblas-openmp/libopenblas.so
  openmpi/lib/libmpi.so openmpi/lib/libmpi_cxx.so libibverbs.so libpcre2-8.so libtomlplusplus.so
  libsimdjson.so libzstd.so libz.so libcrypto.so
)

# Programs the build runs that a machine may lack: pkg-config (data/ and dist/ find PCRE2 and libibverbs
# with it). gpu-check.sh uses the bundled one only where the machine has none.
bundled_programs=(/usr/bin/pkgconf)

# Packages every machine with a C++ compiler has; bundling them would shadow the machine's own.
excluded_packages='^(libc6|libgcc-s1|libstdc\+\+6|libgomp1)$'

die() {
  echo "gpu-deps-bundle: $*" >&2
  exit 1
}

check_tools() {
  local tool
  for tool in apt-get dpkg dpkg-query ldd gcc; do
    command -v "$tool" >/dev/null || die "needs $tool (this script runs on Debian 12, where nanoforge builds)"
  done
}

# The package that installed FILE; merged /usr means dpkg may know it under /lib or /usr/lib.
package_of() {
  local file=$1 alternative owner
  if [[ $file == /usr/lib/* ]]; then alternative=${file#/usr}; else alternative=/usr$file; fi
  owner=$(dpkg-query -S "$file" 2>/dev/null || dpkg-query -S "$alternative" 2>/dev/null) || return 1
  owner=${owner%%: *}
  echo "${owner%%:*}"
}

# The library files (not links) of linked_libraries, as installed here.
linked_library_files() {
  local pattern file found
  for pattern in "${linked_libraries[@]}"; do
    found=0
    for file in /usr/lib/"$multiarch"/$pattern; do
      [[ -e $file ]] || continue
      realpath "$file"
      found=1
    done
    ((found)) || die "/usr/lib/$multiarch/$pattern is missing: run scripts/install-deps.sh first"
  done
}

# Every package whose files those libraries and programs load (themselves included), minus the excluded ones.
runtime_packages() {
  local object dependency package
  {
    { linked_library_files; printf '%s\n' "${bundled_programs[@]}"; } | while read -r object; do
      echo "$object"
      ldd "$object" | awk '/=> \// {print $3}'
      if ldd "$object" | grep -q 'not found'; then
        die "ldd $object: a dependency is not found here: $(ldd "$object" | grep 'not found' | head -1)"
      fi
    done
  } | sort -u | while read -r dependency; do
    package=$(package_of "$dependency") || die "no Debian package owns $dependency"
    echo "$package"
  done | sort -u | grep -Ev "$excluded_packages"
}

# Warns about libraries that the programs built in build/ load but the bundle lacks: a dependency added to the
# build but not to the lists above. Libraries under /usr/local (the CUDA toolkit) are the GPU machine's own.
check_built_programs() {
  local bundled=" $* " program file package
  for program in "$repo_root"/build/bin/nanoforge "$repo_root"/build/tests/*/*; do
    [[ -f $program && -x $program ]] || continue
    ldd "$program" 2>/dev/null | awk '/=> \// {print $3}'
  done | sort -u | while read -r file; do
    [[ $file != /usr/local/* ]] || continue
    if ! package=$(package_of "$file"); then
      echo "gpu-deps-bundle: warning: no Debian package owns $file, which build/ programs load" >&2
    elif [[ ! $package =~ $excluded_packages && $bundled != *" $package "* ]]; then
      echo "gpu-deps-bundle: warning: build/ programs load $file ($package), which the bundle lacks" >&2
    fi
  done
}

installed_version() {
  dpkg-query -W -f='${Version}' "$1" 2>/dev/null || die "$1 is not installed: run scripts/install-deps.sh first"
}

# PACKAGE=VERSION for each of PACKAGES: the installed version where the archive still has it, else (a
# security update superseded it) the candidate. One apt-cache call: it is slow to start.
pinned_versions() {
  apt-cache policy "$@" | awk '
    /^[^ ]/ { package = $1; sub(/:$/, "", package); sub(/:.*/, "", package) }
    $1 == "Installed:" { installed[package] = $2 }
    $1 == "Candidate:" { candidate[package] = $2 }
    /^ \*\*\* / || /^     [^ ]/ { version = $(NF - 1) }  # " *** VERSION PRIORITY", or 5 spaces first
    /^ +[0-9]+ (https?|file|cdrom):/ { in_archive[package, version] = 1 }
    END {
      for (package in installed) {
        if ((package, installed[package]) in in_archive) { print package "=" installed[package]; continue }
        printf "gpu-deps-bundle: %s %s is no longer in the archive; taking %s\n", package, installed[package],
               candidate[package] > "/dev/stderr"
        print package "=" candidate[package]
      }
    }'
}

# Downloads PACKAGES into the current folder, at the versions pinned_versions chose.
download_packages() {
  local pinned sandbox=()
  mapfile -t pinned < <(pinned_versions "$@")
  ((${#pinned[@]} == $#)) || die "apt-cache policy did not list all of: $*"
  # As root, apt drops to its _apt user for downloads; that user may not reach a private temporary folder.
  [[ $(id -u) -ne 0 ]] || sandbox=(-o APT::Sandbox::User=root)
  apt-get download -q=2 "${sandbox[@]}" "${pinned[@]}" || die "apt-get download failed (apt-get update first?)"
}

# manifest.txt: where and when the bundle was made, and each package's version as downloaded.
write_manifest() {
  local deb
  {
    echo "# scripts/gpu-deps-bundle.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ)," \
         "on $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release)"
    echo "architecture=$architecture multiarch=$multiarch"
    for deb in "$deb_dir"/*.deb; do
      echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
    done
  } >"$bundle_dir/manifest.txt"
}

# The frontend wheel's include/ and licence files into BUNDLE/cudnn-frontend (pip download, no dependencies).
bundle_cudnn_frontend() {
  local wheel_dir=$staging/frontend-wheel target=$bundle_dir/cudnn-frontend
  mkdir -p "$wheel_dir"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    -r "$repo_root/scripts/python-headers-requirements.txt" -d "$wheel_dir"
  rm -rf "$target"
  python3 - "$wheel_dir"/nvidia_cudnn_frontend-*.whl "$target" <<'PYTHON'
import pathlib, sys, zipfile
wheel, target = sys.argv[1], pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as archive:
    for name in archive.namelist():
        if name.startswith("include/") or "/licenses/" in name:
            archive.extract(name, target)
(target / "wheel.txt").write_text(pathlib.Path(wheel).name + "\n")
PYTHON
  echo "gpu-deps-bundle: cuDNN frontend headers from $(basename "$wheel_dir"/nvidia_cudnn_frontend-*.whl) in" \
       "$target/include ($(du -sh "$target" | cut -f1))"
}

staging=""
cleanup() { [[ -z $staging ]] || rm -rf "$staging"; }

main() {
  check_tools
  local runtime all package
  runtime=$(runtime_packages)
  mapfile -t all < <(printf '%s\n' "${dev_packages[@]}" "$runtime" | sort -u)
  for package in "${all[@]}"; do installed_version "$package" >/dev/null; done
  check_built_programs "${all[@]}"

  trap cleanup EXIT
  staging=$(mktemp -d "${TMPDIR:-/tmp}/gpu-deps.XXXXXX")
  echo "gpu-deps-bundle: downloading ${#all[@]} packages ($architecture)"
  (cd "$staging" && download_packages "${all[@]}")

  mkdir -p "$deb_dir"
  rm -f "$deb_dir"/*.deb
  mv "$staging"/*.deb "$deb_dir"/
  write_manifest
  bundle_cudnn_frontend
  echo "gpu-deps-bundle: ${#all[@]} packages in $deb_dir, $(du -cb "$deb_dir"/*.deb | tail -1 | cut -f1) bytes" \
       "($(du -sh "$deb_dir" | cut -f1)); manifest in $bundle_dir/manifest.txt"
}

main "$@"
