# libFuzzer targets (tests/fuzz/, docs/fuzzing.md). With -DNANOFORGE_FUZZ=ON every library is compiled by
# clang with -fsanitize=fuzzer-no-link and NANOFORGE_SANITIZE=address,undefined (coverage for libFuzzer,
# memory and UB errors as crashes), and nanoforge_fuzz_target() links a target with libFuzzer's main and
# registers it with CTest under the label `fuzz`. Such a tree is for fuzzing only: CUDA off; `make fuzz` configures one in build-fuzz/.
option(NANOFORGE_FUZZ "Build the libFuzzer targets (clang only; instruments every library)" OFF)
if(NOT NANOFORGE_FUZZ)
  return()
endif()

if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "NANOFORGE_FUZZ needs clang (libFuzzer): configure with -DCMAKE_C_COMPILER=clang "
                      "-DCMAKE_CXX_COMPILER=clang++ (scripts/install-deps.sh installs clang with its runtimes).")
endif()
if(NANOFORGE_HAVE_CUDA)
  message(FATAL_ERROR "NANOFORGE_FUZZ builds the host code only: configure with -DNANOFORGE_CUDA=OFF.")
endif()

# A fuzz tree is a sanitized tree (cmake/Sanitizers.cmake, included after this file: AddressSanitizer and
# UndefinedBehaviorSanitizer, whose errors stop the process, a finding) with libFuzzer's coverage on top.
if(NOT NANOFORGE_SANITIZE)
  set(NANOFORGE_SANITIZE "address,undefined" CACHE STRING "" FORCE)
elseif(NOT NANOFORGE_SANITIZE MATCHES "address")
  message(FATAL_ERROR "NANOFORGE_FUZZ runs under AddressSanitizer: NANOFORGE_SANITIZE must include address "
                      "(it is ${NANOFORGE_SANITIZE}).")
endif()
add_compile_options(-fsanitize=fuzzer-no-link)

# Every fuzz target, built by `cmake --build ... --target nanoforge_fuzzers`.
add_custom_target(nanoforge_fuzzers)

# nanoforge_fuzz_target(NAME SOURCES file... CI_RUNS n [LIBRARIES lib...] [CORPUS dir] [DICT file])
# NAME is what the target reads (shard_hdf5, recipe, ...). Builds the executable fuzz_NAME from SOURCES (which
# define LLVMFuzzerTestOneInput), linked with libFuzzer, and registers two CTest tests, both running
# tests/fuzz/run_fuzz_target.sh from the seed corpus CORPUS (default tests/fuzz/corpus/NAME) with libFuzzer's
# dictionary DICT when given: fuzz.NAME (label `fuzz`) for FUZZ_SECONDS (from the environment), and
# fuzz_ci.NAME (label `fuzz_ci`, CI's stage) for exactly CI_RUNS inputs from seed 1. New inputs and crash
# artifacts go under the build tree (fuzz-work/NAME/, fuzz-ci-work/NAME/), never into the repository.
function(nanoforge_fuzz_target name)
  cmake_parse_arguments(ARG "" "CORPUS;DICT;CI_RUNS" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_CI_RUNS)
    message(FATAL_ERROR "nanoforge_fuzz_target(${name}): give CI_RUNS, the inputs CI's fuzz stage tries")
  endif()
  if(NOT ARG_CORPUS)
    set(ARG_CORPUS "${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/${name}")
  endif()
  set(executable fuzz_${name})
  add_executable(${executable} ${ARG_SOURCES})
  target_link_libraries(${executable} PRIVATE ${ARG_LIBRARIES})
  target_link_options(${executable} PRIVATE -fsanitize=fuzzer)
  set_target_properties(${executable} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/fuzz")
  add_dependencies(nanoforge_fuzzers ${executable})
  set(dict_argument "")
  if(ARG_DICT)
    set(dict_argument "-dict=${ARG_DICT}")
  endif()
  add_test(NAME fuzz.${name}
           COMMAND ${PROJECT_SOURCE_DIR}/tests/fuzz/run_fuzz_target.sh $<TARGET_FILE:${executable}>
                   "${ARG_CORPUS}" "${CMAKE_BINARY_DIR}/fuzz-work/${name}" ${dict_argument})
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz)
  add_test(NAME fuzz_ci.${name}
           COMMAND ${PROJECT_SOURCE_DIR}/tests/fuzz/run_fuzz_target.sh $<TARGET_FILE:${executable}>
                   "${ARG_CORPUS}" "${CMAKE_BINARY_DIR}/fuzz-ci-work/${name}" ${dict_argument})
  set_tests_properties(fuzz_ci.${name} PROPERTIES LABELS fuzz_ci ENVIRONMENT "FUZZ_RUNS=${ARG_CI_RUNS};FUZZ_SEED=1")
endfunction()
