# Script mode (cmake -P): writes OUTPUT, a C++ file defining the version strings, from VERSION and the git
# state of SOURCE_DIR. configure_file leaves OUTPUT untouched when nothing changed.
set(GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --dirty --abbrev=12
                  WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE _describe OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _describe)
    set(GIT_COMMIT "${_describe}")
  endif()
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/version_info.cpp.in ${OUTPUT} @ONLY)
