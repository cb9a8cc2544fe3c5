#!/usr/bin/env bash
# A rank that dies or throws mid-training ends the whole job: within 30 s, with a non-zero
# exit code, and no rank left behind (no rank waits forever in the reducer).
#   kill -9 of a middle rank, under each reducer mode (MPI_Test progress, progress thread,
#   blocking allreduce), and of rank 0: Open MPI's mpiexec notices the dead rank and ends the
#   job: SIGCONT, SIGTERM and SIGKILL to the others, odls_base_sigkill_timeout (1 s) apart
#   (measured here: ~2 s). The stall watchdog (--timeout 300) never gets to act.
#   --debug-throw: the throwing rank prints its message, then MPI_Abort ends every rank.
# Usage: test_dead_rank.sh <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir>
source "$(dirname "$0")/lib.sh" "$@"

# Why the margins hold on a busy machine: a dead rank is seen by its daemon at once (SIGCHLD),
# and mpiexec's teardown is timed (2 x odls_base_sigkill_timeout, 1 s here), so the job ends in
# ~2-3 s whatever the load; 30 s is the deadline for a hang, not a speed check. Leftover ranks
# are waited for as a state (none_left), with 10 s to disappear.
kill_case() {
  local name=$1 which=$2 d=$WORK/$1
  shift 2
  mkdir -p "$d"
  bg "$d/log" "${MPI[@]}" -n 3 "$BIN" --no-plot --log-every 1000 --epochs 10000000 --out "$d" "$@"
  local pid=$BG
  wait_for "$d/log" '^progress: epoch' 60 "$pid" || { fail "$name: no progress line"; kill_tree "$pid"; return; }
  local ranks victim t0 rc ms
  read -r -a ranks <<<"$(ranks_of "$pid")"
  [ "${#ranks[@]}" -eq 3 ] || { fail "$name: expected 3 rank processes under mpiexec, found '${ranks[*]}'"; return; }
  victim=${ranks[$which]}
  t0=$(now_ms)
  kill -KILL "$victim"
  wait_rc "$pid" 30; rc=$?
  ms=$(( $(now_ms) - t0 ))
  [ "$rc" -ne 0 ] || fail "$name: exit code 0 after a rank was killed"
  [ "$rc" -ne 124 ] || fail "$name: the job did not end within 30 s of kill -9"
  none_left "$d" 10 || fail "$name: rank processes left behind"
  echo "  $name: kill -9 of process $victim -> mpiexec exit $rc after $ms ms"
}

run_case kill-middle-test kill_case kill-middle-test 1
run_case kill-middle-thread kill_case kill-middle-thread 1 --reduce-mode thread
run_case kill-middle-blocking kill_case kill-middle-blocking 1 --reduce-mode blocking
run_case kill-rank0 kill_case kill-rank0 0

# A rank that throws: its message, then MPI_Abort ends all ranks (without the abort, the
# others would wait in the reducer forever: the run would hit the 30 s deadline). stdout and
# stderr go to separate files: the error line is written in pieces (std::cerr), which
# mpiexec may interleave with other ranks' loss lines. Open MPI's own "MPI_ABORT was invoked"
# notice is not required: it is sometimes lost (ORTE_ERROR_LOG in show_help.c).
for r in 1 0; do
  d=$WORK/throw$r; mkdir -p "$d"
  t0=$(now_ms)
  "${MPI[@]}" -n 3 "$BIN" --no-plot --epochs 100000 --out "$d" --debug-throw "300:$r" >"$d/log" 2>"$d/log.err" &
  pid=$!
  BG_PIDS+=("$pid")
  wait_rc "$pid" 30; rc=$?
  ms=$(( $(now_ms) - t0 ))
  [ "$rc" -eq 1 ] || fail "throw on rank $r: exit code $rc, expected 1 (MPI_Abort with code 1)"
  grep -q "\[rank $r\] error: injected failure (--debug-throw) at epoch 300 on rank $r" "$d/log.err" \
    || fail "throw on rank $r: the rank's message is missing"
  none_left "$d" 10 || fail "throw on rank $r: rank processes left behind"
  [ -e "$d/eval.csv" ] && fail "throw on rank $r: outputs written"
  echo "  throw on rank $r: exit $rc after $ms ms (whole run)"
  pass "exception on rank $r"
done

finish
