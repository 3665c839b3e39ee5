# What `cmake --install` puts under the prefix:
#   include/herd/*.h              the communication API (herd/herd.h)
#   include/herd/train.h, train/  the training library's API
#   <libdir>/libherd.so*          the shared library (target herd)
#   <libdir>/libherd_train.so*    the training library (target herd_train)
#   include/herd/kvstore.h        the KVStore's API
#   <libdir>/libherd_kvstore.so*  the KVStore (target herd_kvstore)
#   include/herd/recordio.h, data/ the data library's API
#   <libdir>/libherd_data.so*     RecordIO and IDX files (target herd_data)
#   <libdir>/cmake/herd/          the CMake package: find_package(herd CONFIG)
#                                 gives the imported targets herd::herd and
#                                 herd::train, herd::kvstore and herd::data
#   bin/herd-train                the training job, when examples are built
#   bin/herd-bench                the benchmark, when benchmarks are built
#   bin/herdrun                   the launcher
#   bin/herd-timeline             merges per-rank timelines, the straggler report
#   bin/herd-rec                  packs, checks and unpacks RecordIO files
#   libexec/herd/allreduce_demo   the demo, when examples are built (kept out
#                                 of bin/: it is an example, not a tool)
# herd's static layers (herd_core, herd_collectives, herd_ops, herd_common) are
# linked into libherd.so PRIVATE; none of them is installed or exported on its
# own.
include(CMakePackageConfigHelpers)

set(HERD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/herd)
set(HERD_INSTALL_EXAMPLESDIR ${CMAKE_INSTALL_LIBEXECDIR}/herd)

# Installed programs and libraries find herd's libraries through an RPATH
# relative to their own location ($ORIGIN/../lib for bin/), so they start
# without LD_LIBRARY_PATH and the prefix can move. Libraries outside the
# system directories that herd was linked against (MPI in a custom prefix)
# stay on the RPATH.
set_target_properties(herd PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
set_target_properties(herd_train PROPERTIES INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
set_target_properties(herd_kvstore PROPERTIES INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
set_target_properties(herd_data PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

# herd_install_program(<target> <destination>): installs a program into
# <destination> (relative to the prefix) with an RPATH that leads from there to
# <libdir>.
function(herd_install_program target destination)
  file(RELATIVE_PATH to_lib ${CMAKE_INSTALL_PREFIX}/${destination} ${CMAKE_INSTALL_FULL_LIBDIR})
  set_target_properties(${target} PROPERTIES
    INSTALL_RPATH "$ORIGIN/${to_lib}"
    INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS ${target} RUNTIME DESTINATION ${destination})
endfunction()

install(TARGETS herd herd_train herd_kvstore herd_data EXPORT herdTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/herd
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

if(TARGET herd-train)
  herd_install_program(herd-train ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET herd-bench)
  herd_install_program(herd-bench ${CMAKE_INSTALL_BINDIR})
endif()
# herdrun links no library of herd, so it needs no RPATH of its own.
install(TARGETS herdrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET herd-timeline)
  herd_install_program(herd-timeline ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET herd-rec)
  herd_install_program(herd-rec ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET allreduce_demo)
  herd_install_program(allreduce_demo ${HERD_INSTALL_EXAMPLESDIR})
endif()

install(EXPORT herdTargets
  NAMESPACE herd::
  FILE herdTargets.cmake
  DESTINATION ${HERD_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/herdConfig.cmake.in
  ${PROJECT_BINARY_DIR}/herdConfig.cmake
  INSTALL_DESTINATION ${HERD_INSTALL_CMAKEDIR})
# 0.x releases break compatibility at the minor version.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/herdConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/herdConfig.cmake ${PROJECT_BINARY_DIR}/herdConfigVersion.cmake
  DESTINATION ${HERD_INSTALL_CMAKEDIR})
