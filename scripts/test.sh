#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, and runs every test (ctest); then
# builds again with AddressSanitizer + UndefinedBehaviorSanitizer (-DHDDP_SANITIZE=ON, into
# build-asan) and runs the serial and MPI tests there (labels kernels, core, distributed, mpi, faults,
# sanitizers).
#
#   scripts/test.sh [ctest args]   ctest args apply to the first (normal) pass
#   HDDP_SANITIZE_TESTS=0          skip the sanitizer pass
#   HDDP_ASAN_BUILD_DIR            its build folder (default: build-asan)
#
# The sanitizer pass leaves out: test_install (an uninstrumented consumer cannot link the
# instrumented libraries), the Slurm tests (they start daemons; the job path is the same code),
# and test_poly_train (the end-to-end driver test: several minutes under ASan; the driver
# itself runs under ASan in every faults test).
source "$(dirname "$0")/common.sh"
export HDDP_CMAKE_ARGS="-DHDDP_WERROR=ON ${HDDP_CMAKE_ARGS:-}"
hddp_build
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 900 -j 1 "$@"

[ "${HDDP_SANITIZE_TESTS:-1}" = 0 ] && exit 0
ASAN_DIR="${HDDP_ASAN_BUILD_DIR:-$HDDP_ROOT/build-asan}"
echo "== sanitizer pass: -fsanitize=address,undefined in $ASAN_DIR"
cmake -S "$HDDP_ROOT" -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHDDP_WERROR=ON -DHDDP_SANITIZE=ON \
  -DHDDP_BUILD_BENCH=OFF >/dev/null
cmake --build "$ASAN_DIR" -j "$JOBS"
# The sanitizer options (ASAN_OPTIONS, LSAN_OPTIONS with tests/sanitizers/lsan.supp, UBSAN_OPTIONS)
# are set on every test by tests/CMakeLists.txt; test_sanitizer_canary checks they catch faults.
cd "$ASAN_DIR"
ctest --output-on-failure --timeout 900 -j 1 -L 'kernels|core|distributed|mpi|faults|sanitizers' \
  -E '^(test_poly_train|test_slurm_local|test_faults_slurm_requeue)$'
