# Which CUDA toolkits nanoforge builds with, checked before nvcc compiles anything (cmake/Cuda.cmake): CUDA
# 12.4 is the floor, as the FP8 matrix multiplies use mma.sync.m16n8k32 on e4m3/e5m2 operands (PTX ISA 8.4,
# kernels/cuda/mma_ptx.cuh), which older ptxas rejects; the DGX Spark's GB10 (sm_121) needs CUDA 12.9. Plain
# functions, so that tests/build/ checks them in CMake's script mode with stand-in nvcc programs.

set(NANOFORGE_CUDA_MIN_VERSION 12.4)
set(NANOFORGE_CUDA_GB10_MIN_VERSION 12.9)

# out = "major.minor" of the CUDA release `nvcc --version` names, or "" when it names none.
function(nanoforge_nvcc_version out nvcc)
  execute_process(COMMAND "${nvcc}" --version OUTPUT_VARIABLE _text ERROR_QUIET RESULT_VARIABLE _status)
  set(_version "")
  if(_status EQUAL 0 AND _text MATCHES "release ([0-9]+\\.[0-9]+)")
    set(_version "${CMAKE_MATCH_1}")
  endif()
  set(${out} "${_version}" PARENT_SCOPE)
endfunction()

# nanoforge_cuda_architectures(OUT NVCC REQUESTED): the architectures to build with NVCC: REQUESTED when it is
# not empty (a release too old for one of them stops, saying so), else the defaults of NVCC's release, 90
# (H100/H200) and 121 (GB10) from 12.9, 90 alone before it (saying why). A release below the floor stops with
# what needs it and how to fix it. Sets NANOFORGE_CUDA_VERSION in the caller.
function(nanoforge_cuda_architectures out nvcc requested)
  nanoforge_nvcc_version(_version "${nvcc}")
  if(NOT _version)
    message(FATAL_ERROR "${nvcc} --version does not say which CUDA release it is: is it nvcc? Set "
                        "CMAKE_CUDA_COMPILER to the nvcc of CUDA ${NANOFORGE_CUDA_MIN_VERSION} or newer.")
  endif()
  if(_version VERSION_LESS NANOFORGE_CUDA_MIN_VERSION)
    message(FATAL_ERROR
      "nanoforge needs CUDA ${NANOFORGE_CUDA_MIN_VERSION} or newer, and ${nvcc} is CUDA ${_version}: the FP8 "
      "matrix multiplies use mma.sync.m16n8k32 on e4m3/e5m2 operands (PTX ISA 8.4, kernels/cuda/mma_ptx.cuh), "
      "which older ptxas rejects. Install CUDA ${NANOFORGE_CUDA_MIN_VERSION}+ (${NANOFORGE_CUDA_GB10_MIN_VERSION}+ "
      "for the DGX Spark) and put its nvcc on PATH or give -DCMAKE_CUDA_COMPILER=.../bin/nvcc, or build "
      "without the CUDA backend: -DNANOFORGE_CUDA=OFF.")
  endif()
  string(CONCAT _gb10_sentence "the DGX Spark's GB10 (sm_121) needs CUDA ${NANOFORGE_CUDA_GB10_MIN_VERSION} "
                "or newer, and ${nvcc} is CUDA ${_version}")
  if(NOT requested)
    if(_version VERSION_LESS NANOFORGE_CUDA_GB10_MIN_VERSION)
      set(requested 90)
      message(STATUS "nanoforge: building for sm_90 only: ${_gb10_sentence}")
    else()
      set(requested "90;121")
    endif()
  elseif(_version VERSION_LESS NANOFORGE_CUDA_GB10_MIN_VERSION)
    foreach(_architecture IN LISTS requested)
      if(_architecture MATCHES "^12[01]")
        message(FATAL_ERROR
          "CMAKE_CUDA_ARCHITECTURES=${requested}: ${_gb10_sentence}. Install CUDA "
          "${NANOFORGE_CUDA_GB10_MIN_VERSION}+, or build for the other architectures (e.g. "
          "-DCMAKE_CUDA_ARCHITECTURES=90).")
      endif()
    endforeach()
  endif()
  set(${out} "${requested}" PARENT_SCOPE)
  set(NANOFORGE_CUDA_VERSION "${_version}" PARENT_SCOPE)
endfunction()
