# Apache Arrow's C++ parquet reader, an optional dependency. Debian 12 packages no libarrow, so it is taken
# from the pyarrow wheel of the Python that CMake finds (Python3_EXECUTABLE; `make` points it at the build
# tree's environment, which scripts/install-deps.sh fills): its headers and its shared libraries, linked by
# path with their folder in the RUNPATH. A link test checks that the wheel's C++ ABI (the new std::string,
# libstdc++) matches this compiler's. Without it everything builds and parquet input is refused at run time
# (data/documents/parquet_documents_unavailable.cpp). NANOFORGE_HAVE_PARQUET says which.
set(NANOFORGE_PARQUET "AUTO" CACHE STRING "Parquet input through pyarrow's Arrow C++: AUTO, ON (required), OFF")
set_property(CACHE NANOFORGE_PARQUET PROPERTY STRINGS AUTO ON OFF)
# The reader uses the arrow::Result forms of FileReader::Make and ReadRowGroup (Arrow 24).
set(NANOFORGE_ARROW_MIN_MAJOR 24)

set(NANOFORGE_HAVE_PARQUET OFF)
set(NANOFORGE_PARQUET_WHY "NANOFORGE_PARQUET=OFF")
if(NOT NANOFORGE_PARQUET STREQUAL "OFF")
  find_package(Python3 COMPONENTS Interpreter)
  set(NANOFORGE_PARQUET_WHY "no python3 found")
  if(Python3_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c
              "import pyarrow; print(pyarrow.get_include()); print(pyarrow.get_library_dirs()[0]); print(pyarrow.__version__)"
      OUTPUT_VARIABLE _pyarrow_out ERROR_VARIABLE _pyarrow_err RESULT_VARIABLE _pyarrow_rc
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(NANOFORGE_PARQUET_WHY "${Python3_EXECUTABLE} cannot import pyarrow")
  endif()
  if(Python3_FOUND AND _pyarrow_rc EQUAL 0)
    string(REPLACE "\n" ";" _pyarrow_out "${_pyarrow_out}")
    list(GET _pyarrow_out 0 NANOFORGE_ARROW_INCLUDE_DIR)
    list(GET _pyarrow_out 1 NANOFORGE_ARROW_LIBRARY_DIR)
    list(GET _pyarrow_out 2 NANOFORGE_ARROW_VERSION)
    # The wheel ships versioned sonames only (libarrow.so.2500), no libarrow.so link.
    file(GLOB _arrow_libraries "${NANOFORGE_ARROW_LIBRARY_DIR}/libarrow.so.[0-9]*")
    file(GLOB _parquet_libraries "${NANOFORGE_ARROW_LIBRARY_DIR}/libparquet.so.[0-9]*")
    list(SORT _arrow_libraries)
    list(SORT _parquet_libraries)
    if(NANOFORGE_ARROW_VERSION VERSION_LESS NANOFORGE_ARROW_MIN_MAJOR)
      set(NANOFORGE_PARQUET_WHY "pyarrow ${NANOFORGE_ARROW_VERSION} is older than ${NANOFORGE_ARROW_MIN_MAJOR}")
    elseif(NOT _arrow_libraries OR NOT _parquet_libraries
           OR NOT EXISTS "${NANOFORGE_ARROW_INCLUDE_DIR}/parquet/arrow/reader.h")
      set(NANOFORGE_PARQUET_WHY "pyarrow ${NANOFORGE_ARROW_VERSION} has no C++ headers or libraries")
    else()
      list(GET _arrow_libraries 0 NANOFORGE_ARROW_LIBRARY)
      list(GET _parquet_libraries 0 NANOFORGE_PARQUET_LIBRARY)
      include(CheckCXXSourceCompiles)
      set(CMAKE_REQUIRED_INCLUDES "${NANOFORGE_ARROW_INCLUDE_DIR}")
      set(CMAKE_REQUIRED_LIBRARIES "${NANOFORGE_PARQUET_LIBRARY};${NANOFORGE_ARROW_LIBRARY}")
      set(CMAKE_REQUIRED_LINK_OPTIONS "-Wl,-rpath,${NANOFORGE_ARROW_LIBRARY_DIR}")
      set(CMAKE_REQUIRED_QUIET ON)
      # Links only if the library's std::string (and so its C++ ABI) is this compiler's.
      check_cxx_source_compiles([[
        #include <parquet/file_reader.h>
        int main(int argc, char** argv) {
          if (argc > 5) parquet::ParquetFileReader::OpenFile(std::string(argv[0]));
          return 0;
        }]] NANOFORGE_ARROW_ABI_MATCHES_${NANOFORGE_ARROW_VERSION})
      unset(CMAKE_REQUIRED_INCLUDES)
      unset(CMAKE_REQUIRED_LIBRARIES)
      unset(CMAKE_REQUIRED_LINK_OPTIONS)
      unset(CMAKE_REQUIRED_QUIET)
      if(NANOFORGE_ARROW_ABI_MATCHES_${NANOFORGE_ARROW_VERSION})
        set(NANOFORGE_HAVE_PARQUET ON)
        set(NANOFORGE_PARQUET_WHY "pyarrow ${NANOFORGE_ARROW_VERSION} in ${NANOFORGE_ARROW_LIBRARY_DIR}")
      else()
        set(NANOFORGE_PARQUET_WHY "pyarrow ${NANOFORGE_ARROW_VERSION}'s C++ libraries do not link with this "
                                  "compiler (another C++ ABI?)")
      endif()
    endif()
  endif()
endif()

if(NANOFORGE_PARQUET STREQUAL "ON" AND NOT NANOFORGE_HAVE_PARQUET)
  message(FATAL_ERROR "NANOFORGE_PARQUET=ON but: ${NANOFORGE_PARQUET_WHY}. Run scripts/install-deps.sh BUILD_DIR "
                      "(pyarrow into BUILD_DIR/python) and configure with "
                      "-DPython3_EXECUTABLE=BUILD_DIR/python/bin/python3.")
endif()

add_library(nanoforge_arrow INTERFACE)
if(NANOFORGE_HAVE_PARQUET)
  target_include_directories(nanoforge_arrow SYSTEM INTERFACE ${NANOFORGE_ARROW_INCLUDE_DIR})
  target_link_libraries(nanoforge_arrow INTERFACE ${NANOFORGE_PARQUET_LIBRARY} ${NANOFORGE_ARROW_LIBRARY})
  target_link_options(nanoforge_arrow INTERFACE "LINKER:-rpath,${NANOFORGE_ARROW_LIBRARY_DIR}")
endif()
message(STATUS "nanoforge parquet input: ${NANOFORGE_HAVE_PARQUET} (${NANOFORGE_PARQUET_WHY})")
