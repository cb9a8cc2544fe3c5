#!/usr/bin/env bash
# poly_train's placement report and warnings (distributed/affinity.h) under plain mpiexec:
#   1. a bad placement - both ranks pinned to CPU 0 through the environment (OMP_PLACES={0}
#      OMP_PROC_BIND=true under --bind-to none) - makes rank 0 warn, naming both ranks;
#   2. the good one (mpiexec --map-by slot:PE=1 --bind-to core, OMP_PLACES=cores
#      OMP_PROC_BIND=close) prints no warning, and the two ranks report different CPUs;
#   3. a rank bound to one core running 3 threads gets the "more threads than CPUs" warning;
#   4. 3 unbound ranks (scripts/run.sh on a small machine) get none: the kernel spreads them.
# The runs are a few epochs long (nothing here is timed). Needs 2 CPUs (case 2 gives each
# rank its own); skipped (77) on a 1-CPU machine.
# Usage: test_affinity.sh <poly_train> <mpiexec> <scratch dir inside the build tree>
set -uo pipefail
BIN=$1 MPIEXEC=$2 WORK=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
unset OMP_PLACES OMP_PROC_BIND GOMP_CPU_AFFINITY
cpus="$(env -u OMP_NUM_THREADS nproc)"
if [ "$cpus" -lt 2 ]; then
  echo "SKIP: needs 2 CPUs (this process may use $cpus)"
  exit 77
fi
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# run NAME MPIEXEC_OPTIONS... -- POLY_TRAIN_OPTIONS...: stdout+stderr in $WORK/NAME.log
run() {
  local name=$1; shift
  local mpi=() 
  while [ "$1" != -- ]; do mpi+=("$1"); shift; done
  shift
  "$MPIEXEC" --timeout 120 "${mpi[@]}" "$BIN" --epochs 5 --no-plot --out "$WORK" --report-affinity "$@" \
    >"$WORK/$name.log" 2>&1 || { fail "$name: poly_train exited $?: $(tail -3 "$WORK/$name.log")"; return 1; }
}

# The CPUs thread 0 of rank R may use, from the report line.
may_use() { sed -n "s/^affinity: rank $2\/[0-9]* .* t0 on CPU [0-9-]* (may use \([0-9,-]*\)).*/\1/p" "$1"; }

# 1. both ranks pinned to CPU 0
if run bad -n 2 --bind-to none -x 'OMP_PLACES={0}' -x OMP_PROC_BIND=true --; then
  log=$WORK/bad.log
  [ "$(may_use "$log" 0)" = 0 ] && [ "$(may_use "$log" 1)" = 0 ] \
    || fail "bad: expected both ranks' thread on CPU 0, got '$(may_use "$log" 0)' and '$(may_use "$log" 1)'"
  grep -q '^poly_train: warning: ranks 0, 1 on host .* are pinned to overlapping CPUs (rank 0 on CPUs 0, rank 1 on CPUs 0)' "$log" \
    || fail "bad: no warning naming ranks 0 and 1: $(grep warning "$log")"
  grep -q 'mpiexec --map-by slot:PE=<threads per rank> --bind-to core' "$log" || fail "bad: the warning does not say the fix"
  [ "$(grep -c 'warning' "$log")" -eq 1 ] || fail "bad: expected exactly one warning: $(grep warning "$log")"
  pass "both ranks pinned to CPU 0: rank 0 warns, naming ranks 0 and 1"
fi

# 2. each rank on its own core (and --stats ends with the same placement in one line)
if run good -n 2 --map-by slot:PE=1 --bind-to core -x OMP_PLACES=cores -x OMP_PROC_BIND=close -- --stats; then
  log=$WORK/good.log
  a="$(may_use "$log" 0)" b="$(may_use "$log" 1)"
  [[ "$a" =~ ^[0-9]+$ && "$b" =~ ^[0-9]+$ && "$a" != "$b" ]] \
    || fail "good: expected the two ranks on two different single CPUs, got '$a' and '$b'"
  grep -qE "^placement: rank 0 on [^ ]+ CPUs $a \(1 thread\); rank 1 on [^ ]+ CPUs $b \(1 thread\)$" "$log" \
    || fail "good: --stats placement line: $(grep '^placement' "$log")"
  ! grep -q 'warning' "$log" || fail "good: unexpected warning: $(grep warning "$log")"
  pass "each rank on its own core: CPUs $a and $b, no warning"
fi

# 3. one core, three threads
if run crowded -n 1 --map-by slot:PE=1 --bind-to core -x OMP_PLACES=cores -x OMP_PROC_BIND=close -- --threads 3; then
  grep -q '^poly_train: warning: rank 0 runs more OpenMP threads than it has CPUs (rank 0 on .*: 3 threads on CPUs [0-9]*)' \
    "$WORK/crowded.log" || fail "crowded: no warning about 3 threads on 1 CPU: $(grep -E 'warning|affinity' "$WORK/crowded.log")"
  pass "3 threads on 1 core: warned"
fi

# 4. 3 ranks, unbound, more ranks than CPUs on a 2-CPU machine
if run unbound -n 3 --oversubscribe --bind-to none --; then
  [ "$(grep -c '^affinity: rank [0-2]/3 ' "$WORK/unbound.log")" -eq 3 ] || fail "unbound: expected 3 report lines"
  ! grep -q 'warning' "$WORK/unbound.log" || fail "unbound: unexpected warning: $(grep warning "$WORK/unbound.log")"
  pass "3 unbound ranks: reported, no warning"
fi

[ "$failures" -eq 0 ] && echo PASS || echo "FAILED: $failures check(s)"
[ "$failures" -eq 0 ]
