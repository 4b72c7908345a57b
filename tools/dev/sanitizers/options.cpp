// Run-time options of the sanitizers, compiled into every program of a tree configured with
// NANOFORGE_SANITIZE (cmake/Sanitizers.cmake), so that ctest, a test's child process, mpirun's ranks and a
// run by hand all get them without any environment; ASAN_OPTIONS and friends still override them. The
// suppressions files next to this one say why each entry is there. NANOFORGE_SANITIZER_DIR is this folder,
// set by CMake.

extern "C" {

const char* __asan_default_options() {
  // Errors stop the program (the test fails); global initialisation order is checked too.
  return "halt_on_error=1:check_initialization_order=1:strict_init_order=1:detect_leaks=1";
}

const char* __lsan_default_options() {
  return "suppressions=" NANOFORGE_SANITIZER_DIR "/lsan.supp:print_suppressions=0";
}

const char* __ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1:suppressions=" NANOFORGE_SANITIZER_DIR "/ubsan.supp";
}

const char* __tsan_default_options() {
  return "halt_on_error=1:second_deadlock_stack=1:suppressions=" NANOFORGE_SANITIZER_DIR "/tsan.supp";
}

}  // extern "C"

#if defined(__SANITIZE_ADDRESS__)
// Open MPI 4.1 and PMIx unload their plugins (mca_*.so, and libpmix with them) at MPI_Finalize, before
// LeakSanitizer looks at exit: the allocations they leave then have stacks of "<unknown module>" frames, or
// of whatever library was mapped at the same address later, and no suppression can name them (Open MPI 5 has
// a parameter to keep plugins loaded; 4.1 has none). A program of this tree, which exits soon after, keeps
// every library it opened mapped instead: its dlclose does nothing.
extern "C" int dlclose(void*) {
  return 0;
}
#endif
