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
  elseif(NANOFORGE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "NANOFORGE_CUDA=ON but no CUDA compiler was found: put nvcc on PATH or set "
                        "CMAKE_CUDA_COMPILER, or configure with -DNANOFORGE_CUDA=OFF.")
  else()
    message(STATUS "nvcc not found: building without the CUDA backend (NANOFORGE_CUDA=AUTO)")
  endif()
endif()
