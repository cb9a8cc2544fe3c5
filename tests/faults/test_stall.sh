#!/usr/bin/env bash
# The stall watchdog (--timeout, core/watchdog.h):
#   stop-middle / stop-rank0   kill -STOP of rank 1 / rank 0 with --timeout 5: the job ends with
#                              exit code 4, the report names the stopped rank, the checkpoint
#                              written before is byte-identical afterwards, and --resume from it
#                              ends bitwise where an uninterrupted run ends;
#   stop-continue              a rank stopped for 2 s (< the timeout) and continued: the run
#                              completes and its outputs equal an uninterrupted run's.
# Why the margins hold on a loaded 2-core machine: every time here is a timer, not a race.
# The waiting ranks spin in MPI_Test and read the clock; they declare the stall at the
# timeout (5 s) and wait the roll call's grace (min(5 s, timeout)) for the stopped rank, which
# cannot answer; then mpiexec's teardown takes 2 x odls_base_sigkill_timeout (Open MPI's default
# 1 s: these runs use it, the graceful-stop grace of scripts/run.sh is for test_signals). That
# is ~12 s of a 15 s bound (timeout + 10 s); the load only adds scheduling delays of
# milliseconds to each step. The stopped rank is stopped right after a checkpoint appears, and
# the next one is 100000 epochs (seconds) away, so no write is in flight when it stops.
# Usage: test_stall.sh <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir>
source "$(dirname "$0")/lib.sh" "$@"

TIMEOUT=5
EVERY=100000
common=(--no-plot --log-every 20000 --timeout "$TIMEOUT")

# reference DIR EPOCHS: an uninterrupted run of EPOCHS with the same settings.
reference() {
  mkdir -p "$1"
  "${MPI[@]}" -n 3 "$BIN" "${common[@]}" --epochs "$2" --out "$1" --checkpoint "$1/ck" >"$1/log" 2>&1 \
    || fail "reference run of $2 epochs exited $?"
}

# stop_case NAME INDEX: rank INDEX stopped for good after the first checkpoint.
stop_case() {
  local name=$1 which=$2 d=$WORK/$1
  mkdir -p "$d/int" "$d/res"
  bg "$d/int/log" "${MPI[@]}" -n 3 "$BIN" "${common[@]}" --epochs 10000000 --out "$d/int" \
    --checkpoint "$d/int/ck" --checkpoint-every "$EVERY"
  local pid=$BG t0=$SECONDS
  until [ -f "$d/int/ck" ]; do
    kill -0 "$pid" 2>/dev/null || { fail "$name: the run ended before its first checkpoint"; return; }
    [ $((SECONDS - t0)) -lt 120 ] || { fail "$name: no checkpoint within 120 s"; return; }
    sleep 0.01
  done
  local ranks victim
  read -r -a ranks <<<"$(ranks_of "$pid")"
  [ "${#ranks[@]}" -eq 3 ] || { fail "$name: expected 3 rank processes, found '${ranks[*]}'"; return; }
  victim=${ranks[$which]}
  kill -STOP "$victim"
  local ms0 rc ms
  ms0=$(now_ms)
  cp "$d/int/ck" "$d/snapshot"
  wait_rc "$pid" 60; rc=$?
  ms=$(( $(now_ms) - ms0 ))
  kill -CONT "$victim" 2>/dev/null
  [ "$rc" -eq 4 ] || fail "$name: exit code $rc, expected 4 (stall)"
  [ "$ms" -lt $(( (TIMEOUT + 10) * 1000 )) ] || fail "$name: the job ended $ms ms after the stop (bound: timeout + 10 s)"
  grep -Eq "^stall: rank [0-9]+ \(node .*\) waited [0-9.]+ s \(timeout $TIMEOUT s\) for .* at epoch [0-9]+; rank $which did not arrive" "$d/int/log" \
    || fail "$name: no stall report naming rank $which"
  grep -q "the last checkpoint '$d/int/ck' ($EVERY epochs) is kept: continue with --resume" "$d/int/log" \
    || fail "$name: the report does not name the kept checkpoint"
  cmp -s "$d/snapshot" "$d/int/ck" || fail "$name: the checkpoint changed after the stop"
  echo "  $name: kill -STOP of rank $which -> exit $rc after $ms ms"

  # Resume from it: bitwise the uninterrupted run.
  local total=$((EVERY + 3000))
  cp "$d/int/ck" "$d/res/ck"
  "${MPI[@]}" -n 3 "$BIN" "${common[@]}" --epochs "$total" --out "$d/res" --checkpoint "$d/res/ck" --resume \
    >"$d/res/log" 2>&1 || { fail "$name: resume exited $?"; return; }
  grep -q "resumed from '$d/res/ck' at epoch $EVERY of $total" "$d/res/log" || fail "$name: no 'resumed from' line"
  [ -d "$WORK/ref$total" ] || reference "$WORK/ref$total" "$total"
  cmp -s "$d/res/ck" "$WORK/ref$total/ck" || fail "$name: final checkpoint differs from the uninterrupted run's"
  cmp -s "$d/res/eval.csv" "$WORK/ref$total/eval.csv" || fail "$name: eval.csv differs from the uninterrupted run's"
  cmp -s "$d/res/loss.csv" "$WORK/ref$total/loss.csv" || fail "$name: loss.csv differs from the uninterrupted run's"
}

# A rank stopped for 2 s (well below the timeout; the others wait for it, then go on).
continue_case() {
  local d=$WORK/continue epochs=200000
  mkdir -p "$d"
  bg "$d/log" "${MPI[@]}" -n 3 "$BIN" "${common[@]}" --epochs "$epochs" --out "$d" --checkpoint "$d/ck"
  local pid=$BG
  wait_for "$d/log" '^progress: epoch' 60 "$pid" || { fail "continue: no progress line"; return; }
  local ranks
  read -r -a ranks <<<"$(ranks_of "$pid")"
  [ "${#ranks[@]}" -eq 3 ] || { fail "continue: expected 3 rank processes, found '${ranks[*]}'"; return; }
  kill -STOP "${ranks[1]}"
  sleep 2
  kill -CONT "${ranks[1]}"
  local rc
  wait_rc "$pid" 120; rc=$?
  [ "$rc" -eq 0 ] || { fail "continue: exit code $rc, expected 0"; return; }
  grep -Eq "^stall:|\] stall:" "$d/log" && fail "continue: a stall was reported"
  grep -q "training: $epochs epochs" "$d/log" || fail "continue: the run did not finish"
  reference "$WORK/ref$epochs" "$epochs"
  cmp -s "$d/ck" "$WORK/ref$epochs/ck" || fail "continue: final checkpoint differs from the uninterrupted run's"
  cmp -s "$d/eval.csv" "$WORK/ref$epochs/eval.csv" || fail "continue: eval.csv differs from the uninterrupted run's"
  cmp -s "$d/loss.csv" "$WORK/ref$epochs/loss.csv" || fail "continue: loss.csv differs from the uninterrupted run's"
}

run_case "kill -STOP of the middle rank" stop_case stop-middle 1
run_case "kill -STOP of rank 0" stop_case stop-rank0 0
run_case "a rank stopped for 2 s and continued" continue_case

# --timeout is validated like every option.
out=$("$BIN" --timeout -1 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "^poly_train: error: --timeout: must be in \[0, 10000000\] seconds" <<<"$out" \
  || fail "--timeout -1: exit $rc: $out"
pass "--timeout -1 refused"

finish
