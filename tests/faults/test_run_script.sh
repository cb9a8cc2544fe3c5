#!/usr/bin/env bash
# scripts/run.sh turns its own SIGTERM into SIGUSR1 for mpiexec, which forwards it to the
# ranks at once: every rank finishes its step, rank 0 writes the checkpoint, all exit 75 (and
# so does the script). Without Slurm and without building anything: the script runs unchanged
# from a stand-in tree whose scripts/common.sh installs and builds nothing (hddp_build is a
# no-op) and whose build/drivers/poly_train is the one under test; `mpiexec` on PATH is the
# real one with a deadline (--timeout). The signal goes to the script's shell only, at a state
# (the first progress line), and the stop message must name SIGUSR1: had the trap passed
# SIGTERM on to mpiexec, Open MPI's kill sequence would reach the ranks as SIGTERM a second
# later and mpiexec would exit 1.
# Usage: test_run_script.sh <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir> <source dir>
source "$(dirname "$0")/lib.sh" "$@"
SRC=$5

root=$WORK/root
mkdir -p "$root/scripts" "$root/build/drivers" "$WORK/bin" "$WORK/out"
cp "$SRC/scripts/run.sh" "$SRC/scripts/placement.sh" "$root/scripts/"
ln -s "$BIN" "$root/build/drivers/poly_train"
cat >"$root/scripts/common.sh" <<'STUB'
# Stand-in for scripts/common.sh: the same variables, nothing installed, nothing built.
set -euo pipefail
HDDP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$HDDP_ROOT/build"
hddp_build() { :; }
STUB
printf '#!/bin/sh\nexec %q --timeout 120 "$@"\n' "$MPIEXEC" >"$WORK/bin/mpiexec"
chmod +x "$WORK/bin/mpiexec"

out=$WORK/out
bg "$WORK/log" env PATH="$WORK/bin:$PATH" HDDP_OUT="$out" bash "$root/scripts/run.sh" \
  --no-plot --log-every 1000 --epochs 10000000 --checkpoint "$out/ck"
pid=$BG
if wait_for "$WORK/log" '^progress: epoch' 60 "$pid"; then
  kill -TERM "$pid"
  wait_rc "$pid" 60; rc=$?
  [ "$rc" -eq 75 ] || fail "run.sh exited $rc after SIGTERM, expected 75"
  msg=$(grep -E "^poly_train: SIGUSR1: all ranks stopped after [0-9]+ of 10000000 epochs; checkpoint '$out/ck' written" "$WORK/log")
  if [ -n "$msg" ]; then
    stop=$(sed -E 's/.* stopped after ([0-9]+) of .*/\1/' <<<"$msg")
    info=$("$TOOL" info "$out/ck") || fail "checkpoint unreadable: $info"
    [ "$(sed -n 's/^step //p' <<<"$info")" = "$stop" ] || fail "the checkpoint's epoch is not the stop's ($stop): $info"
    [ "$(sed -n 's/^world_size //p' <<<"$info")" = 3 ] || fail "the checkpoint is not of 3 ranks: $info"
  else
    fail "no stop message naming SIGUSR1 (did the ranks get SIGTERM?): $(grep -E 'poly_train: (SIG|error)' "$WORK/log")"
  fi
  none_left "$out" 10 || fail "ranks left running"
else
  fail "run.sh: no progress line within 60 s"
fi
pass "scripts/run.sh: SIGTERM -> SIGUSR1 to the ranks -> checkpoint, exit 75"
finish
