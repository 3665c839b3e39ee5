# HERD_SANITIZE: builds every herd target (libraries, tests, tools) with the
# compiler's sanitizers, for the checking builds that scripts/test.sh runs
# (docs/testing.md):
#   address,undefined  AddressSanitizer and UndefinedBehaviorSanitizer
#   thread             ThreadSanitizer
#   (empty)            none, the default
# Undefined behaviour aborts the program instead of printing and going on, so
# a test that meets it fails. Frame pointers stay in for whole stack traces.
#
# ctest in such a build folder runs every test with the sanitizers' options
# (and, under ASan, the leak suppressions for Open MPI in tests/sanitizers/)
# in its environment: the file below sets them when ctest reads the folder's
# tests, unless the caller's environment sets them already.
set(HERD_SANITIZE "" CACHE STRING "Sanitizers for every herd target: address,undefined, thread, or empty for none")
set_property(CACHE HERD_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")

if(HERD_SANITIZE STREQUAL "")
  return()
endif()
if(NOT HERD_SANITIZE MATCHES "^(address,undefined|thread)$")
  message(FATAL_ERROR "HERD_SANITIZE is '${HERD_SANITIZE}'; it takes address,undefined, thread or nothing")
endif()
if(HERD_CUDA)
  message(FATAL_ERROR "HERD_SANITIZE builds are host-only: configure them with -DHERD_WITH_CUDA=OFF")
endif()

set(herd_sanitize_flags -fsanitize=${HERD_SANITIZE} -fno-omit-frame-pointer)
if(HERD_SANITIZE MATCHES "undefined")
  list(APPEND herd_sanitize_flags -fno-sanitize-recover=undefined)
endif()
# Directory-wide, so that every target defined after this point gets them.
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${herd_sanitize_flags}>")
add_link_options("$<$<LINK_LANGUAGE:C,CXX>:-fsanitize=${HERD_SANITIZE}>")

set(herd_sanitizer_dir ${PROJECT_SOURCE_DIR}/tests/sanitizers)
if(HERD_SANITIZE STREQUAL "thread")
  # No suppressions: the TSan tests do not call MPI, and herd's own races
  # are fixed, not hidden.
  set(herd_sanitizer_env "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1")
else()
  # The tests under mpirun (tests/mpi) unwind allocation stacks in full
  # (fast_unwind_on_malloc=0): Open MPI's libraries have no frame pointers,
  # so the fast unwinder stops in them, often in a plugin that MPI_Finalize
  # has unloaded, and a leak suppression (tests/sanitizers/lsan.supp) could
  # not see that MPI made it. The others keep the fast unwinder: full
  # unwinding makes every allocation some twenty times slower.
  set(HERD_ASAN_MPI_OPTIONS
      "ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:check_initialization_order=1:strict_init_order=1")
  set(herd_sanitizer_env
      "ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1:strict_init_order=1"
      "LSAN_OPTIONS=suppressions=${herd_sanitizer_dir}/lsan.supp:print_suppressions=0"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endif()
set(herd_sanitizer_ctest ${PROJECT_BINARY_DIR}/herd_sanitizer_env.cmake)
set(herd_sanitizer_ctest_text "# Written by cmake/sanitize.cmake: the sanitizers' options for ctest.\n")
foreach(assignment IN LISTS herd_sanitizer_env)
  string(REGEX MATCH "^[A-Z_]+" variable "${assignment}")
  string(REGEX REPLACE "^[A-Z_]+=" "" value "${assignment}")
  string(APPEND herd_sanitizer_ctest_text
         "if(NOT DEFINED ENV{${variable}})\n  set(ENV{${variable}} \"${value}\")\nendif()\n")
endforeach()
file(WRITE ${herd_sanitizer_ctest} "${herd_sanitizer_ctest_text}")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${herd_sanitizer_ctest})
message(STATUS "herd: sanitizers ${HERD_SANITIZE} on every target")
