#!/usr/bin/env bash
# Installs what is missing (every group of setup-deps.sh), builds the tree scripts/run.sh builds
# (build/, the same flags: warnings as errors), and runs every test (ctest, side by side where
# they can: a test's PROCESSORS counts the cores its ranks keep busy, and the tests that start
# daemons hold a RESOURCE_LOCK); meanwhile builds with AddressSanitizer
# + UndefinedBehaviorSanitizer (-DHDDP_SANITIZE=ON, into build-asan) only the programs the tests
# run (the target test_programs), and runs the serial and MPI tests there as soon as that build
# is done, beside the rest of the normal pass (its output follows the normal pass's).
#
#   scripts/test.sh [ctest args]   ctest args apply to the first (normal) pass
#   HDDP_TEST_TIER=quick           the quick tier only (label quick: the unit suites and the
#                                  reducer on 2 ranks; a couple of minutes), no sanitizer pass
#   HDDP_SANITIZE_TESTS=0          skip the sanitizer pass
#   HDDP_ASAN_BUILD_DIR            its build folder (default: build-asan)
#
# The sanitizer pass leaves out: the install tests (an uninstrumented consumer cannot link the
# instrumented libraries), the Slurm and container tests (they start daemons; the job path is
# the same code), test_poly_train, test_mnist_train, test_gpt_train and test_promises (the drivers end to end,
# equalities of whole runs: minutes under ASan; the drivers run under ASan in every faults test,
# and with leak checks in test_sanitizer_driver_leaks) and the benchmarks' tests (label bench).
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

# The sanitizer build compiles while the normal pass runs, and its tests start as soon as it is
# done, beside what is left of the normal pass: the sanitizer build and pass are the longer
# path, the normal pass has time to spare, and its tests wait on ranks, daemons and timers for
# much of it, leaving cores idle that the build and the other pass take. Every test holds beside
# such load (the suite is run beside two CPU hogs). Logs: $ASAN_DIR/build.log, $ASAN_DIR/pass.log.
ASAN_DIR="${HDDP_ASAN_BUILD_DIR:-$HDDP_ROOT/build-asan}"
asan_pid=""
if [ "${HDDP_SANITIZE_TESTS:-1}" != 0 ]; then
  phase "sanitizer build in the background: -fsanitize=address,undefined in $ASAN_DIR (the test programs only)"
  # -O1 -g1: line tables are all a sanitizer report needs, and -O1 compiles in about half the
  # time of -O2 -g while the instrumented tests run about as fast.
  cmake -S "$HDDP_ROOT" -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DHDDP_WERROR=ON -DHDDP_SANITIZE=ON -DHDDP_BUILD_BENCH=OFF >/dev/null
  rm -f "$ASAN_DIR/pass.log" "$ASAN_DIR/pass.rc"
  # The sanitizer options (ASAN_OPTIONS, LSAN_OPTIONS with tests/sanitizers/lsan.supp,
  # UBSAN_OPTIONS) are set on every test by tests/CMakeLists.txt; test_sanitizer_canary checks
  # they catch faults. Its own session (setsid): interrupted, the script stops the whole job.
  T_ASAN=$SECONDS setsid bash -c '
    cd "$1" || exit 1
    if ! cmake --build . -j "$2" --target test_programs >build.log 2>&1; then
      echo "the sanitizer build failed; the whole log is $1/build.log" >pass.log; tail -50 build.log >>pass.log
      echo 1 >pass.rc; exit 1
    fi
    echo "== [$((SECONDS + T_ASAN - $3)) s] sanitizer build done, sanitizer pass starts" >pass.log
    rc=0
    ctest --output-on-failure --timeout 900 -j "$2" -L "kernels|core|data|distributed|drivers|mpi|faults|train|sanitizers" \
      -LE "slurm|container|install|bench" -E "^(test_poly_train|test_mnist_train|test_gpt_train|test_promises)\$" >>pass.log 2>&1 || rc=$?
    echo $rc >pass.rc' _ "$ASAN_DIR" "$JOBS" "$T0" &
  asan_pid=$!
  trap '[ -n "$asan_pid" ] && kill -- "-$asan_pid" 2>/dev/null; wait 2>/dev/null' EXIT
fi

cd "$BUILD_DIR"
phase "normal pass: ctest -j $JOBS"
normal_rc=0
ctest --output-on-failure --timeout 900 -j "$JOBS" "$@" || normal_rc=$?
phase "normal pass done (rc $normal_rc)"

if [ -n "$asan_pid" ]; then
  phase "waiting for the sanitizer pass (started beside the normal pass once its build was done)"
  wait "$asan_pid" || true
  asan_pid=""
  cat "$ASAN_DIR/pass.log"
  asan_rc="$(cat "$ASAN_DIR/pass.rc" 2>/dev/null || echo 1)"
  phase "sanitizer pass done (rc $asan_rc)"
  [ "$asan_rc" -eq 0 ] || exit 1
fi
exit "$normal_rc"
