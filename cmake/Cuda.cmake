# The CUDA backend, in up to two builds of the same kernels/cuda sources (docs/build.md, "CUDA: the GPU build
# and the emulator"):
#  - the real one: compiled by nvcc and linked against NVIDIA's runtime, cuBLASLt, cuDNN and NCCL. The
#    product program, `nanoforge`, always links this one, whether or not the machine that builds it has a GPU.
#  - the emulated one: the .cu files compiled as C++ against the CPU emulator of CUDA (emulator/), so that
#    the GPU tests run where there is no GPU. The tests link it, and so does `nanoforge-emulated`, the
#    program the command-line GPU tests start; no program a user runs does.
# NANOFORGE_CUDA=AUTO|ON|OFF: the backend at all (AUTO: when nvcc is found).
# NANOFORGE_CUDA_EMULATION=AUTO|ON|OFF|ONLY: the emulated build beside the real one (AUTO: when nvidia-smi
# shows no GPU), or ONLY it: a tree for tests alone (the AddressSanitizer tree, cross builds), which needs
# NVIDIA's headers but no nvcc, and builds no product program (nanoforge-emulated stands in for it).
# The toolkit's release is checked before nvcc compiles anything (cmake/CudaToolkit.cmake): CUDA 12.4 is the
# floor, 12.9 for the GB10 (sm_121).
# Sets NANOFORGE_HAVE_CUDA (the backend is in the op dispatch), NANOFORGE_CUDA_REAL, NANOFORGE_CUDA_EMULATED,
# NANOFORGE_CUDA_VERSION (nvcc's, real builds), the targets nanoforge_cuda_headers (NVIDIA's headers, which
# both builds compile against) and nanoforge_cuda_backend (linked by nanoforge_kernels: the real or the
# emulated build for each program, see nanoforge_product_program below), and NANOFORGE_GPU_TEST_ENVIRONMENT.
include(CheckLanguage)
set(NANOFORGE_CUDA_EMULATION "AUTO" CACHE STRING
    "Also build the CUDA backend on the CPU emulator of CUDA for the tests: AUTO (no GPU visible), ON, OFF, ONLY")
set_property(CACHE NANOFORGE_CUDA_EMULATION PROPERTY STRINGS AUTO ON OFF ONLY)
if(NOT NANOFORGE_CUDA_EMULATION MATCHES "^(AUTO|ON|OFF|ONLY)$")
  message(FATAL_ERROR "NANOFORGE_CUDA_EMULATION is '${NANOFORGE_CUDA_EMULATION}': it takes AUTO, ON, OFF or ONLY")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/CudaToolkit.cmake)

set(NANOFORGE_HAVE_CUDA OFF)
set(NANOFORGE_CUDA_REAL OFF)
set(NANOFORGE_CUDA_EMULATED OFF)
set(NANOFORGE_CUDA_VERSION "")

if(NOT NANOFORGE_CUDA STREQUAL "OFF" AND NOT NANOFORGE_CUDA_EMULATION STREQUAL "ONLY")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Before enable_language(CUDA), whose own failure on an architecture the toolkit does not know says only
    # that a test program did not compile.
    nanoforge_cuda_architectures(_architectures "${CMAKE_CUDA_COMPILER}" "${CMAKE_CUDA_ARCHITECTURES}")
    set(CMAKE_CUDA_ARCHITECTURES "${_architectures}" CACHE STRING "CUDA architectures to build for")
    enable_language(CUDA)
    # CMake before 3.25.2 (Debian 12 has 3.25.1) knows no C++20 flag for nvcc and refuses CUDA_STANDARD 20;
    # nvcc 12+ takes -std=c++20.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(NANOFORGE_CUDA_REAL ON)
    # NCCL ships inside the CUDA toolkit on Debian's CUDA install, without CMake config files; elsewhere
    # give -DNANOFORGE_NCCL_LIBRARY=... -DNANOFORGE_NCCL_INCLUDE_DIR=...
    find_library(NANOFORGE_NCCL_LIBRARY NAMES nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(NANOFORGE_NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(NANOFORGE_NCCL_LIBRARY AND NANOFORGE_NCCL_INCLUDE_DIR)
      set(_nccl_found TRUE)
    endif()
    nanoforge_require(_nccl_found "NCCL (with the CUDA backend)" libnccl-dev)
    set(NANOFORGE_CUDA_INCLUDE_DIRS ${CUDAToolkit_INCLUDE_DIRS} ${NANOFORGE_NCCL_INCLUDE_DIR})
  elseif(NANOFORGE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "NANOFORGE_CUDA=ON but no CUDA compiler was found: put nvcc on PATH or set "
                        "CMAKE_CUDA_COMPILER, or configure with -DNANOFORGE_CUDA=OFF.")
  else()
    message(STATUS "nvcc not found: building without the CUDA backend (NANOFORGE_CUDA=AUTO)")
  endif()
endif()

# The emulated build beside the real one, or alone.
if(NOT NANOFORGE_CUDA STREQUAL "OFF")
  if(NANOFORGE_CUDA_EMULATION STREQUAL "ONLY")
    set(NANOFORGE_CUDA_EMULATED ON)
  elseif(NANOFORGE_CUDA_REAL AND NANOFORGE_CUDA_EMULATION STREQUAL "ON")
    set(NANOFORGE_CUDA_EMULATED ON)
  elseif(NANOFORGE_CUDA_REAL AND NANOFORGE_CUDA_EMULATION STREQUAL "AUTO")
    execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE _nvidia_smi_status OUTPUT_VARIABLE _nvidia_smi_gpus
                    ERROR_QUIET)
    if(NOT _nvidia_smi_status EQUAL 0 OR NOT _nvidia_smi_gpus MATCHES "GPU [0-9]")
      set(NANOFORGE_CUDA_EMULATED ON)
      message(STATUS "No GPU visible (nvidia-smi -L): the GPU tests run on the CPU emulator of CUDA; "
                     "bin/nanoforge is built for the GPU (NANOFORGE_CUDA_EMULATION=AUTO)")
    endif()
  endif()
endif()

# An emulated-only tree needs NVIDIA's headers (the emulator implements what they declare), not nvcc: they
# are found beside an nvcc on PATH, in CUDA_PATH or /usr/local/cuda, on the build machine even when cross
# compiling (the headers describe the API, not the host). NANOFORGE_CUDA_INCLUDE_DIR names them directly.
if(NANOFORGE_CUDA_EMULATED AND NOT NANOFORGE_CUDA_REAL)
  find_program(NANOFORGE_NVCC_FOR_HEADERS nvcc NO_CMAKE_FIND_ROOT_PATH)
  set(_header_hints "")
  if(NANOFORGE_NVCC_FOR_HEADERS)
    get_filename_component(_nvcc_bin "${NANOFORGE_NVCC_FOR_HEADERS}" REALPATH)
    get_filename_component(_nvcc_bin "${_nvcc_bin}" DIRECTORY)
    list(APPEND _header_hints "${_nvcc_bin}/../include")
  endif()
  find_path(NANOFORGE_CUDA_INCLUDE_DIR NAMES cuda_runtime.h
            HINTS ${_header_hints} ENV CUDA_PATH PATHS /usr/local/cuda PATH_SUFFIXES include
            NO_CMAKE_FIND_ROOT_PATH)
  foreach(_header cuda_runtime.h cuda_bf16.h cuda_fp8.h cublasLt.h nccl.h)
    if(NOT NANOFORGE_CUDA_INCLUDE_DIR OR NOT EXISTS "${NANOFORGE_CUDA_INCLUDE_DIR}/${_header}")
      message(FATAL_ERROR "NANOFORGE_CUDA_EMULATION=ONLY compiles against NVIDIA's headers, and ${_header} was "
                          "not found (NANOFORGE_CUDA_INCLUDE_DIR='${NANOFORGE_CUDA_INCLUDE_DIR}'): install the "
                          "CUDA toolkit with NCCL, or give -DNANOFORGE_CUDA_INCLUDE_DIR=.../include")
    endif()
  endforeach()
  set(NANOFORGE_CUDA_INCLUDE_DIRS "${NANOFORGE_CUDA_INCLUDE_DIR}")
endif()
if(NANOFORGE_CUDA_REAL OR NANOFORGE_CUDA_EMULATED)
  set(NANOFORGE_HAVE_CUDA ON)
  add_library(nanoforge_cuda_headers INTERFACE)
  target_include_directories(nanoforge_cuda_headers SYSTEM INTERFACE ${NANOFORGE_CUDA_INCLUDE_DIRS})
  # Which build of the backend a program links: the real one for the product (nanoforge_product_program)
  # and wherever there is no emulated one, the emulated one for every other program of a tree that has it.
  # Link only: both builds compile against the same headers, so every object above kernels/ is the same.
  add_library(nanoforge_cuda_backend INTERFACE)
  if(NANOFORGE_CUDA_REAL AND NANOFORGE_CUDA_EMULATED)
    target_link_libraries(nanoforge_cuda_backend INTERFACE
      "$<LINK_ONLY:$<IF:$<BOOL:$<TARGET_PROPERTY:NANOFORGE_PRODUCT_PROGRAM>>,nanoforge_cuda_backend_real,nanoforge_cuda_backend_emulated>>")
  elseif(NANOFORGE_CUDA_REAL)
    target_link_libraries(nanoforge_cuda_backend INTERFACE "$<LINK_ONLY:nanoforge_cuda_backend_real>")
  else()
    target_link_libraries(nanoforge_cuda_backend INTERFACE "$<LINK_ONLY:nanoforge_cuda_backend_emulated>")
  endif()
endif()

# nanoforge_product_program(TARGET): TARGET is a program users run (nanoforge): it links the real backend,
# and is not built in a tree without one.
function(nanoforge_product_program target)
  set_target_properties(${target} PROPERTIES NANOFORGE_PRODUCT_PROGRAM ON)
endfunction()

# What the gpu-labelled tests run with (tests/CMakeLists.txt): on the emulator every launch runs under all
# four schedules, whose results must agree bit for bit (compare). The AddressSanitizer tree takes rotate (one
# schedule per launch, the four in turn; Makefile): it looks for bad memory accesses, which one run of a
# launch shows, and `make test` has compared the schedules of the same sources; compare costs it ~3.7x.
set(NANOFORGE_EMULATOR_TEST_SCHEDULES "compare" CACHE STRING
    "Emulator schedules of the gpu-labelled tests that compare schedules: compare or rotate")
set_property(CACHE NANOFORGE_EMULATOR_TEST_SCHEDULES PROPERTY STRINGS compare rotate)
if(NOT NANOFORGE_EMULATOR_TEST_SCHEDULES MATCHES "^(compare|rotate)$")
  message(FATAL_ERROR "NANOFORGE_EMULATOR_TEST_SCHEDULES is '${NANOFORGE_EMULATOR_TEST_SCHEDULES}': "
                      "it takes compare or rotate")
endif()
set(NANOFORGE_GPU_TEST_ENVIRONMENT "")
if(NANOFORGE_CUDA_EMULATED)
  set(NANOFORGE_GPU_TEST_ENVIRONMENT "NANOFORGE_EMULATOR=schedules=${NANOFORGE_EMULATOR_TEST_SCHEDULES}")
endif()
