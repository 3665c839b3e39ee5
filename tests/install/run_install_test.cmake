# Runs the install test; see CMakeLists.txt next to this file. Invoked as
#   cmake -DHERD_BUILD_DIR=... -DCONSUMER_SOURCE_DIR=... -DWORK_DIR=... \
#         -DBUILD_CONFIG=... -DGENERATOR=... -DMAKE_PROGRAM=... -DCXX_COMPILER=... \
#         -DMPIEXEC=... -DMPIEXEC_FLAGS=a|b -DNUMPROC_FLAG=-n -DRANKS=2 \
#         [-DPROGRAMS=bin/herd-train|...] -P run_install_test.cmake
# PROGRAMS: installed programs, relative to the prefix, each run with --help.
# Each step prints what it runs; the first failing step fails the test.
cmake_minimum_required(VERSION 3.18)

foreach(var HERD_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR MPIEXEC NUMPROC_FLAG RANKS)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" mpiexec_flags "${MPIEXEC_FLAGS}")

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# run_step(<what> <timeout> COMMAND...): runs one command, fails the test if it
# does not exit 0.
function(run_step what timeout)
  string(REPLACE ";" " " shown "${ARGN}")
  message(STATUS "install test: ${what}: ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result TIMEOUT ${timeout})
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${result})")
  endif()
endfunction()

set(config_args)
set(build_type_arg)
if(NOT "${BUILD_CONFIG}" STREQUAL "")
  set(config_args --config ${BUILD_CONFIG})
  set(build_type_arg -DCMAKE_BUILD_TYPE=${BUILD_CONFIG})
endif()
set(toolchain_args)
if(NOT "${MAKE_PROGRAM}" STREQUAL "")
  list(APPEND toolchain_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(NOT "${CXX_COMPILER}" STREQUAL "")
  list(APPEND toolchain_args -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif()

run_step("install herd" 120
         ${CMAKE_COMMAND} --install ${HERD_BUILD_DIR} --prefix ${prefix} ${config_args})

# Each installed program must start from the prefix alone: herd's libraries
# resolve, through the program's RPATH, to the ones under the prefix (not to
# the build tree's), and the program runs with LD_LIBRARY_PATH unset.
string(REPLACE "|" ";" programs "${PROGRAMS}")
foreach(program IN LISTS programs)
  set(path ${prefix}/${program})
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "install test: ${program} was not installed")
  endif()
  file(GET_RUNTIME_DEPENDENCIES EXECUTABLES ${path}
       RESOLVED_DEPENDENCIES_VAR resolved UNRESOLVED_DEPENDENCIES_VAR unresolved
       PRE_INCLUDE_REGEXES "^libherd" PRE_EXCLUDE_REGEXES ".*")
  if(unresolved)
    message(FATAL_ERROR "install test: ${program} does not find ${unresolved}")
  endif()
  if(NOT resolved)
    message(FATAL_ERROR "install test: ${program} needs no herd library")
  endif()
  foreach(library IN LISTS resolved)
    string(FIND "${library}" "${prefix}/" at)
    if(NOT at EQUAL 0)
      message(FATAL_ERROR "install test: ${program} loads ${library}, outside ${prefix}")
    endif()
  endforeach()
  message(STATUS "install test: ${program} loads ${resolved}")
  run_step("run ${program}" 60
           ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH
           ${MPIEXEC} ${mpiexec_flags} ${NUMPROC_FLAG} 1 ${path} --help)
endforeach()

# Only the CMAKE_PREFIX_PATH may lead the consumer to herd: no package registry.
run_step("configure the consumer" 120
         ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${consumer_build} -G ${GENERATOR}
         ${toolchain_args} ${build_type_arg}
         -DCMAKE_PREFIX_PATH=${prefix}
         -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)

file(STRINGS ${consumer_build}/CMakeCache.txt herd_dir_line REGEX "^herd_DIR:")
string(FIND "${herd_dir_line}" "${prefix}/" at)
if(NOT at GREATER -1)
  message(FATAL_ERROR "install test: the consumer found herd outside ${prefix}: ${herd_dir_line}")
endif()

run_step("build the consumer" 120 ${CMAKE_COMMAND} --build ${consumer_build} ${config_args})

find_program(consumer herd_consumer PATHS ${consumer_build} ${consumer_build}/${BUILD_CONFIG}
             NO_DEFAULT_PATH REQUIRED)
run_step("run the consumer" 120
         ${MPIEXEC} ${mpiexec_flags} ${NUMPROC_FLAG} ${RANKS} ${consumer})
message(STATUS "install test: passed")
