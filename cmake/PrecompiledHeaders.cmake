# Precompiled headers: the library headers and standard headers nearly every product file includes (fmt,
# Abseil's Status, the containers), compiled once per tree in nanoforge_support and reused by the other C++
# libraries and the program; the test executables share another one with GoogleTest on top
# (tests/CMakeLists.txt). Measured in docs/build.md ("Where the build's time goes"). A target whose flags
# make GCC refuse the shared header (-Winvalid-pch says so) still compiles, only without it. With clang (the
# fuzz tree), whose precompiled headers must match every flag exactly, the product uses none.
set(NANOFORGE_PRODUCT_PRECOMPILED_HEADERS
  <fmt/format.h> <absl/status/statusor.h> <absl/strings/str_cat.h> <algorithm> <chrono> <cstdint> <cstring>
  <filesystem> <fstream> <functional> <map> <memory> <optional> <span> <string> <string_view> <vector>)

set(NANOFORGE_PRODUCT_PCH OFF)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(NANOFORGE_PRODUCT_PCH ON)
endif()

# nanoforge_product_pch(DONOR): DONOR compiles the product's precompiled headers.
function(nanoforge_product_pch donor)
  if(NANOFORGE_PRODUCT_PCH)
    target_precompile_headers(${donor} PRIVATE ${NANOFORGE_PRODUCT_PRECOMPILED_HEADERS})
  endif()
endfunction()

# nanoforge_reuse_product_pch(TARGET...): each TARGET compiles with nanoforge_support's precompiled headers.
function(nanoforge_reuse_product_pch)
  if(NANOFORGE_PRODUCT_PCH)
    foreach(target IN LISTS ARGN)
      target_precompile_headers(${target} REUSE_FROM nanoforge_support)
    endforeach()
  endif()
endfunction()
