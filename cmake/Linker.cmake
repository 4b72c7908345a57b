# mold as the linker of C and C++ programs where it is installed (scripts/install-deps.sh installs it): it
# links the 44 test programs and nanoforge in 1.5 s instead of GNU ld's 6.6 s (13.4 s in the
# AddressSanitizer tree; docs/build.md, "Where the build's time goes"). Programs nvcc links keep nvcc's
# choice. NANOFORGE_MOLD=OFF keeps the compiler's default linker.
# Used only where a test link with it succeeds: GCC 12 finds mold for -fuse-ld=mold, but a cross GCC looks for
# it under its target's prefix (aarch64-linux-gnu-ld.mold), which Debian's mold does not install; there mold's
# own `ld` (libexec/mold/ld, for compilers without -fuse-ld=mold) is put first with -B. Otherwise the
# compiler's default linker, and the configure output says why.
option(NANOFORGE_MOLD "Link C and C++ programs with mold when it is installed" ON)
set(NANOFORGE_HAVE_MOLD OFF)
if(NANOFORGE_MOLD)
  find_program(NANOFORGE_MOLD_PROGRAM mold NO_CMAKE_FIND_ROOT_PATH)
  if(NANOFORGE_MOLD_PROGRAM)
    include(CheckLinkerFlag)
    set(CMAKE_REQUIRED_QUIET ON)
    check_linker_flag(CXX "-fuse-ld=mold" NANOFORGE_MOLD_BY_FUSE_LD)
    set(_mold_options "")
    if(NANOFORGE_MOLD_BY_FUSE_LD)
      set(_mold_options "-fuse-ld=mold")
    else()
      get_filename_component(_mold_real "${NANOFORGE_MOLD_PROGRAM}" REALPATH)
      get_filename_component(_mold_prefix "${_mold_real}/../.." ABSOLUTE)
      if(EXISTS "${_mold_prefix}/libexec/mold/ld")
        check_linker_flag(CXX "-B${_mold_prefix}/libexec/mold" NANOFORGE_MOLD_BY_B_PREFIX)
        if(NANOFORGE_MOLD_BY_B_PREFIX)
          set(_mold_options "-B${_mold_prefix}/libexec/mold")
        endif()
      endif()
    endif()
    unset(CMAKE_REQUIRED_QUIET)
    if(_mold_options)
      add_link_options("$<$<LINK_LANGUAGE:C,CXX>:${_mold_options}>")
      set(NANOFORGE_HAVE_MOLD ON)
    else()
      message(STATUS "nanoforge linker: ${CMAKE_CXX_COMPILER} cannot link with ${NANOFORGE_MOLD_PROGRAM}: "
                     "using its default linker")
    endif()
  endif()
endif()
