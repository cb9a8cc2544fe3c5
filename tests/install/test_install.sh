#!/usr/bin/env bash
# The installed package as a user gets it: installs hddp from the build tree into a scratch
# prefix (inside the build tree; test_examples builds against it next), then checks
#   - the public headers are there as <hddp/...>, the internal ones are not, each public header
#     compiles on its own, and none names an issue, a results file or a folder users do not get;
#   - a serial program (find_package(hddp COMPONENTS kernels core data)) configures with MPI made
#     unfindable and links no MPI library;
#   - a program on hddp::distributed runs.
# Usage: test_install.sh <source dir> <build dir> <scratch dir>
set -euo pipefail
SRC=$1 BUILD=$2 WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
inc=$WORK/prefix/include/hddp
for h in kernels/gemm.h core/model.h core/layer.h data/csv.h distributed/reducer.h train/run_file.h train/stop_guard.h; do
  [ -f "$inc/$h" ] || fail "public header $h not installed"
done
for h in core/util.h kernels/cpu_isa.h kernels/gemm/gemm_backends.h kernels/gemm/gemm_blocking.h distributed/nbc_algorithm.h \
         distributed/reduction_op.h distributed/step_replay.h; do
  [ ! -e "$inc/$h" ] || fail "internal header $h installed"
done
[ -z "$(grep -l "include <mpi.h>" "$inc"/{kernels,core,data}/*.h || true)" ] || fail "a serial header includes mpi.h"
bad=$(grep -nE "shared/|[Ii]ssue [0-9]|RESULTS\.md|tests/|bench/" -r "$inc" || true)
[ -z "$bad" ] || fail "installed headers name what users do not get:"$'\n'"$bad"
# Every public header on its own (what a user's first #include sees), under a strict user's warnings.
mpi_flags=$(mpicxx --showme:compile | sed "s/-I/-isystem /g")  # system headers, as CMake passes them
for h in $(cd "$inc" && find . -name '*.h' | sort); do
  echo "#include <hddp/${h#./}>" | g++ -std=c++20 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -x c++ -I"$WORK/prefix/include" $mpi_flags - \
    || fail "<hddp/${h#./}> does not compile on its own"
done
test -f "$WORK/prefix/lib/cmake/hddp/hddpConfig.cmake"

# The serial path: no MPI found, none linked.
cmake -S "$SRC/tests/install" -B "$WORK/serial" -DCMAKE_PREFIX_PATH="$WORK/prefix" -DHDDP_CONSUMER=serial \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >"$WORK/serial.log" 2>&1 || { cat "$WORK/serial.log"; fail "the serial consumer does not configure without MPI"; }
cmake --build "$WORK/serial" -j 2 >/dev/null
"$WORK/serial/consumer"
ldd "$WORK/serial/consumer" | grep -q "libmpi" && fail "the serial consumer links MPI"
# An unknown component is refused.
cmake -S "$SRC/tests/install" -B "$WORK/bogus" -DCMAKE_PREFIX_PATH="$WORK/prefix" -DHDDP_CONSUMER=bogus \
  >"$WORK/bogus.log" 2>&1 && fail "find_package(hddp COMPONENTS nosuch) succeeded"
grep -q "unknown component 'nosuch'" "$WORK/bogus.log" || fail "no message for an unknown component: $(cat "$WORK/bogus.log")"

# The distributed path.
cmake -S "$SRC/tests/install" -B "$WORK/mpi" -DCMAKE_PREFIX_PATH="$WORK/prefix" -DHDDP_CONSUMER=distributed >/dev/null
cmake --build "$WORK/mpi" -j 2 >"$WORK/mpi.log" 2>&1 || { tail -40 "$WORK/mpi.log"; fail "the distributed consumers do not build"; }
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$WORK/mpi/consumer_distributed"
"$WORK/mpi/consumer_headers" || fail "consumer_headers failed"
echo "install: headers, the serial package without MPI and the distributed one: ok"
