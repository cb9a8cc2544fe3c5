# Sourced by tests/faults/test_*.sh: arguments, MPI environment, scratch folder, background
# runs that are always cleaned up, and pass/fail bookkeeping.
#
#   source lib.sh "$@"   # args: <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir in the build tree>
#
# Every run has a deadline (mpiexec --timeout, or `timeout`); every process a test starts in
# the background is recorded and killed (with its children, by PID) on exit; the scratch
# folder is removed on success and kept (its logs printed) on failure.
set -uo pipefail
BIN=$1 MPIEXEC=$2 TOOL=$3 WORK=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# mpiexec --timeout: a hung run is killed long before ctest's TIMEOUT.
MPI=("$MPIEXEC" --oversubscribe --bind-to none --timeout 120)
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
BG_PIDS=()

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# pass NAME: closes a case: "ok" unless it had a failure since the previous pass.
_failures_at_pass=0
pass() {
  if [ "$failures" -eq "$_failures_at_pass" ]; then echo "ok: $*"; else echo "failed: $*"; fi
  _failures_at_pass=$failures
}

# run_case NAME CMD...: runs one case (CMD may return early on a failure) and reports it on
# its own: only the failures of this case count for it, never a previous case's.
run_case() {
  local name=$1
  shift
  _failures_at_pass=$failures
  "$@"
  pass "$name"
}

# kill_tree PID: SIGKILL a process and all its descendants (children first found, then killed).
kill_tree() {
  local p=$1 c
  for c in $(pgrep -P "$p" 2>/dev/null); do kill_tree "$c"; done
  kill -KILL "$p" 2>/dev/null || true
}

faults_cleanup() {
  local rc=$? p
  for p in "${BG_PIDS[@]}"; do kill_tree "$p"; done
  if [ "$failures" -eq 0 ] && [ "$rc" -eq 0 ]; then
    rm -rf "$WORK"
  else
    for f in "$WORK"/*/log* "$WORK"/log*; do
      [ -f "$f" ] || continue
      echo "---- last lines of $f"; tail -n 15 "$f"
    done
    echo "(scratch kept in $WORK)"
  fi
}
trap faults_cleanup EXIT
trap 'exit 130' INT TERM

# bg LOG CMD...: starts CMD in the background with stdout+stderr to LOG; sets BG (its PID).
bg() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 &
  BG=$!
  BG_PIDS+=("$BG")
}

# wait_for LOG REGEX SECONDS PID: until a line of LOG matches REGEX (0), PID ended (1) or
# the time is up (2).
wait_for() {
  local log=$1 re=$2 secs=$3 pid=$4 t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$secs" ]; do
    grep -qE "$re" "$log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { grep -qE "$re" "$log" 2>/dev/null && return 0; return 1; }
    sleep 0.02
  done
  return 2
}

# wait_rc PID SECONDS: waits for a background PID; its exit code, or 124 after SECONDS (then
# it is killed).
wait_rc() {
  local pid=$1 secs=$2 t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    if [ $((SECONDS - t0)) -ge "$secs" ]; then
      kill_tree "$pid"
      wait "$pid" 2>/dev/null
      return 124
    fi
    sleep 0.02
  done
  wait "$pid"
}

# ranks_of PID: the poly_train processes under mpiexec PID (its direct children).
ranks_of() { pgrep -P "$1" 2>/dev/null | tr '\n' ' '; }

# none_left DIR SECONDS: waits until no process runs with `--out DIR` on its command line
# (every run of a case has its own DIR; an exited rank's zombie has no command line any more);
# false, naming what is left, if some still run after SECONDS. A state to wait for, not a sleep:
# on a busy machine the last ranks may take a moment to die after mpiexec has exited.
none_left() {
  local dir=$1 secs=$2 t0=$SECONDS left
  while left=$(pgrep -f -- "--out $dir( |$)" | tr '\n' ' ') && [ -n "$left" ]; do
    [ $((SECONDS - t0)) -lt "$secs" ] || { echo "left behind: $left"; return 1; }
    sleep 0.05
  done
}

# Every rank's own exit code, not only mpiexec's: "${RECORD[@]}" goes between mpiexec's options
# and the program. Each rank then runs under a wrapper that writes its exit code to
# $RC_DIR/rc.<rank> (RC_DIR from the environment; the wrapper outlives the signals mpiexec
# sends to the rank's process group), and mpiexec does not end the other ranks when one exits
# non-zero, so none is killed before it reports.
cat >"$WORK/rankrc.sh" <<'WRAP'
#!/bin/bash
trap : TERM USR1
"$@"
rc=$?
echo "$rc" >"$RC_DIR/rc.$OMPI_COMM_WORLD_RANK"
exit "$rc"
WRAP
chmod +x "$WORK/rankrc.sh"
RECORD=(--mca orte_abort_on_non_zero_status 0 "$WORK/rankrc.sh")

# every_rank_exited DIR N CODE NAME: DIR/rc.0 .. rc.<N-1> all hold CODE (a failure per rank).
every_rank_exited() {
  local r got
  for ((r = 0; r < $2; r++)); do
    got=$(cat "$1/rc.$r" 2>/dev/null)
    [ "$got" = "$3" ] || fail "$4: rank $r exited '${got:-?}', expected $3"
  done
}

# rank_pids PID: the processes of the program under test that mpiexec PID started (its children,
# or its grandchildren under RECORD's wrapper), in rank order.
rank_pids() {
  local c p r out=()
  for c in $(pgrep -P "$1"); do
    for p in $c $(pgrep -P "$c"); do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$(basename "$BIN" | cut -c1-15)" ] || continue
      r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
      [ -n "$r" ] && out[r]=$p
    done
  done
  echo "${out[@]}"
}

# now_ms: wall clock in milliseconds.
now_ms() { date +%s%3N; }

finish() {
  echo "$((failures == 0 ? 1 : 0)) passed, $failures failed"
  [ "$failures" -eq 0 ]
}
