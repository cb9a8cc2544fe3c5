#!/usr/bin/env bash
# SIGTERM / SIGUSR1 mid-run, then --resume: the resumed run must end bitwise equal to an
# uninterrupted run of the same length (final checkpoint: parameters, optimizer state, every
# rank's RNG, loss history; eval.csv; loss.csv; the epoch lines of the resumed part).
#
# Ways a signal reaches the ranks, each checked:
#   USR1 to mpiexec    mpiexec forwards it to every rank                    -> exit 75
#   TERM to the ranks  what slurmstepd does to a job step's tasks (scancel; srun-launched
#                      ranks also get --signal=USR1 this way; same handler) -> exit 75
#   TERM to mpiexec    mpiexec sends SIGCONT, waits odls_base_sigkill_timeout, sends SIGTERM,
#                      waits again, SIGKILLs; it exits 1 itself              -> non-zero,
#                      checkpoint written within the grace time
#   TERM to a singleton (no mpiexec)                                         -> exit 75
# TERM to mpiexec runs with slurm/run.sbatch's grace, OMPI_MCA_odls_base_sigkill_timeout=10
# (the contract: slurm/README.md, "Signals"). Why it holds on a busy machine: mpiexec stops
# reading the ranks' output during the grace, which poly_train's log lines no longer wait for
# (drivers/common/line_log.h); after SIGTERM the ranks need one agreement (at most ~5 ms of
# training away) and one checkpoint write (a few MB) - well under a second with two CPU hogs
# beside 3 ranks on 2 cores, against a 10 s grace. (Open MPI's default grace, 1 s, was seen to
# run out under load 3-5 while the ranks were blocked writing log lines.) The other cases use
# Open MPI's default: a stop that exits 75 makes mpiexec run the same timed sequence.
# The interrupted runs ask for 10^7 epochs (they never finish on their own) and are signalled
# after their first progress line; the resume and the reference then run to the stop epoch
# plus 1000 (at least one loss line each; under ASan with two CPU hogs a step of 3 ranks takes
# ~10 ms, so the replayed epochs dominate this test's time: it took 400 s of its 600 with 3000).
# Not fewer epochs per log line: during TERM-to-mpiexec's grace mpiexec reads none of the ranks'
# output, and at 100 epochs a line the stderr pipe (64 KiB) fills within the 10 s grace, so
# rank 0's stop message would wait for a reader that never comes (the loss lines never wait).
# Usage: test_signals.sh <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir>
source "$(dirname "$0")/lib.sh" "$@"

common=(--no-plot --log-every 1000 --checkpoint-every 5000)

GRACE=10  # slurm/run.sbatch's odls_base_sigkill_timeout

# one_case NAME NP TARGET SIG EXPECT_RC [GRACE]: interrupted run, resume, reference, comparisons.
one_case() {
  local name=$1 np=$2 target=$3 sig=$4 want=$5 grace=${6:-1} d=$WORK/$1
  local launch=(env "OMPI_MCA_odls_base_sigkill_timeout=$grace" "${MPI[@]}" -n "$np" "$BIN")
  [ "$np" -eq 0 ] && launch=("$BIN")  # its deadline: wait_rc below
  mkdir -p "$d/int" "$d/res" "$d/ref"

  bg "$d/int/log" "${launch[@]}" "${common[@]}" --epochs 10000000 --out "$d/int" --checkpoint "$d/int/ck"
  local pid=$BG
  if ! wait_for "$d/int/log" '^progress: epoch' 60 "$pid"; then
    fail "$name: no progress line within 60 s"; kill_tree "$pid"; return
  fi
  local t0 rc ms
  t0=$(now_ms)
  case $target in
    launcher) kill -"$sig" "$pid" ;;
    ranks) for p in $(ranks_of "$pid"); do kill -"$sig" "$p"; done ;;
  esac
  wait_rc "$pid" 60; rc=$?
  ms=$(( $(now_ms) - t0 ))
  if [ "$want" = nonzero ]; then
    { [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; } || fail "$name: exit code $rc, expected non-zero (not a timeout)"
  else
    [ "$rc" -eq "$want" ] || fail "$name: exit code $rc, expected $want"
  fi
  # TERM to mpiexec reaches the ranks `grace` s late and mpiexec SIGKILLs what is left `grace` s
  # after that; any exit 75 also makes mpiexec run that timed sequence. The agreement and the
  # checkpoint take well under a second even with two CPU hogs: 15 s, or 2 x grace + 5 s,
  # holds on a busy machine and still catches a run that did not stop on the signal.
  local bound=$((2 * grace + 5))
  [ "$bound" -ge 15 ] || bound=15
  [ "$ms" -lt $((bound * 1000)) ] || fail "$name: took $ms ms to stop (bound $bound s)"
  local msg stop
  msg=$(grep -E "^poly_train: SIG$sig: all ranks stopped after [0-9]+ of 10000000 epochs; checkpoint '.*' written" "$d/int/log")
  [ -n "$msg" ] || { fail "$name: no stop message"; return; }
  stop=$(sed -E 's/.* stopped after ([0-9]+) of .*/\1/' <<<"$msg")
  grep -q "^epoch 10000000\|training:" "$d/int/log" && fail "$name: the run was not stopped"
  local info
  info=$("$TOOL" info "$d/int/ck") || { fail "$name: checkpoint unreadable: $info"; return; }
  [ "$(sed -n 's/^step //p' <<<"$info")" = "$stop" ] || fail "$name: checkpoint epoch differs from the message ($stop): $info"
  [ "$stop" -gt 1000 ] || fail "$name: stopped at epoch $stop, before the first progress line (epoch 1000)"
  echo "  $name: stopped after $stop epochs, exit $rc, $ms ms after the signal"

  local total=$((stop + 1000))
  local plain=("${MPI[@]}" -n "$np" "$BIN")
  [ "$np" -eq 0 ] && plain=(timeout 120 "$BIN")
  cp "$d/int/ck" "$d/res/ck"
  "${plain[@]}" "${common[@]}" --epochs "$total" --out "$d/res" --checkpoint "$d/res/ck" --resume >"$d/res/log" 2>&1 \
    || { fail "$name: resume exited $?"; return; }
  grep -q "resumed from '$d/res/ck' after epoch $stop of $total" "$d/res/log" || fail "$name: no 'resumed from' line"
  "${plain[@]}" "${common[@]}" --epochs "$total" --out "$d/ref" --checkpoint "$d/ref/ck" >"$d/ref/log" 2>&1 \
    || { fail "$name: reference run exited $?"; return; }
  cmp -s "$d/res/ck" "$d/ref/ck" || fail "$name: final checkpoint differs from the uninterrupted run's"
  cmp -s "$d/res/eval.csv" "$d/ref/eval.csv" || fail "$name: eval.csv differs from the uninterrupted run's"
  cmp -s "$d/res/loss.csv" "$d/ref/loss.csv" || fail "$name: loss.csv differs from the uninterrupted run's"
  [ "$(wc -l <"$d/ref/loss.csv")" -eq $((total * (np > 0 ? np : 1) + 1)) ] || fail "$name: loss.csv has the wrong length"
  # The resumed part's loss lines equal the uninterrupted run's lines for the same epochs.
  diff <(grep '^epoch' "$d/res/log" | sort) \
       <(grep '^epoch' "$d/ref/log" | awk -v s="$stop" '{ e = $2; sub(",", "", e) } e + 0 >= s' | sort) >/dev/null \
    || fail "$name: the resumed run's loss lines differ from the uninterrupted run's"
  [ "$(grep -c '^epoch' "$d/res/log")" -gt 0 ] || fail "$name: the resumed run printed no loss lines"
}

run_case usr1-mpiexec one_case usr1-mpiexec 3 launcher USR1 75
run_case term-ranks one_case term-ranks 3 ranks TERM 75
run_case term-mpiexec one_case term-mpiexec 3 launcher TERM nonzero "$GRACE"
run_case term-singleton one_case term-singleton 0 launcher TERM 75

# Without --checkpoint a signal still stops every rank together, with exit 75 and a warning.
d=$WORK/nockpt; mkdir -p "$d"
bg "$d/log" "${MPI[@]}" -n 2 "$BIN" --no-plot --log-every 1000 --epochs 10000000 --out "$d"
pid=$BG
if wait_for "$d/log" '^progress: epoch' 60 "$pid"; then
  kill -USR1 "$pid"
  wait_rc "$pid" 60; rc=$?
  [ "$rc" -eq 75 ] || fail "no --checkpoint: exit code $rc, expected 75"
  grep -q "SIGUSR1: all ranks stopped after [0-9]* of 10000000 epochs; no --checkpoint, so the progress is lost" "$d/log" \
    || fail "no --checkpoint: no stop message"
  pass "signal without --checkpoint"
else
  fail "no --checkpoint: no progress line"
fi

finish
