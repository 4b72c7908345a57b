# mold as the linker of C and C++ programs where it is installed (scripts/install-deps.sh installs it): it
# links the 44 test programs and nanoforge in 1.5 s instead of GNU ld's 6.6 s (13.4 s in the
# AddressSanitizer tree; docs/build.md, "Where the build's time goes"). Programs nvcc links keep nvcc's
# choice. NANOFORGE_MOLD=OFF keeps the compiler's default linker.
option(NANOFORGE_MOLD "Link C and C++ programs with mold when it is installed" ON)
set(NANOFORGE_HAVE_MOLD OFF)
if(NANOFORGE_MOLD)
  find_program(NANOFORGE_MOLD_PROGRAM mold)
  if(NANOFORGE_MOLD_PROGRAM)
    add_link_options("$<$<LINK_LANGUAGE:C,CXX>:-fuse-ld=mold>")
    set(NANOFORGE_HAVE_MOLD ON)
  endif()
endif()
