# ccache as the C, C++ and CUDA compiler launcher of every build tree (docs/build.md, "Compiler cache").
# The cache lives outside the clone (NANOFORGE_CCACHE_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/
# nanoforge-ccache), because CI builds a fresh clone each time: a cache inside it would always be cold.
# base_dir is this clone and hash_dir is off, so an object made in one clone is a hit in another at any
# path; __FILE__ is mapped to the path inside the repository (both the absolute form and the relative form
# that ccache's base_dir rewriting hands the compiler), so messages read the same with and without ccache.
# Without ccache the build works, only slower; NANOFORGE_CCACHE=ON makes a missing ccache an error.
set(NANOFORGE_CCACHE "AUTO" CACHE STRING "Compile through ccache: AUTO (when found), ON (required), OFF")
set_property(CACHE NANOFORGE_CCACHE PROPERTY STRINGS AUTO ON OFF)

# __FILE__ and std::source_location as paths inside the repository, in every tree: the absolute source path
# (a compiler run directly) and the path relative to the build tree (what ccache's base_dir rewriting hands
# the compiler). nvcc gets only the one it sees: ccache hashes -Xcompiler values, and a clone's absolute
# path there would make every CUDA object a miss in the next clone.
file(RELATIVE_PATH _source_from_build "${CMAKE_BINARY_DIR}" "${PROJECT_SOURCE_DIR}")
string(REGEX REPLACE "/$" "" _source_from_build "${_source_from_build}")
set(_absolute_file_prefix_map "-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=")
set(_relative_file_prefix_map "")
if(_source_from_build)
  set(_relative_file_prefix_map "-fmacro-prefix-map=${_source_from_build}/=")
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_absolute_file_prefix_map};${_relative_file_prefix_map}>")

# The prefix map nvcc's host compiler gets (below: the relative one where ccache rewrites the paths).
macro(nanoforge_cuda_file_prefix_map map)
  if(CMAKE_CUDA_COMPILER AND NOT "${map}" STREQUAL "")
    add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${map}>")
  endif()
endmacro()

set(NANOFORGE_HAVE_CCACHE OFF)
if(NANOFORGE_CCACHE STREQUAL "OFF")
  nanoforge_cuda_file_prefix_map("${_absolute_file_prefix_map}")
  return()
endif()
find_program(NANOFORGE_CCACHE_PROGRAM ccache)
if(NOT NANOFORGE_CCACHE_PROGRAM)
  if(NANOFORGE_CCACHE STREQUAL "ON")
    message(FATAL_ERROR "NANOFORGE_CCACHE=ON but ccache was not found: install it (Debian: apt-get install "
                        "ccache, or scripts/install-deps.sh) or configure with -DNANOFORGE_CCACHE=OFF.")
  endif()
  message(STATUS "nanoforge compiler cache: OFF (ccache not found; scripts/install-deps.sh installs it)")
  nanoforge_cuda_file_prefix_map("${_absolute_file_prefix_map}")
  return()
endif()

if(DEFINED ENV{NANOFORGE_CCACHE_DIR})
  set(_default_ccache_dir "$ENV{NANOFORGE_CCACHE_DIR}")
elseif(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(_default_ccache_dir "$ENV{XDG_CACHE_HOME}/nanoforge-ccache")
else()
  set(_default_ccache_dir "$ENV{HOME}/.cache/nanoforge-ccache")
endif()
set(NANOFORGE_CCACHE_DIR "${_default_ccache_dir}" CACHE PATH "ccache's folder (keep it outside the clone)")
# A whole CI run (five trees) stores about 1.5 GB; 5 GB keeps a few commits' worth.
set(NANOFORGE_CCACHE_MAX_SIZE "5G" CACHE STRING "ccache's size limit (ccache's max_size)")

# pch_defines and time_macros: the precompiled headers of the test targets (tests/CMakeLists.txt), which
# ccache caches only with both; include_file_ctime/mtime: a fresh clone's files are all new, and their
# contents, not their times, decide a hit.
set(_ccache_settings
  "CCACHE_DIR=${NANOFORGE_CCACHE_DIR}"
  "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}"
  "CCACHE_NOHASHDIR=1"
  "CCACHE_MAXSIZE=${NANOFORGE_CCACHE_MAX_SIZE}"
  "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_ctime,include_file_mtime")
set(_launcher ${CMAKE_COMMAND} -E env ${_ccache_settings} ${NANOFORGE_CCACHE_PROGRAM})
foreach(_language C CXX CUDA)
  if(NOT CMAKE_${_language}_COMPILER_LAUNCHER)
    set(CMAKE_${_language}_COMPILER_LAUNCHER ${_launcher})
  endif()
endforeach()
nanoforge_cuda_file_prefix_map("${_relative_file_prefix_map}")
set(NANOFORGE_HAVE_CCACHE ON)
message(STATUS "nanoforge compiler cache: ${NANOFORGE_CCACHE_PROGRAM} in ${NANOFORGE_CCACHE_DIR} "
               "(at most ${NANOFORGE_CCACHE_MAX_SIZE})")
