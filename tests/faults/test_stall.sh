#!/usr/bin/env bash
# The stall watchdog (--timeout, distributed/watchdog.h):
#   stop-middle / stop-rank0   kill -STOP of rank 1 / rank 0 with --timeout 5: the job ends with
#                              exit code 4, the report names the stopped rank, the checkpoint
#                              written before is byte-identical afterwards, and --resume from it
#                              ends bitwise where an uninterrupted run ends;
#   stop-continue              a rank stopped for 2 s (< the timeout) and continued: training
#                              goes on, and its state when stopped later by SIGUSR1 is bitwise
#                              an uninterrupted run's of the same length.
# Why the margins hold on a loaded 2-core machine: every duration here is a timer, not a race.
# The waiting ranks spin in MPI_Test and read the clock; they declare the stall at the
# timeout (5 s) and wait the roll call's grace (min(5 s, timeout)) for the stopped rank, which
# cannot answer; then mpiexec's teardown takes 2 x odls_base_sigkill_timeout (Open MPI's default
# 1 s; the 10 s grace of the Slurm job file is for test_signals). That is ~12 s; the bound is
# 30 s (timeout + 25 s), room for a descheduled rank or a slow teardown on a busy machine and
# still far below a watchdog that never fires (wait_rc gives up after 60 s). Only the runs meant
# to stall get --timeout 5; the reference and resumed runs keep the default (300 s), so a rank
# descheduled for seconds there cannot end them. Nothing depends on how
# fast training runs (a step is ~20 us here when quiet and ~2.5 ms with two CPU hogs): the runs
# are stopped at states (a progress line), and the stalled run writes no checkpoint during
# training (its checkpoint comes from a run before it), so no write can be in flight.
# Usage: test_stall.sh <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir>
source "$(dirname "$0")/lib.sh" "$@"

TIMEOUT=5
E0=2000  # epochs of the checkpoint the stalled runs resume from
common=(--no-plot --log-every 1000)         # every run
watched=(--timeout "$TIMEOUT")              # the runs meant to stall, and the one that must not

# train DIR EPOCHS [ARGS]: a run to its end, with a checkpoint.
train() {
  local dir=$1 epochs=$2
  shift 2
  mkdir -p "$dir"
  "${MPI[@]}" -n 3 "$BIN" "${common[@]}" --epochs "$epochs" --out "$dir" --checkpoint "$dir/ck" "$@" >"$dir/log" 2>&1 \
    || fail "run of $epochs epochs in $dir exited $?"
}

# started DIR PID: waits for a progress line of the run in DIR; sets RANKS to its 3 ranks' PIDs.
started() {
  wait_for "$1/log" '^progress: epoch' 120 "$2" || { fail "$(basename "$1"): no progress line within 120 s"; return 1; }
  read -r -a RANKS <<<"$(ranks_of "$2")"
  [ "${#RANKS[@]}" -eq 3 ] || { fail "$(basename "$1"): expected 3 rank processes, found '${RANKS[*]}'"; return 1; }
}

train "$WORK/start" "$E0"
train "$WORK/ref" $((E0 + 1000))

# stop_case NAME INDEX: resume from the E0 checkpoint, stop rank INDEX for good.
stop_case() {
  local name=$1 which=$2 d=$WORK/$1
  mkdir -p "$d/int" "$d/res"
  cp "$WORK/start/ck" "$d/int/ck"
  bg "$d/int/log" "${MPI[@]}" -n 3 "$BIN" "${common[@]}" "${watched[@]}" --epochs 10000000 --out "$d/int" --checkpoint "$d/int/ck" --resume
  local pid=$BG
  started "$d/int" "$pid" || return
  local victim=${RANKS[$which]}
  kill -STOP "$victim"
  local t0 rc ms
  t0=$(now_ms)
  wait_rc "$pid" 60; rc=$?
  ms=$(( $(now_ms) - t0 ))
  kill -CONT "$victim" 2>/dev/null
  [ "$rc" -eq 4 ] || fail "$name: exit code $rc, expected 4 (stall)"
  [ "$ms" -lt $(( (TIMEOUT + 25) * 1000 )) ] || fail "$name: the job ended $ms ms after the stop (bound: timeout + 25 s)"
  grep -Eq "^stall: rank [0-9]+ \(node .*\) waited [0-9.]+ s \(timeout $TIMEOUT s\) for .* at epoch [0-9]+; rank $which did not arrive" "$d/int/log" \
    || fail "$name: no stall report naming rank $which"
  grep -q "the last checkpoint '$d/int/ck' ($E0 epochs) is kept: continue with --resume" "$d/int/log" \
    || fail "$name: the report does not name the kept checkpoint"
  cmp -s "$WORK/start/ck" "$d/int/ck" || fail "$name: the checkpoint changed"
  echo "  $name: kill -STOP of rank $which -> exit $rc after $ms ms"
  # Resume from it: bitwise the uninterrupted run.
  cp "$d/int/ck" "$d/res/ck"
  "${MPI[@]}" -n 3 "$BIN" "${common[@]}" --epochs $((E0 + 1000)) --out "$d/res" --checkpoint "$d/res/ck" --resume \
    >"$d/res/log" 2>&1 || { fail "$name: resume exited $?"; return; }
  grep -q "resumed from '$d/res/ck' after epoch $E0 of $((E0 + 1000))" "$d/res/log" || fail "$name: no 'resumed from' line"
  cmp -s "$d/res/ck" "$WORK/ref/ck" || fail "$name: final checkpoint differs from the uninterrupted run's"
  cmp -s "$d/res/eval.csv" "$WORK/ref/eval.csv" || fail "$name: eval.csv differs from the uninterrupted run's"
  cmp -s "$d/res/loss.csv" "$WORK/ref/loss.csv" || fail "$name: loss.csv differs from the uninterrupted run's"
}

# A rank stopped for 2 s (below the timeout; the others wait for it, then go on), then the
# run stopped by SIGUSR1 at a later progress line: its checkpoint equals an uninterrupted run's
# of the same length.
continue_case() {
  local d=$WORK/continue
  mkdir -p "$d"
  bg "$d/log" "${MPI[@]}" -n 3 "$BIN" "${common[@]}" "${watched[@]}" --epochs 10000000 --out "$d" --checkpoint "$d/ck"
  local pid=$BG
  started "$d" "$pid" || return
  kill -STOP "${RANKS[1]}"
  sleep 2  # the stop's length: what this case is about (the timeout is 5 s)
  kill -CONT "${RANKS[1]}"
  local seen
  seen=$(grep -c '^progress: epoch' "$d/log")
  local t0=$SECONDS
  until [ "$(grep -c '^progress: epoch' "$d/log")" -gt "$seen" ]; do
    kill -0 "$pid" 2>/dev/null || { fail "continue: the run ended after the stop"; return; }
    [ $((SECONDS - t0)) -lt 120 ] || { fail "continue: no progress within 120 s after the continue"; return; }
    sleep 0.02
  done
  kill -USR1 "$pid"
  local rc
  wait_rc "$pid" 60; rc=$?
  [ "$rc" -eq 75 ] || { fail "continue: exit code $rc, expected 75 (stopped by SIGUSR1)"; return; }
  grep -Eq "^stall:|\] stall:" "$d/log" && fail "continue: a stall was reported"
  local stop
  stop=$(sed -En 's/^poly_train: SIGUSR1: all ranks stopped after ([0-9]+) of .*/\1/p' "$d/log")
  [ -n "$stop" ] || { fail "continue: no stop message"; return; }
  train "$WORK/ref$stop" "$stop"
  cmp -s "$d/ck" "$WORK/ref$stop/ck" || fail "continue: the checkpoint at epoch $stop differs from an uninterrupted run's"
  echo "  continue: stopped 2 s, trained on, checkpoint at epoch $stop equals the uninterrupted run's"
}

run_case "kill -STOP of the middle rank" stop_case stop-middle 1
run_case "kill -STOP of rank 0" stop_case stop-rank0 0
run_case "a rank stopped for 2 s and continued" continue_case

# --timeout is validated like every option.
for bad in -1 0.5 1e8 x; do
  out=$("$BIN" --timeout "$bad" 2>&1); rc=$?
  [ "$rc" -eq 2 ] && grep -Eq "^poly_train: error: --timeout: (must be 0 \(off\) or in \[1, 10000000\], got|expected a number)" <<<"$out" \
    || fail "--timeout $bad: exit $rc: $out"
done
pass "--timeout -1, 0.5, 1e8, x refused"

finish
