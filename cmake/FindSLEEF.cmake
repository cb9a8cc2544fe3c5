# Finds SLEEF, the vectorized math library (Debian: libsleef-dev): the element-wise kernels'
# tanh at each instruction set's width. Defines SLEEF::sleef. Override with -DSLEEF_ROOT=<dir>.
find_library(SLEEF_LIBRARY NAMES sleef HINTS ${SLEEF_ROOT}/lib)
find_path(SLEEF_INCLUDE_DIR NAMES sleef.h HINTS ${SLEEF_ROOT}/include)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(SLEEF
  REQUIRED_VARS SLEEF_LIBRARY SLEEF_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install libsleef-dev (scripts/setup-deps.sh does)")
if(SLEEF_FOUND AND NOT TARGET SLEEF::sleef)
  add_library(SLEEF::sleef UNKNOWN IMPORTED)
  set_target_properties(SLEEF::sleef PROPERTIES
    IMPORTED_LOCATION ${SLEEF_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${SLEEF_INCLUDE_DIR})
endif()
