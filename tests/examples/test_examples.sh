#!/usr/bin/env bash
# examples/ built against the installed package (test_install's prefix) and run on 2 ranks:
#   custom_layer    its gradients against finite differences, then trained data-parallel;
#   csv_regression  a CSV file generated here: trained (metrics.csv, loss.pdf); stopped by
#                   SIGUSR1 (exit 75) and resumed, ending with the state of the run that never
#                   stopped: its final checkpoint (weights, Adam's state, the metrics) and
#                   metrics.csv byte for byte; a malformed CSV and a missing column: exit 2 on
#                   every rank, nothing written.
#   cnn_classifier  Fashion-MNIST (1536 training images, 2 epochs): the test accuracy after each
#                   epoch well above chance; stopped by SIGUSR1 inside the first epoch (exit
#                   75) and resumed, ending with the uninterrupted run's checkpoint and
#                   metrics.csv byte for byte.
# Usage: test_examples.sh <source dir> <install prefix> <mpiexec> <scratch dir>
set -uo pipefail
SRC=$1 PREFIX=$2 MPIEXEC=$3 WORK=$4
rm -rf "$WORK"; mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPI=("$MPIEXEC" --oversubscribe --bind-to none --timeout 240)
source "$(dirname "$0")/../common/signals.sh"
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
cmake -S "$SRC/examples" -B "$WORK/build" -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/cfg.log" 2>&1 || { cat "$WORK/cfg.log"; exit 1; }
cmake --build "$WORK/build" -j 2 >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
B=$WORK/build

"${MPI[@]}" -n 2 "$B/custom_layer" >"$WORK/custom.log" 2>&1 || fail "custom_layer exited $?: $(cat "$WORK/custom.log")"
grep -q "largest gradient error" "$WORK/custom.log" && grep -q "2 rank(s), loss" "$WORK/custom.log" || fail "custom_layer's report: $(cat "$WORK/custom.log")"

# 600 rows of 8 features and a target that is a smooth function of them.
awk 'BEGIN { srand(5); print "a,b,c,d,e,f,g,h,price";
  for (i = 0; i < 600; i++) { s = 0; line = "";
    for (j = 0; j < 8; j++) { v = rand() * 2 - 1; s += (j + 1) * v * v; line = line sprintf("%.6f,", v) }
    print line sprintf("%.6f", s) } }' >"$WORK/data.csv"
run() { "${MPI[@]}" -n 2 "$B/csv_regression" "$@"; }
mkdir -p "$WORK/whole" "$WORK/part"
run "$WORK/data.csv" price "$WORK/whole" 30 "$WORK/whole/ck" >"$WORK/whole/log" 2>&1 || fail "csv_regression exited $?: $(tail -5 "$WORK/whole/log")"
[ "$(wc -l <"$WORK/whole/metrics.csv")" -eq 31 ] || fail "metrics.csv has $(wc -l <"$WORK/whole/metrics.csv") lines, expected 31"
awk -F, 'NR == 2 { a = $2 } END { exit !(NR == 31 && $2 < 0.5 * a) }' "$WORK/whole/metrics.csv" || fail "the MSE did not halve: $(sed -n '2p;$p' "$WORK/whole/metrics.csv")"
[ -s "$WORK/whole/loss.pdf" ] || fail "no loss.pdf"

# stopped_and_resumed NAME WHOLE PART STOPPED CKPT ARGS...: the program NAME, started with ARGS
# writing into PART, is stopped by SIGUSR1 and resumed; it must end with the checkpoint CKPT
# (a name inside WHOLE and PART) and metrics.csv of the run that never stopped (in WHOLE) byte
# for byte. The ranks are frozen (SIGSTOP) at a moment their handler is installed (SigCgt in
# /proc: a state, not a time) and before they finished, given SIGUSR1, and let go: they stop
# after the step under way, inside the epoch (exit 75), saying STOPPED.
stopped_and_resumed() {
  local name=$1 whole=$2 part=$3 stopped=$4 ckpt=$5 pid rc caught
  shift 5
  "${MPI[@]}" -n 2 "$B/$name" "$@" >"$part/log" 2>&1 &
  pid=$!
  signal_ranks "$pid" "$name" 2 USR1
  caught=$CAUGHT
  wait "$pid"; rc=$?
  if [ "$caught" -eq 0 ]; then
    fail "$name: never caught both ranks with their handler installed (exit $rc)"
  elif [ "$rc" -ne 75 ]; then
    fail "$name: the stopped run exited $rc, expected 75: $(tail -5 "$part/log")"
  else
    grep -q "$stopped" "$part/log" || fail "$name: no '$stopped': $(tail -3 "$part/log")"
    "${MPI[@]}" -n 2 "$B/$name" "$@" >>"$part/log" 2>&1 || fail "$name: the resumed run exited $?"
    cmp -s "$whole/$ckpt" "$part/$ckpt" \
      || fail "$name: the resumed run's final checkpoint (weights, optimizer state) differs from the uninterrupted run's"
    cmp -s "$whole/metrics.csv" "$part/metrics.csv" || fail "$name: the resumed run's metrics.csv differs from the uninterrupted run's"
  fi
}
stopped_and_resumed csv_regression "$WORK/whole" "$WORK/part" "SIGUSR1: all ranks stopped after epoch" ck \
  "$WORK/data.csv" price "$WORK/part" 30 "$WORK/part/ck"

# Bad input: exit 2 on every rank, before any training.
printf 'a,b,price\n1,2,3\n4,x,6\n' >"$WORK/bad.csv"
out=$(run "$WORK/bad.csv" price "$WORK" 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "line 3, column 2 ('b'): 'x' is not a number" <<<"$out" || fail "a malformed CSV: exit $rc: $out"
out=$(run "$WORK/data.csv" cost "$WORK" 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "cost" <<<"$out" || fail "a missing target column: exit $rc: $out"
grep -q "^epoch" <<<"$out" && fail "bad input trained"

# cnn_classifier: trained whole; then stopped inside its first epoch and resumed.
mkdir -p "$WORK/cnn" "$WORK/cnn-part"
"${MPI[@]}" -n 2 "$B/cnn_classifier" "$WORK/cnn" 2 1536 >"$WORK/cnn/log" 2>&1 || fail "cnn_classifier exited $?: $(tail -5 "$WORK/cnn/log")"
awk -F, 'NR == 3 { ok = $3 > 0.4 } END { exit !(NR == 3 && ok) }' "$WORK/cnn/metrics.csv" 2>/dev/null \
  || fail "cnn_classifier: expected 2 epochs and a test accuracy above 0.4: $(cat "$WORK/cnn/metrics.csv" 2>&1)"
stopped_and_resumed cnn_classifier "$WORK/cnn" "$WORK/cnn-part" "SIGUSR1: all ranks stopped after epoch 1 (step" run.ckpt \
  "$WORK/cnn-part" 2 1536
[ "$failed" -eq 0 ] && echo "examples: custom_layer, csv_regression and cnn_classifier (train, stop, resume, bad input): ok"
exit "$failed"
