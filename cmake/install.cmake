# What `cmake --install` puts under the prefix:
#   include/herd/*.h              the public API
#   <libdir>/libherd.so*          the shared library (target herd)
#   <libdir>/cmake/herd/          the CMake package: find_package(herd CONFIG)
#                                 gives the imported target herd::herd
#   libexec/herd/allreduce_demo   the demo, when examples are built (kept out
#                                 of bin/: it is an example, not a tool)
# herd's static layers (herd_core, herd_collectives, herd_ops, herd_common) are
# linked into libherd.so PRIVATE, and herd_train's objects are part of it; none
# of them is installed or exported on its own.
include(CMakePackageConfigHelpers)

set(HERD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/herd)
set(HERD_INSTALL_EXAMPLESDIR ${CMAKE_INSTALL_LIBEXECDIR}/herd)

# Installed programs find libherd.so through an RPATH relative to their own
# location, so the prefix can move. Libraries outside the system directories
# that herd was linked against (MPI in a custom prefix) stay on the RPATH.
file(RELATIVE_PATH herd_examples_to_lib
     ${CMAKE_INSTALL_FULL_LIBEXECDIR}/herd ${CMAKE_INSTALL_FULL_LIBDIR})
set_target_properties(herd PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS herd EXPORT herdTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/herd
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

if(TARGET allreduce_demo)
  set_target_properties(allreduce_demo PROPERTIES
    INSTALL_RPATH "$ORIGIN/${herd_examples_to_lib}"
    INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS allreduce_demo RUNTIME DESTINATION ${HERD_INSTALL_EXAMPLESDIR})
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
