# Decides whether bindings/ (the herd Python package) is built; see
# HERD_BUILD_PYTHON in the top-level CMakeLists.txt.
#
# The interpreter is Debian's /usr/bin/python3 unless Python3_EXECUTABLE says
# otherwise (setup.py passes the one running pip): numpy and torch are Debian
# packages of that interpreter, and another python3 earlier on PATH may lack
# them.
if(NOT HERD_BUILD_PYTHON STREQUAL "OFF")
  if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  if(HERD_BUILD_PYTHON STREQUAL "ON")
    find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
    find_package(pybind11 CONFIG REQUIRED)
  else()
    find_package(Python3 COMPONENTS Interpreter Development.Module)
    find_package(pybind11 CONFIG QUIET)
  endif()
  if(Python3_FOUND AND pybind11_FOUND)
    message(STATUS "herd: building the Python package for ${Python3_EXECUTABLE}")
    add_subdirectory(bindings)
  else()
    message(STATUS "herd: Python package left out (need pybind11-dev and python3-dev; "
                   "HERD_BUILD_PYTHON=ON makes that an error)")
  endif()
endif()
