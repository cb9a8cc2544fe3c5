# Finds the OpenMP build of OpenBLAS (Debian: libopenblas-openmp-dev), so that one
# OMP_NUM_THREADS governs hddp's and OpenBLAS's threads. Debian's default libblas.so.3
# may be the pthread build, hence the explicit openblas-openmp directory.
# Defines OpenBLASOpenMP::OpenBLASOpenMP. Override with -DOPENBLAS_OPENMP_ROOT=<dir>.
set(_hddp_ob_hints ${OPENBLAS_OPENMP_ROOT})
if(CMAKE_LIBRARY_ARCHITECTURE)
  list(APPEND _hddp_ob_hints /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp)
endif()
find_library(OPENBLAS_OPENMP_LIBRARY NAMES openblas PATHS ${_hddp_ob_hints} NO_DEFAULT_PATH)
find_path(OPENBLAS_OPENMP_INCLUDE_DIR NAMES cblas.h
  PATHS ${OPENBLAS_OPENMP_ROOT}/include /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp
  NO_DEFAULT_PATH)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenBLASOpenMP
  REQUIRED_VARS OPENBLAS_OPENMP_LIBRARY OPENBLAS_OPENMP_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install libopenblas-openmp-dev (scripts/setup-deps.sh does)")
if(OpenBLASOpenMP_FOUND AND NOT TARGET OpenBLASOpenMP::OpenBLASOpenMP)
  add_library(OpenBLASOpenMP::OpenBLASOpenMP UNKNOWN IMPORTED)
  set_target_properties(OpenBLASOpenMP::OpenBLASOpenMP PROPERTIES
    IMPORTED_LOCATION ${OPENBLAS_OPENMP_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${OPENBLAS_OPENMP_INCLUDE_DIR})
endif()
