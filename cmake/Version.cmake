# Version facts baked into the binary (nanoforge --version, bench JSON, later checkpoints): the project
# version and the git commit of the source tree ("-dirty" with uncommitted changes). The commit is read at
# every build, not only at configure time, so a binary never reports a stale commit; the generated file is
# rewritten only when its content changes, so an unchanged tree relinks nothing.
set(NANOFORGE_VERSION_CPP "${PROJECT_BINARY_DIR}/generated/version_info.cpp")
add_custom_target(nanoforge_version_info
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${NANOFORGE_VERSION_CPP}
          -DVERSION=${PROJECT_VERSION} -P ${PROJECT_SOURCE_DIR}/cmake/WriteVersion.cmake
  BYPRODUCTS ${NANOFORGE_VERSION_CPP}
  COMMENT "Reading the git commit for nanoforge --version")
