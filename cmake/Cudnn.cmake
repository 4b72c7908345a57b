# cuDNN's fused attention (kernels/cuda/cudnn_attention.cpp), optional: built into the real GPU build (never
# the emulated one, as the CUDA emulator has no cuDNN) and only where both halves are found:
#  - cuDNN 9 itself (cudnn.h and libcudnn), in the CUDA toolkit or given with -DNANOFORGE_CUDNN_INCLUDE_DIR
#    and -DNANOFORGE_CUDNN_LIBRARY;
#  - NVIDIA's header-only C++ frontend (cudnn_frontend.h), from the PyPI wheel nvidia-cudnn-frontend that
#    scripts/install-deps.sh puts into the build tree's Python (scripts/python-headers-requirements.txt pins
#    it), or given with -DNANOFORGE_CUDNN_FRONTEND_INCLUDE_DIR.
# Sets NANOFORGE_HAVE_CUDNN and the target nanoforge_cudnn. Without it `model.attention=auto` runs flash.
set(NANOFORGE_CUDNN "AUTO" CACHE STRING "cuDNN fused attention: AUTO (when found), ON (required), OFF")
set_property(CACHE NANOFORGE_CUDNN PROPERTY STRINGS AUTO ON OFF)
set(NANOFORGE_CUDNN_FRONTEND_INCLUDE_DIR "" CACHE PATH
    "Folder holding cudnn_frontend.h (default: the nvidia-cudnn-frontend wheel of the build tree's Python)")
# The graph API's SDPA with diagonal-band masks, GQA and bf16 backward: cuDNN 9.
set(NANOFORGE_CUDNN_MIN_VERSION 9.0)
# The frontend the code was written against (its diagonal-band attributes and error_t API).
set(NANOFORGE_CUDNN_FRONTEND_MIN_VERSION 1.32)

# out = "major.minor.patch" from the three `#define NAME number` lines of a header.
function(nanoforge_header_version out header)
  set(_parts "")
  foreach(_name IN LISTS ARGN)
    file(STRINGS "${header}" _line REGEX "^#define ${_name} +[0-9]+")
    string(REGEX MATCH "[0-9]+$" _number "${_line}")
    list(APPEND _parts "${_number}")
  endforeach()
  list(JOIN _parts "." _version)
  set(${out} "${_version}" PARENT_SCOPE)
endfunction()

set(NANOFORGE_HAVE_CUDNN OFF)
set(NANOFORGE_CUDNN_WHY "NANOFORGE_CUDNN=OFF")
if(NOT NANOFORGE_CUDNN STREQUAL "OFF")
  if(NOT NANOFORGE_HAVE_CUDA)
    set(NANOFORGE_CUDNN_WHY "no CUDA backend")
  elseif(NOT NANOFORGE_CUDA_REAL)
    set(NANOFORGE_CUDNN_WHY "no real GPU build (NANOFORGE_CUDA_EMULATION=ONLY): the emulator has no cuDNN")
  else()
    find_path(NANOFORGE_CUDNN_INCLUDE_DIR NAMES cudnn_version.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(NANOFORGE_CUDNN_LIBRARY NAMES cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(NOT NANOFORGE_CUDNN_INCLUDE_DIR OR NOT NANOFORGE_CUDNN_LIBRARY)
      string(CONCAT NANOFORGE_CUDNN_WHY "cuDNN not found (cudnn_version.h, libcudnn): give -DNANOFORGE_CUDNN_INCLUDE_DIR and "
                              "-DNANOFORGE_CUDNN_LIBRARY")
    else()
      nanoforge_header_version(NANOFORGE_CUDNN_VERSION "${NANOFORGE_CUDNN_INCLUDE_DIR}/cudnn_version.h"
                               CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL)
      if(NANOFORGE_CUDNN_VERSION VERSION_LESS NANOFORGE_CUDNN_MIN_VERSION)
        set(NANOFORGE_CUDNN_WHY "cuDNN ${NANOFORGE_CUDNN_VERSION} is older than ${NANOFORGE_CUDNN_MIN_VERSION}")
      else()
        if(NOT NANOFORGE_CUDNN_FRONTEND_INCLUDE_DIR)
          find_package(Python3 COMPONENTS Interpreter)
          if(Python3_FOUND)
            # The wheel installs its headers as site-packages/include/; its file list says where.
            execute_process(
              COMMAND ${Python3_EXECUTABLE} -c
                      "import importlib.metadata as m, os; f = [p for p in m.files('nvidia-cudnn-frontend') if str(p) == 'include/cudnn_frontend.h']; print(os.path.dirname(f[0].locate()))"
              OUTPUT_VARIABLE _frontend_dir ERROR_QUIET RESULT_VARIABLE _frontend_rc
              OUTPUT_STRIP_TRAILING_WHITESPACE)
            if(_frontend_rc EQUAL 0)
              set(_frontend_include "${_frontend_dir}")
            endif()
          endif()
        else()
          set(_frontend_include "${NANOFORGE_CUDNN_FRONTEND_INCLUDE_DIR}")
        endif()
        if(NOT _frontend_include OR NOT EXISTS "${_frontend_include}/cudnn_frontend_version.h")
          string(CONCAT NANOFORGE_CUDNN_WHY "no cuDNN frontend headers: run scripts/install-deps.sh BUILD_DIR/python (the "
                                  "nvidia-cudnn-frontend wheel) or give -DNANOFORGE_CUDNN_FRONTEND_INCLUDE_DIR")
        else()
          nanoforge_header_version(NANOFORGE_CUDNN_FRONTEND_VERSION "${_frontend_include}/cudnn_frontend_version.h"
                                   CUDNN_FRONTEND_MAJOR_VERSION CUDNN_FRONTEND_MINOR_VERSION
                                   CUDNN_FRONTEND_PATCH_VERSION)
          if(NANOFORGE_CUDNN_FRONTEND_VERSION VERSION_LESS NANOFORGE_CUDNN_FRONTEND_MIN_VERSION)
            string(CONCAT NANOFORGE_CUDNN_WHY "the cuDNN frontend in ${_frontend_include} is ${NANOFORGE_CUDNN_FRONTEND_VERSION},"
                                    " older than ${NANOFORGE_CUDNN_FRONTEND_MIN_VERSION}")
          else()
            set(NANOFORGE_HAVE_CUDNN ON)
            string(CONCAT NANOFORGE_CUDNN_WHY "cuDNN ${NANOFORGE_CUDNN_VERSION} (${NANOFORGE_CUDNN_LIBRARY}), frontend "
                                    "${NANOFORGE_CUDNN_FRONTEND_VERSION} (${_frontend_include})")
          endif()
        endif()
      endif()
    endif()
  endif()
endif()

if(NANOFORGE_CUDNN STREQUAL "ON" AND NOT NANOFORGE_HAVE_CUDNN)
  message(FATAL_ERROR "NANOFORGE_CUDNN=ON but: ${NANOFORGE_CUDNN_WHY}")
endif()

if(NANOFORGE_HAVE_CUDNN)
  add_library(nanoforge_cudnn INTERFACE)
  target_include_directories(nanoforge_cudnn SYSTEM INTERFACE "${_frontend_include}" "${NANOFORGE_CUDNN_INCLUDE_DIR}")
  # The frontend's experimental RMSNorm+SiLU engine compiles kernels with NVRTC, so the headers call it.
  # libnvrtc itself, not CUDA::nvrtc, which also links the driver's libcuda.so: a program that needs
  # libcuda.so.1 does not start where no NVIDIA driver is installed (a login node), and the CUDA runtime
  # loads the driver when it needs it.
  find_library(NANOFORGE_NVRTC_LIBRARY NAMES nvrtc HINTS ${CUDAToolkit_LIBRARY_DIR})
  nanoforge_require(NANOFORGE_NVRTC_LIBRARY "NVRTC (cuDNN's frontend calls it)" "the CUDA toolkit's nvrtc")
  target_link_libraries(nanoforge_cudnn INTERFACE "${NANOFORGE_CUDNN_LIBRARY}" "${NANOFORGE_NVRTC_LIBRARY}")
  target_compile_definitions(nanoforge_cudnn INTERFACE
    NANOFORGE_CUDNN_DESCRIPTION="cuDNN frontend ${NANOFORGE_CUDNN_FRONTEND_VERSION}")
endif()
message(STATUS "nanoforge cuDNN attention: ${NANOFORGE_HAVE_CUDNN} (${NANOFORGE_CUDNN_WHY})")
