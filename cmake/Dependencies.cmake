# Host dependencies, all from Debian packages (scripts/install-deps.sh installs the missing ones).
# Each is found the way BUILD-NOTES found to work on Debian 12; a missing one stops configuration with the
# package to install.

macro(nanoforge_require found package_name debian_package)
  if(NOT ${found})
    message(FATAL_ERROR "nanoforge needs ${package_name}: install the Debian package ${debian_package} "
                        "(scripts/install-deps.sh installs everything), or point CMAKE_PREFIX_PATH at it.")
  endif()
endmacro()

find_package(fmt CONFIG)
nanoforge_require(fmt_FOUND "fmt" libfmt-dev)
find_package(absl CONFIG)
nanoforge_require(absl_FOUND "Abseil" libabsl-dev)
find_package(HDF5 COMPONENTS C)
nanoforge_require(HDF5_FOUND "HDF5 (C API)" libhdf5-dev)
# zlib: CRC-32 of checkpoint files (libhdf5-dev depends on it already).
find_package(ZLIB)
nanoforge_require(ZLIB_FOUND "zlib" zlib1g-dev)
find_package(Threads REQUIRED)
find_package(GTest CONFIG)
nanoforge_require(GTest_FOUND "GoogleTest" libgtest-dev)
find_package(tomlplusplus CONFIG)
nanoforge_require(tomlplusplus_FOUND "toml++" libtomlplusplus-dev)
# simdjson: JSONL documents (data/documents), and UTF-8 validation of recipe overrides (train).
find_package(simdjson CONFIG)
nanoforge_require(simdjson_FOUND "simdjson" libsimdjson-dev)
# Open MPI 4.1: the CPU engine of dist/ and the NCCL id exchange under mpirun/srun.
find_package(MPI COMPONENTS CXX)
nanoforge_require(MPI_CXX_FOUND "MPI (C++)" "libopenmpi-dev openmpi-bin")
find_package(OpenMP COMPONENTS CXX)
nanoforge_require(OpenMP_CXX_FOUND "OpenMP" g++)
# Compressed JSONL input (*.jsonl.gz, *.jsonl.zst).
find_package(ZLIB)
nanoforge_require(ZLIB_FOUND "zlib" zlib1g-dev)
find_package(PkgConfig)
if(PkgConfig_FOUND)
  pkg_check_modules(ZSTD IMPORTED_TARGET libzstd)
endif()
nanoforge_require(ZSTD_FOUND "zstd" libzstd-dev)
# OpenSSL's libcrypto: HMAC-SHA256 and random nonces for the TCP rendezvous's authentication.
find_package(OpenSSL COMPONENTS Crypto)
nanoforge_require(OpenSSL_FOUND "OpenSSL (libcrypto)" libssl-dev)

# OpenBLAS, the OpenMP flavour: our kernels parallelise with OpenMP and call sgemm from inside parallel
# regions (attention blocks); the OpenMP build of OpenBLAS then runs single-threaded there instead of
# oversubscribing the cores, and follows omp_set_num_threads() everywhere else. Debian installs the flavours
# side by side with the same soname, so the build links the OpenMP one by path and records it in the RPATH.
set(NANOFORGE_OPENBLAS_FLAVOURS openblas-openmp openblas-pthread openblas-serial)
foreach(flavour IN LISTS NANOFORGE_OPENBLAS_FLAVOURS)
  list(APPEND _openblas_lib_hints "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/${flavour}")
  list(APPEND _openblas_include_hints "/usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/${flavour}")
endforeach()
find_library(NANOFORGE_OPENBLAS_LIBRARY NAMES openblas HINTS ${_openblas_lib_hints})
find_path(NANOFORGE_OPENBLAS_INCLUDE_DIR NAMES cblas.h HINTS ${_openblas_include_hints}
          PATH_SUFFIXES openblas)
if(NANOFORGE_OPENBLAS_LIBRARY AND NANOFORGE_OPENBLAS_INCLUDE_DIR)
  set(_openblas_found TRUE)
endif()
nanoforge_require(_openblas_found "OpenBLAS" libopenblas-openmp-dev)
if(NOT NANOFORGE_OPENBLAS_LIBRARY MATCHES "openmp")
  message(WARNING "OpenBLAS at ${NANOFORGE_OPENBLAS_LIBRARY} is not the OpenMP build: GEMMs inside parallel "
                  "regions may oversubscribe the cores. Install libopenblas-openmp-dev.")
endif()
add_library(nanoforge_openblas INTERFACE)
target_link_libraries(nanoforge_openblas INTERFACE ${NANOFORGE_OPENBLAS_LIBRARY})
target_include_directories(nanoforge_openblas SYSTEM INTERFACE ${NANOFORGE_OPENBLAS_INCLUDE_DIR})
