# CUDA and NCCL: found at configure time, built when found.
#
# HERD_WITH_CUDA: ON needs nvcc and the CUDA toolkit, AUTO builds the GPU code
# when both are found, OFF leaves it out (the library then builds exactly as
# without CUDA: GPU tensors are refused with a clear error). NCCL is used
# when CUDA is on and nccl.h and libnccl are found (HERD_WITH_NCCL, same
# values); without it GPU tensors go through the MPI path with host staging.
#
# Sets HERD_CUDA and HERD_NCCL (TRUE/FALSE) and the target herd::nccl. What is
# installed finds CUDA's and NCCL's libraries through the directories it was
# linked from (INSTALL_RPATH_USE_LINK_PATH, cmake/install.cmake).
set(HERD_WITH_CUDA AUTO CACHE STRING "Build herd's GPU path: ON, OFF or AUTO")
set_property(CACHE HERD_WITH_CUDA PROPERTY STRINGS ON OFF AUTO)
set(HERD_WITH_NCCL AUTO CACHE STRING "Use NCCL for GPU tensors: ON, OFF or AUTO")
set_property(CACHE HERD_WITH_NCCL PROPERTY STRINGS ON OFF AUTO)
# sm_90 machine code for Hopper (H100, H200) plus compute_90 PTX, which the
# driver compiles for newer chips: CMake's "90" means both.
set(HERD_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures to build for (CMake syntax)")

set(HERD_CUDA FALSE)
set(HERD_NCCL FALSE)
set(HERD_NCCL_VERSION_CODE 0)

if(NOT HERD_WITH_CUDA STREQUAL "OFF")
  # CUDA's installers put it under /usr/local/cuda, off the PATH.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES ${HERD_CUDA_ARCHITECTURES})
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(HERD_CUDA TRUE)
    message(STATUS "herd: CUDA ${CUDAToolkit_VERSION} found; GPU path ON "
                   "(architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(HERD_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "HERD_WITH_CUDA=ON, but nvcc or the CUDA toolkit was not found "
                        "(set CMAKE_CUDA_COMPILER or CUDAToolkit_ROOT)")
  else()
    message(STATUS "herd: CUDA not found; GPU path OFF")
  endif()
endif()

if(HERD_CUDA AND NOT HERD_WITH_NCCL STREQUAL "OFF")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME
               PATH_SUFFIXES lib lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(HERD_NCCL TRUE)
    # NCCL_VERSION_CODE of the header built against (22809 for 2.28.9), which
    # herd.nccl_built() reports as Horovod's does.
    file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" nccl_version_line
         REGEX "^#define NCCL_VERSION_CODE [0-9]+")
    string(REGEX REPLACE "^#define NCCL_VERSION_CODE ([0-9]+).*" "\\1" HERD_NCCL_VERSION_CODE
           "${nccl_version_line}")
    add_library(herd_nccl_imported INTERFACE)
    add_library(herd::nccl ALIAS herd_nccl_imported)
    target_include_directories(herd_nccl_imported INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(herd_nccl_imported INTERFACE ${NCCL_LIBRARY})
    message(STATUS "herd: NCCL found (${NCCL_LIBRARY})")
  elseif(HERD_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "HERD_WITH_NCCL=ON, but nccl.h or libnccl was not found (set NCCL_HOME)")
  else()
    message(STATUS "herd: NCCL not found; GPU tensors use the MPI path")
  endif()
endif()
