# Cross-compiles nanoforge for aarch64 Linux (the DGX Spark's CPU) on an x86-64 Debian 12 machine, and runs its
# tests there under qemu-user (docs/build.md, "aarch64"). scripts/arm64-sysroot.sh makes what this file uses:
# Debian's cross g++ 12, qemu-aarch64-static, and an arm64 sysroot of the libraries nanoforge links.
#
#   cmake -S . -B build-arm64 -G Ninja --toolchain cmake/toolchains/aarch64-linux-gnu.cmake
#
# The sysroot: -DNANOFORGE_ARM64_SYSROOT=..., else $NANOFORGE_ARM64_SYSROOT, else where the script puts it
# (${NANOFORGE_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nanoforge-toolchains}/arm64-sysroot). The tree
# is for tests: the CPU backend and the CUDA backend on the CPU emulator of CUDA (NANOFORGE_CUDA_EMULATION=ONLY,
# the default here: NVIDIA's headers from the build machine, no nvcc), or the CPU backend alone
# (-DNANOFORGE_CUDA=OFF).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

if(NOT NANOFORGE_ARM64_SYSROOT)
  if(DEFINED ENV{NANOFORGE_ARM64_SYSROOT})
    set(NANOFORGE_ARM64_SYSROOT "$ENV{NANOFORGE_ARM64_SYSROOT}")
  elseif(DEFINED ENV{NANOFORGE_TOOLCHAIN_CACHE})
    set(NANOFORGE_ARM64_SYSROOT "$ENV{NANOFORGE_TOOLCHAIN_CACHE}/arm64-sysroot")
  elseif(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
    set(NANOFORGE_ARM64_SYSROOT "$ENV{XDG_CACHE_HOME}/nanoforge-toolchains/arm64-sysroot")
  else()
    set(NANOFORGE_ARM64_SYSROOT "$ENV{HOME}/.cache/nanoforge-toolchains/arm64-sysroot")
  endif()
endif()
set(NANOFORGE_ARM64_SYSROOT "${NANOFORGE_ARM64_SYSROOT}" CACHE PATH "The arm64 sysroot (scripts/arm64-sysroot.sh)")
if(NOT EXISTS "${NANOFORGE_ARM64_SYSROOT}/.nanoforge-sysroot")
  message(FATAL_ERROR "No arm64 sysroot at ${NANOFORGE_ARM64_SYSROOT}: run scripts/arm64-sysroot.sh (it also "
                      "installs the cross compiler and qemu), or give -DNANOFORGE_ARM64_SYSROOT=...")
endif()
# try_compile projects read this file again: they get the same sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES NANOFORGE_ARM64_SYSROOT)

# Debian's cross compiler. Its own C library and libstdc++ headers and start files (/usr/aarch64-linux-gnu)
# come before the sysroot's, which adds the libraries' headers and .so files.
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc-12)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++-12)
set(CMAKE_SYSROOT "${NANOFORGE_ARM64_SYSROOT}")
# Libraries, headers and CMake packages from the sysroot only; programs (python3, mpiexec, ccache, mold) from
# the build machine.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The build machine's pkg-config, reading the sysroot's .pc files (PCRE2, libibverbs, zstd) and prefixing the
# sysroot to the paths they give.
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${NANOFORGE_ARM64_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR}
    "${NANOFORGE_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${NANOFORGE_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# How the build machine runs what this tree builds (ctest, gtest_discover_tests): qemu-user with the sysroot as
# the root of the programs' file lookups (their dynamic loader and libraries), set as QEMU_LD_PREFIX so that
# a program the test starts inherits it (binfmt_misc runs aarch64 children through qemu too). QEMU_CPU: qemu's
# `max` CPU (every Armv9 feature qemu has: SVE2, BF16) with 128-bit SVE vectors, as the GB10's cores have.
find_program(NANOFORGE_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64 NO_CMAKE_FIND_ROOT_PATH)
if(NOT NANOFORGE_QEMU_AARCH64)
  message(FATAL_ERROR "qemu-aarch64 not found: run scripts/arm64-sysroot.sh (it installs qemu-user-static)")
endif()
set(NANOFORGE_QEMU_CPU "max,sve-default-vector-length=16" CACHE STRING "qemu's CPU for the tests (QEMU_CPU)")
set(CMAKE_CROSSCOMPILING_EMULATOR
    /usr/bin/env "QEMU_LD_PREFIX=${NANOFORGE_ARM64_SYSROOT}" "QEMU_CPU=${NANOFORGE_QEMU_CPU}"
    "${NANOFORGE_QEMU_AARCH64}")

# Open MPI: the sysroot's mpicxx is an aarch64 program, so FindMPI is told what it would say (mpicxx --showme:
# the headers under openmpi/include, libmpi_cxx and libmpi) instead of running it. mpiexec is the build
# machine's: it starts aarch64 ranks through binfmt_misc (the Open MPI releases are the same, 4.1.4).
set(MPI_SKIP_COMPILER_WRAPPER TRUE)
set(MPI_SKIP_GUESSING TRUE)
set(MPI_ASSUME_NO_BUILTIN_MPI TRUE)
set(_openmpi "${NANOFORGE_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/openmpi")
set(MPI_CXX_ADDITIONAL_INCLUDE_DIRS "${_openmpi}/include;${_openmpi}/include/openmpi" CACHE STRING "")
set(MPI_CXX_LIB_NAMES "mpi_cxx;mpi" CACHE STRING "")
set(MPI_mpi_cxx_LIBRARY "${_openmpi}/lib/libmpi_cxx.so" CACHE FILEPATH "")
set(MPI_mpi_LIBRARY "${_openmpi}/lib/libmpi.so" CACHE FILEPATH "")
unset(_openmpi)

# HDF5: the h5cc wrapper FindHDF5 would run is the build machine's (x86-64 paths); without it FindHDF5 finds
# the sysroot's serial HDF5 by its header and library.
set(HDF5_C_COMPILER_EXECUTABLE "" CACHE FILEPATH "")

# What this tree builds: no nvcc (it makes no aarch64 host code), the CUDA backend on the emulator unless the
# caller says -DNANOFORGE_CUDA=OFF; no parquet input (the build machine's pyarrow wheel is x86-64); no
# -march=native (refused when cross compiling: the host code targets armv8.2-a, CMakeLists.txt).
set(NANOFORGE_CUDA_EMULATION "ONLY" CACHE STRING "")
set(NANOFORGE_PARQUET "OFF" CACHE STRING "")
