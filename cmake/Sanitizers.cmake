# NANOFORGE_SANITIZE=address,undefined (or thread, or any list -fsanitize= takes) builds every C and C++ file
# of this tree and links every program with those sanitizers, in any build tree (CPU-only or with CUDA, whose
# device code is not instrumented: compute-sanitizer checks that). Errors stop the program
# (-fno-sanitize-recover), so a finding fails the test that caused it. Every program also gets
# tools/dev/sanitizers/options.cpp: the run-time options and the committed suppressions files, without any
# environment. `make sanitize` runs the test suite in such a tree (docs/build.md).
set(NANOFORGE_SANITIZE "" CACHE STRING
    "Sanitizers to build with, as -fsanitize= takes them (e.g. address,undefined); empty: none")
if(NOT NANOFORGE_SANITIZE)
  return()
endif()

# -O1 -g1 after the build type's flags (the last of each wins): the optimisation AddressSanitizer's manual
# advises and line tables for the reports' file:line, which compile in about half the time of -O2 -g (an
# emulated attention kernel: 31 s against 71 s), so that both sanitizer stages fit in CI's time.
set(_sanitize_flags -fsanitize=${NANOFORGE_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -g1)
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_sanitize_flags}>")
# GCC 12 warns of maybe-uninitialized variables inside the standard library under ASan (std::regex,
# std::function): noise, not findings. (clang has no such warning.)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>")
endif()
if(CMAKE_CUDA_COMPILER)
  # The host half of .cu files, through nvcc's host compiler.
  string(REPLACE ";" "," _sanitize_host_flags "${_sanitize_flags}")
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_sanitize_host_flags}>")
endif()
add_link_options("$<$<LINK_LANGUAGE:C,CXX>:-fsanitize=${NANOFORGE_SANITIZE}>")
message(STATUS "nanoforge: sanitizers ${NANOFORGE_SANITIZE} (run-time options: tools/dev/sanitizers/)")

# The options file, compiled once for the tree (its one absolute path, the suppressions' folder, stays off
# every other compile line), and its object added to every executable under `directory` once all of them
# are defined.
add_library(nanoforge_sanitizer_options OBJECT ${PROJECT_SOURCE_DIR}/tools/dev/sanitizers/options.cpp)
target_compile_definitions(nanoforge_sanitizer_options PRIVATE
                           NANOFORGE_SANITIZER_DIR="${PROJECT_SOURCE_DIR}/tools/dev/sanitizers")
function(nanoforge_add_sanitizer_options directory)
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "EXECUTABLE")
      target_sources(${target} PRIVATE $<TARGET_OBJECTS:nanoforge_sanitizer_options>)
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    nanoforge_add_sanitizer_options(${subdirectory})
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL nanoforge_add_sanitizer_options ${PROJECT_SOURCE_DIR})
