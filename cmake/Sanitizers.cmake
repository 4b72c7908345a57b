# NANOFORGE_SANITIZE=ON builds every C++ target with AddressSanitizer and UndefinedBehaviorSanitizer; `make
# test-sanitize` runs the gpu-labelled tests so, on the CUDA emulator, where device memory is host memory and
# every overrun of a kernel is an overrun ASan sees. Undefined behaviour stops the program that hit it.
option(NANOFORGE_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
if(NANOFORGE_SANITIZE)
  # GCC 12 warns of maybe-uninitialized variables inside the standard library under ASan (std::regex, std::function).
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined;-fno-sanitize-recover=undefined;-fno-omit-frame-pointer>"
    "$<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>")
  add_link_options(-fsanitize=address,undefined)
endif()
