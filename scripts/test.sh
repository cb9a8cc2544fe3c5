#!/usr/bin/env bash
# Installs what is missing (every group of setup-deps.sh), builds the tree scripts/run.sh builds
# (build/, the same flags: warnings as errors), and runs every test (ctest, side by side where
# they can: a test's PROCESSORS counts the cores its ranks keep busy, and the tests that start
# daemons or wait on timers run alone); then builds, with AddressSanitizer + UndefinedBehavior-
# Sanitizer (-DHDDP_SANITIZE=ON, into build-asan), only the programs the tests run (the target
# test_programs), and runs the serial and MPI tests there.
#
#   scripts/test.sh [ctest args]   ctest args apply to the first (normal) pass
#   HDDP_TEST_TIER=quick           the quick tier only (label quick: the unit suites and the
#                                  reducer on 2 ranks; a couple of minutes), no sanitizer pass
#   HDDP_SANITIZE_TESTS=0          skip the sanitizer pass
#   HDDP_ASAN_BUILD_DIR            its build folder (default: build-asan)
#
# The sanitizer pass leaves out: the install tests (an uninstrumented consumer cannot link the
# instrumented libraries), the Slurm and container tests (they start daemons; the job path is
# the same code), test_poly_train (the driver end to end: minutes under ASan; the driver runs
# under ASan in every faults test) and the benchmarks' tests (label bench).
source "$(dirname "$0")/common.sh"
T0=$SECONDS
phase() { echo "== [$((SECONDS - T0)) s] $*"; }

if [ "${HDDP_TEST_TIER:-full}" = quick ]; then
  phase "quick tier: build the test programs, run label quick"
  HDDP_TARGETS=test_programs hddp_build build tests
  cd "$BUILD_DIR"
  ctest --output-on-failure --timeout 600 -j "$JOBS" -L quick "$@"
  phase "quick tier done"
  exit 0
fi

phase "install what is missing, build $BUILD_DIR"
hddp_build all
cd "$BUILD_DIR"
phase "normal pass: ctest -j $JOBS"
ctest --output-on-failure --timeout 900 -j "$JOBS" "$@"
phase "normal pass done"

[ "${HDDP_SANITIZE_TESTS:-1}" = 0 ] && exit 0
ASAN_DIR="${HDDP_ASAN_BUILD_DIR:-$HDDP_ROOT/build-asan}"
phase "sanitizer pass: -fsanitize=address,undefined in $ASAN_DIR (the test programs only)"
cmake -S "$HDDP_ROOT" -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHDDP_WERROR=ON -DHDDP_SANITIZE=ON \
  -DHDDP_BUILD_BENCH=OFF >/dev/null
cmake --build "$ASAN_DIR" -j "$JOBS" --target test_programs
# The sanitizer options (ASAN_OPTIONS, LSAN_OPTIONS with tests/sanitizers/lsan.supp, UBSAN_OPTIONS)
# are set on every test by tests/CMakeLists.txt; test_sanitizer_canary checks they catch faults.
cd "$ASAN_DIR"
ctest --output-on-failure --timeout 900 -j "$JOBS" -L 'kernels|core|data|distributed|drivers|mpi|faults|sanitizers' \
  -LE 'slurm|container|install|bench' -E '^test_poly_train$'
phase "sanitizer pass done"
