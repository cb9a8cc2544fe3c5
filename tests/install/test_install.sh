#!/usr/bin/env bash
# Installs hddp from the build tree into a scratch prefix (inside the build tree), configures
# and builds tests/install as a separate project with find_package(hddp), and runs it.
# Usage: test_install.sh <source dir> <build dir> <scratch dir>
set -euo pipefail
SRC=$1 BUILD=$2 WORK=$3
rm -rf "$WORK"
trap 'rm -rf "$WORK"' EXIT
cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
test -f "$WORK/prefix/include/hddp/kernels/gemm.h"
test -f "$WORK/prefix/include/hddp/distributed/reducer.h"
test ! -e "$WORK/prefix/include/hddp/distributed/step_replay.h"  # a bench model (bench/at_scale), not installed
! grep -l "include <mpi.h>" "$WORK/prefix/include/hddp/core/"*.h  # the serial core needs no MPI
test -f "$WORK/prefix/lib/cmake/hddp/hddpConfig.cmake"
cmake -S "$SRC/tests/install" -B "$WORK/build" -DCMAKE_PREFIX_PATH="$WORK/prefix" >/dev/null
cmake --build "$WORK/build" -j 2 >/dev/null
"$WORK/build/consumer"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$WORK/build/consumer_distributed"
