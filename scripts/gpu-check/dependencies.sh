# Sourced by scripts/gpu-check.sh: nanoforge's libraries as installed on the machine, or the Debian packages of
# scripts/gpu-deps-bundle.sh unpacked into a private prefix (never into /) with the CMake arguments that find
# them there and record that prefix in the binaries' DT_RPATH (choose_dependencies fills cmake_args).

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
