#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, and runs every test (ctest).
source "$(dirname "$0")/common.sh"
export HDDP_CMAKE_ARGS="-DHDDP_WERROR=ON ${HDDP_CMAKE_ARGS:-}"
hddp_build
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 900 -j 1 "$@"
