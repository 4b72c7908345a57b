# The CUDA backend: built when NANOFORGE_CUDA is ON, or AUTO and nvcc is found. Sets NANOFORGE_HAVE_CUDA.
# CI has the toolkit but no GPU: everything compiles and links there, and GPU tests skip at run time.
include(CheckLanguage)
set(NANOFORGE_HAVE_CUDA OFF)
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
    add_library(nanoforge_nccl INTERFACE)
    target_include_directories(nanoforge_nccl SYSTEM INTERFACE ${NANOFORGE_NCCL_INCLUDE_DIR})
    target_link_libraries(nanoforge_nccl INTERFACE ${NANOFORGE_NCCL_LIBRARY})
  elseif(NANOFORGE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "NANOFORGE_CUDA=ON but no CUDA compiler was found: put nvcc on PATH or set "
                        "CMAKE_CUDA_COMPILER, or configure with -DNANOFORGE_CUDA=OFF.")
  else()
    message(STATUS "nvcc not found: building without the CUDA backend (NANOFORGE_CUDA=AUTO)")
  endif()
endif()
