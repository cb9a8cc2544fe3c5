#!/usr/bin/env bash
# Signals at the awkward moments (test_signals.sh has the plain ways a signal arrives), each
# followed by --resume and a bitwise comparison with a run that never stopped (the final
# checkpoint, eval.csv, loss.csv):
#   one-rank      SIGTERM to rank 1 of 3 only: the ranks' agreement spreads it; every rank
#                 exits 75 (each rank's own exit code is recorded, not only mpiexec's);
#   during-write  SIGTERM to every rank while rank 0 is half-way through writing a periodic
#                 checkpoint (epoch 200, --checkpoint-every 200, --check-every 1): the write
#                 completes, the ranks stop at the next agreement, epoch 201, exactly;
#   second-signal SIGUSR1 to mpiexec, then, while rank 0 writes the stop's checkpoint, SIGTERM
#                 to every rank and SIGUSR1 again: one stop, one checkpoint, the first signal's
#                 name, exit 75.
# "While rank 0 writes" is a state, not a time: HDDP_TEST_PAUSE=checkpoint-partial:1:MARKER
# (core/util.h test_pause) makes rank 0 write its pid into MARKER with half the checkpoint in
# the temporary file and wait until MARKER is removed.
# Every rank's own exit code is recorded (lib.sh, RECORD).
# Usage: test_signal_cases.sh <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir>
source "$(dirname "$0")/lib.sh" "$@"

common=(--no-plot --log-every 1000)
# launch DIR ENV... -- ARGS...: 3 ranks in the background under the exit-code wrapper (log:
# DIR/log, codes: DIR/rc.<rank>); sets BG.
launch() {
  local d=$1
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  rm -f "$d"/rc.*
  bg "$d/log" env RC_DIR="$d" "${envs[@]}" "${MPI[@]}" -n 3 "${RECORD[@]}" "$BIN" "${common[@]}" "$@"
}

# stop_epoch DIR SIG NAME: the epoch of the one stop message naming SIG (echoed), after
# checking the checkpoint holds that epoch and no temporary is left beside it.
stop_epoch() {
  local d=$1 sig=$2 name=$3 msgs stop info
  msgs=$(grep -E "^poly_train: SIG[A-Z0-9]+: all ranks stopped after" "$d/log")
  [ "$(grep -c . <<<"$msgs")" -eq 1 ] || { fail "$name: expected one stop message, got: $msgs"; return 1; }
  grep -Eq "^poly_train: SIG$sig: all ranks stopped after [0-9]+ of 10000000 epochs; checkpoint '$d/ck' written" <<<"$msgs" \
    || { fail "$name: the stop message does not name SIG$sig and the checkpoint: $msgs"; return 1; }
  stop=$(sed -E 's/.* stopped after ([0-9]+) of .*/\1/' <<<"$msgs")
  info=$("$TOOL" info "$d/ck") || { fail "$name: checkpoint unreadable: $info"; return 1; }
  [ "$(sed -n 's/^step //p' <<<"$info")" = "$stop" ] || fail "$name: checkpoint epoch differs from the message ($stop): $info"
  compgen -G "$d/ck.tmp.*" >/dev/null && fail "$name: a temporary is left: $(ls "$d")"
  echo "$stop"
}

# resume_matches NAME DIR STOP TOTAL: --resume from DIR/ck to TOTAL epochs ends bitwise where an
# uninterrupted run of TOTAL epochs ends (that run is made once per TOTAL, in ref-TOTAL).
resume_matches() {
  local name=$1 d=$2 stop=$3 total=$4 ref=$WORK/ref-$4
  mkdir -p "$d/res" "$ref"
  cp "$d/ck" "$d/res/ck"
  "${MPI[@]}" -n 3 "$BIN" "${common[@]}" --epochs "$total" --out "$d/res" --checkpoint "$d/res/ck" --resume \
    >"$d/res/log" 2>&1 || { fail "$name: resume exited $?"; return; }
  grep -q "resumed from '$d/res/ck' after epoch $stop of $total" "$d/res/log" || fail "$name: no 'resumed from' line"
  if [ ! -e "$ref/ck" ]; then
    "${MPI[@]}" -n 3 "$BIN" "${common[@]}" --epochs "$total" --out "$ref" --checkpoint "$ref/ck" >"$ref/log" 2>&1 \
      || { fail "$name: uninterrupted run exited $?"; return; }
  fi
  local f
  for f in ck eval.csv loss.csv; do
    cmp -s "$d/res/$f" "$ref/$f" || fail "$name: $f after the resume differs from the uninterrupted run's"
  done
}

# paused DIR PID: waits until rank 0 is paused in a checkpoint write (DIR/marker holds its pid).
paused() {
  local t0=$SECONDS
  until [ -s "$1/marker" ]; do
    kill -0 "$2" 2>/dev/null || { fail "$(basename "$1"): the run ended before rank 0 paused in the write"; return 1; }
    [ $((SECONDS - t0)) -lt 60 ] || { fail "$(basename "$1"): rank 0 never paused in the checkpoint write"; return 1; }
    sleep 0.02
  done
}

one_rank() {
  local d=$WORK/one-rank pid ranks rc stop
  mkdir -p "$d"
  launch "$d" -- --epochs 10000000 --out "$d" --checkpoint "$d/ck" --checkpoint-every 0
  pid=$BG
  wait_for "$d/log" '^progress: epoch' 60 "$pid" || { fail "one-rank: no progress line"; return; }
  read -r -a ranks <<<"$(rank_pids "$pid")"
  [ "${#ranks[@]}" -eq 3 ] || { fail "one-rank: expected 3 ranks, found '${ranks[*]}'"; return; }
  kill -TERM "${ranks[1]}"
  wait_rc "$pid" 60; rc=$?
  [ "$rc" -ne 124 ] || { fail "one-rank: the job did not stop within 60 s of SIGTERM to rank 1"; return; }
  every_rank_exited "$d" 3 75 one-rank
  stop=$(stop_epoch "$d" TERM one-rank) || return
  echo "  one-rank: SIGTERM to rank 1 only: all stopped after epoch $stop"
  resume_matches one-rank "$d" "$stop" $((stop + 500))
}

during_write() {
  local d=$WORK/during-write pid p stop
  mkdir -p "$d"
  launch "$d" HDDP_TEST_PAUSE="checkpoint-partial:1:$d/marker" -- --epochs 10000000 --out "$d" --checkpoint "$d/ck" \
    --checkpoint-every 200 --check-every 1
  pid=$BG
  paused "$d" "$pid" || return
  for p in $(rank_pids "$pid"); do kill -TERM "$p"; done
  rm -f "$d/marker"
  wait_rc "$pid" 60
  every_rank_exited "$d" 3 75 during-write
  stop=$(stop_epoch "$d" TERM during-write) || return
  [ "$stop" -eq 201 ] || fail "during-write: stopped after epoch $stop, expected 201 (the agreement after the write)"
  if [ -e "$d/ck.prev" ]; then  # the generation before: the write that was interrupted, complete
    [ "$("$TOOL" info "$d/ck.prev" | sed -n 's/^step //p')" = 200 ] || fail "during-write: ck.prev is not epoch 200's checkpoint"
  fi
  resume_matches during-write "$d" "$stop" 400
}

second_signal() {
  local d=$WORK/second-signal pid p stop
  mkdir -p "$d"
  launch "$d" HDDP_TEST_PAUSE="checkpoint-partial:1:$d/marker" -- --epochs 10000000 --out "$d" --checkpoint "$d/ck" \
    --checkpoint-every 0
  pid=$BG
  wait_for "$d/log" '^progress: epoch' 60 "$pid" || { fail "second-signal: no progress line"; return; }
  kill -USR1 "$pid"
  paused "$d" "$pid" || return  # the stop's checkpoint (the only write of this run)
  for p in $(rank_pids "$pid"); do kill -TERM "$p"; done
  kill -USR1 "$pid"
  rm -f "$d/marker"
  wait_rc "$pid" 60
  every_rank_exited "$d" 3 75 second-signal
  stop=$(stop_epoch "$d" USR1 second-signal) || return
  echo "  second-signal: SIGUSR1, then SIGTERM and SIGUSR1 during the stop's write: one stop after epoch $stop"
  resume_matches second-signal "$d" "$stop" $((stop + 500))
}

run_case "SIGTERM to one rank of 3: every rank exits 75, resume bitwise" one_rank
run_case "SIGTERM during a checkpoint write: write completed, stop at the next epoch, resume bitwise" during_write
run_case "a second signal during the stop: one checkpoint, exit 75, resume bitwise" second_signal

finish
