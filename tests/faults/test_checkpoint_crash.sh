#!/usr/bin/env bash
# A crash during a checkpoint save, and a rank that never arrives at the start-up:
#   killed-partial   rank 0 (the writer) is killed with SIGKILL while half of the checkpoint of
#                    epoch 300 is in its temporary: the checkpoint of epoch 200 is intact,
#                    --resume uses it, removes the dead writer's temporary, and ends bitwise
#                    where an uninterrupted run ends (eval.csv, loss.csv, the final checkpoint);
#   killed-rotated   the same, killed between the save's two renames (the file of epoch 200
#                    already renamed to ck.prev, the new one not yet in place): --resume warns
#                    naming both files, continues from ck.prev, ends bitwise the same;
#   stall-resume /   rank 0 never gets to the resume's (or --init's) broadcast: the other ranks
#   stall-init       wait through the watchdog, and the job ends with the stall code 4 naming
#                    rank 0, instead of hanging.
# The moments are states, not timings: HDDP_TEST_PAUSE="<point>:<n>:<marker>" makes the writer
# stop there, write its pid into the marker and wait (core/util.h test_pause); the test waits
# for the marker, then kills that pid.
# Usage: test_checkpoint_crash.sh <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir>
source "$(dirname "$0")/lib.sh" "$@"

E=600
TIMEOUT=5  # the stalled runs' watchdog (test_stall.sh explains the margins)
base=(--no-plot --log-every 1000 --epochs "$E")
common=("${base[@]}" --checkpoint-every 100)

# wait_file FILE SECONDS PID: until FILE exists and is not empty (0), PID ended (1) or the time
# is up (2).
wait_file() {
  local f=$1 secs=$2 pid=$3 t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$secs" ]; do
    [ -s "$f" ] && return 0
    kill -0 "$pid" 2>/dev/null || { [ -s "$f" ] && return 0; return 1; }
    sleep 0.02
  done
  return 2
}

ref=$WORK/ref
mkdir -p "$ref"
"${MPI[@]}" -n 3 "$BIN" "${common[@]}" --out "$ref" --checkpoint "$ref/ck" --export "$ref/w.safetensors" \
  >"$ref/log" 2>&1 || fail "the uninterrupted run exited $?"

# killed MOMENT: the third save (epoch 300) stops at MOMENT, its writer is killed; then resume.
killed() {
  local moment=$1 d=$WORK/killed-$1 rc writer
  mkdir -p "$d"
  bg "$d/log" env HDDP_TEST_PAUSE="checkpoint-$moment:3:$d/paused" "${MPI[@]}" -n 3 "$BIN" "${common[@]}" \
    --out "$d" --checkpoint "$d/ck"
  local pid=$BG
  wait_file "$d/paused" 60 "$pid" || { fail "$moment: the save never reached the pause"; return; }
  writer=$(cat "$d/paused")
  kill -KILL "$writer"
  wait_rc "$pid" 60; rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$moment: the killed run exited $rc"
  none_left "$d" 30 || fail "$moment: ranks left behind"
  local tmp=$d/ck.tmp.$writer
  [ -f "$tmp" ] || fail "$moment: no temporary $tmp left by the killed writer"
  if [ "$moment" = partial ]; then
    "$TOOL" info "$d/ck" | grep -qx "step 200" || fail "partial: ck is not the checkpoint of epoch 200"
    "$TOOL" info "$d/ck.prev" | grep -qx "step 100" || fail "partial: ck.prev is not the checkpoint of epoch 100"
    [ "$(stat -c %s "$tmp")" -lt "$(stat -c %s "$d/ck")" ] || fail "partial: the temporary is not partial"
  else
    [ ! -e "$d/ck" ] || fail "rotated: ck exists (the kill was not between the renames)"
    "$TOOL" info "$d/ck.prev" | grep -qx "step 200" || fail "rotated: ck.prev is not the checkpoint of epoch 200"
  fi
  "${MPI[@]}" -n 3 "$BIN" "${common[@]}" --out "$d" --checkpoint "$d/ck" --resume >"$d/log2" 2>&1 \
    || fail "$moment: the resumed run exited $?"
  grep -q "removed '$tmp', left by an interrupted checkpoint write" "$d/log2" || fail "$moment: no notice of the stale temporary"
  compgen -G "$d/ck.tmp.*" >/dev/null && fail "$moment: temporaries left: $(ls "$d"/ck.tmp.*)"
  # The file resumed from: ck, or ck.prev when the kill fell between the renames.
  local from=$d/ck
  [ "$moment" = rotated ] && from=$d/ck.prev
  grep -q "resumed from '$from' after epoch 200 of $E" "$d/log2" || fail "$moment: did not resume from '$from' after epoch 200"
  if [ "$moment" = rotated ]; then
    grep -q "warning: '$d/ck' is missing .*; resuming from the previous checkpoint '$d/ck.prev'" "$d/log2" \
      || fail "rotated: no warning naming both files"
  else
    grep -q "warning" "$d/log2" && fail "partial: a warning although ck was intact: $(grep warning "$d/log2")"
  fi
  for f in eval.csv loss.csv ck; do
    cmp -s "$d/$f" "$ref/$f" || fail "$moment: $f differs from the uninterrupted run's"
  done
}
run_case "killed while the checkpoint's temporary is half written: the intact checkpoint resumes bitwise" killed partial
run_case "killed between the save's two renames: ck.prev resumes bitwise, with a warning" killed rotated

# stalled POINT WHAT ARGS...: rank 0 stops at POINT before its first broadcast; exit 4, the
# report naming rank 0 and WHAT the others waited for.
stalled() {
  local point=$1 what=$2 d=$WORK/stall-$1 rc
  shift 2
  mkdir -p "$d"
  cp "$ref/ck" "$d/ck"
  bg "$d/log" env HDDP_TEST_PAUSE="$point:1:$d/paused" "${MPI[@]}" -n 3 "$BIN" "${base[@]}" --timeout "$TIMEOUT" \
    --out "$d" "$@"
  local pid=$BG
  wait_rc "$pid" 60; rc=$?
  [ -s "$d/paused" ] || fail "$point: rank 0 never reached the pause"
  [ "$rc" -eq 4 ] || fail "$point: exit code $rc, expected 4 (stall)"
  grep -q "stall: rank 1 (node .*) waited .* for $what at start-up; rank 0 did not arrive" "$d/log" \
    || fail "$point: no report naming rank 0 and $what: $(grep -m1 stall: "$d/log")"
  none_left "$d" 30 || fail "$point: ranks left behind"
}
run_case "a rank that never reaches the resume's broadcast: stall, exit 4" \
  stalled resume-read "the resume's check of the checkpoint" --checkpoint "$WORK/stall-resume-read/ck" --resume
run_case "a rank that never reaches --init's broadcast: stall, exit 4" \
  stalled init-read "the broadcast of the --init weights" --init "$ref/w.safetensors"

finish
