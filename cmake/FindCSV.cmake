# Finds libcsv, the CSV parser of data/csv.cpp (Debian: libcsv-dev). Defines CSV::csv.
# Override with -DCSV_ROOT=<dir>.
find_library(CSV_LIBRARY NAMES csv HINTS ${CSV_ROOT}/lib)
find_path(CSV_INCLUDE_DIR NAMES csv.h HINTS ${CSV_ROOT}/include)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CSV
  REQUIRED_VARS CSV_LIBRARY CSV_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install libcsv-dev (scripts/setup-deps.sh does)")
if(CSV_FOUND AND NOT TARGET CSV::csv)
  add_library(CSV::csv UNKNOWN IMPORTED)
  set_target_properties(CSV::csv PROPERTIES
    IMPORTED_LOCATION ${CSV_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${CSV_INCLUDE_DIR})
endif()
