# The CUDA backend: built when NANOFORGE_CUDA is ON, or AUTO and nvcc is found. Sets NANOFORGE_HAVE_CUDA.
# Where no GPU is visible (CI), the backend is built for the CPU emulator of CUDA (emulator/,
# NANOFORGE_CUDA_EMULATION=AUTO|ON|OFF): the same .cu sources compiled as C++, linked against emulated CUDA
# runtime, cuBLASLt and NCCL libraries, so that every GPU test runs. Sets NANOFORGE_CUDA_EMULATED, and
# NANOFORGE_CUDA_RUNTIME to the runtime library targets link (the static CUDA runtime, or the emulator).
include(CheckLanguage)
set(NANOFORGE_CUDA_EMULATION "AUTO" CACHE STRING
    "Build the CUDA backend for the CPU emulator of CUDA: AUTO (when no GPU is visible), ON, OFF")
set_property(CACHE NANOFORGE_CUDA_EMULATION PROPERTY STRINGS AUTO ON OFF)
option(NANOFORGE_CUDA_COMPILE_CHECK
       "In an emulation build, also compile kernels/cuda with nvcc for CMAKE_CUDA_ARCHITECTURES (not linked)" ON)
set(NANOFORGE_HAVE_CUDA OFF)
set(NANOFORGE_CUDA_EMULATED OFF)
if(NOT NANOFORGE_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
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
    set(NANOFORGE_HAVE_CUDA ON)
    # NCCL ships inside the CUDA toolkit on Debian's CUDA install, without CMake config files; elsewhere
    # give -DNANOFORGE_NCCL_LIBRARY=... -DNANOFORGE_NCCL_INCLUDE_DIR=...
    find_library(NANOFORGE_NCCL_LIBRARY NAMES nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(NANOFORGE_NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(NANOFORGE_NCCL_LIBRARY AND NANOFORGE_NCCL_INCLUDE_DIR)
      set(_nccl_found TRUE)
    endif()
    nanoforge_require(_nccl_found "NCCL (with the CUDA backend)" libnccl-dev)
  elseif(NANOFORGE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "NANOFORGE_CUDA=ON but no CUDA compiler was found: put nvcc on PATH or set "
                        "CMAKE_CUDA_COMPILER, or configure with -DNANOFORGE_CUDA=OFF.")
  else()
    message(STATUS "nvcc not found: building without the CUDA backend (NANOFORGE_CUDA=AUTO)")
  endif()
endif()

if(NANOFORGE_HAVE_CUDA AND NOT NANOFORGE_CUDA_EMULATION STREQUAL "OFF")
  if(NANOFORGE_CUDA_EMULATION STREQUAL "ON")
    set(NANOFORGE_CUDA_EMULATED ON)
  else()
    execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE _nvidia_smi_status OUTPUT_VARIABLE _nvidia_smi_gpus
                    ERROR_QUIET)
    if(NOT _nvidia_smi_status EQUAL 0 OR NOT _nvidia_smi_gpus MATCHES "GPU [0-9]")
      set(NANOFORGE_CUDA_EMULATED ON)
      message(STATUS "No GPU visible (nvidia-smi -L): the CUDA backend runs on the CPU emulator of CUDA "
                     "(NANOFORGE_CUDA_EMULATION=AUTO; OFF builds it for a GPU)")
    endif()
  endif()
endif()

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
  set(NANOFORGE_CUDA_RUNTIME nanoforge_cuda_emulator)
  # nanoforge_nccl below: the emulated NCCL, and NVIDIA's nccl.h beside the other CUDA headers.
  set(NANOFORGE_NCCL_LIBRARY nanoforge_emulated_nccl)
  set(NANOFORGE_NCCL_INCLUDE_DIR ${CUDAToolkit_INCLUDE_DIRS})
elseif(NANOFORGE_HAVE_CUDA)
  set(NANOFORGE_CUDA_RUNTIME CUDA::cudart_static)
endif()
# NCCL for the targets that use it (dist/, doctor/): NVIDIA's library, or the emulated one.
if(NANOFORGE_HAVE_CUDA)
  add_library(nanoforge_nccl INTERFACE)
  target_include_directories(nanoforge_nccl SYSTEM INTERFACE ${NANOFORGE_NCCL_INCLUDE_DIR})
  target_link_libraries(nanoforge_nccl INTERFACE ${NANOFORGE_NCCL_LIBRARY})
endif()
