#!/usr/bin/env bash
# mnist_train's fault promises (README), on 512 Fashion-MNIST training images (8 steps per epoch
# on 2 ranks), each resumed run compared bitwise with one uninterrupted run (exported weights):
#   last-step  a signal agreed at an epoch's last step (--check-every beyond the run: the ranks
#              agree only there): the epoch is finished and evaluated, its checkpoint written
#              after it, exit 75 on every rank; --resume continues from the next epoch;
#   nan        --debug-inject-nan 3:1: every rank stops before the optimizer step, exit 3, the
#              message names the epoch, step and rank, the epoch-2 checkpoint is kept;
#   stall      kill -STOP of rank 1 with --timeout 5: exit 4, the report names rank 1, the
#              checkpoint kept is whole and resumes;
#   refusals   another model's, optimizer's or seed's checkpoint: exit 2 on every rank, the
#              message names what differs, the file untouched, nothing trained.
# Usage: test_mnist.sh <mnist_train> <mpiexec> <faults_ckpt_tool> <scratch dir>
source "$(dirname "$0")/lib.sh" "$@"
SRC=/usr/share/datasets/fashion-mnist
[ -e "$SRC/train-images-idx3-ubyte.gz" ] || { fail "$SRC missing: scripts/setup-deps.sh installs dataset-fashion-mnist"; finish; exit; }
python3 "$(dirname "$0")/../../scripts/fmnist_subset.py" "$SRC" "$WORK/fmnist" 512 128
C=(--data "$WORK/fmnist" --hidden 32 --batch-size 32 --no-plot)
STEPS=8  # 512 images / (2 ranks x 32)

# The stopped runs stop at epochs only known afterwards; their resumed runs all go to TOTAL
# epochs, set from the latest stop, and are compared with one uninterrupted run of TOTAL.
RESUMES=()

# stopped_at DIR: the epoch count of DIR/ck (its step / STEPS; fails unless a whole epoch).
stopped_at() {
  local info step
  info=$("$TOOL" info "$1/ck") || { fail "$(basename "$1"): checkpoint unreadable: $info"; return 1; }
  step=$(sed -n 's/^step //p' <<<"$info")
  [ $((step % STEPS)) -eq 0 ] && [ "$step" -gt 0 ] || { fail "$(basename "$1"): checkpoint at step $step, not after an epoch"; return 1; }
  echo $((step / STEPS))
}

last_step() {
  local d=$WORK/last-step pid rc k
  mkdir -p "$d"
  bg "$d/log" env RC_DIR="$d" "${MPI[@]}" -n 2 "${RECORD[@]}" "$BIN" "${C[@]}" --epochs 100000 --check-every 1000000 \
    --checkpoint-every 0 --out "$d" --checkpoint "$d/ck"
  pid=$BG
  wait_for "$d/log" '^epoch 1/100000: train loss' 120 "$pid" || { fail "last-step: no epoch line"; return; }
  for p in $(rank_pids "$pid"); do kill -TERM "$p"; done
  wait_rc "$pid" 60
  every_rank_exited "$d" 2 75 last-step
  grep -Eq "^mnist_train: SIGTERM: all ranks stopped after epoch [0-9]+ \(step $STEPS of $STEPS\); checkpoint '$d/ck' written" "$d/log" \
    || { fail "last-step: no stop message after an epoch's last step: $(grep '^mnist_train:' "$d/log")"; return; }
  k=$(stopped_at "$d") || return
  grep -q "^epoch $k/100000: train loss" "$d/log" || fail "last-step: epoch $k was not finished and evaluated before the stop"
  echo "  last-step: SIGTERM agreed at the last step of epoch $k: checkpoint after it"
  RESUMES+=("last-step $k")
}

nan() {
  local d=$WORK/nan rc
  mkdir -p "$d"
  RC_DIR=$d "${MPI[@]}" -n 2 "${RECORD[@]}" "$BIN" "${C[@]}" --epochs 10 --out "$d" --checkpoint "$d/ck" \
    --debug-inject-nan 3:1 >"$d/log" 2>&1
  every_rank_exited "$d" 2 3 nan
  # A NaN pixel: ReLU turns the NaN activations into 0 (the loss stays finite), the first
  # layer's weight gradient is NaN; the one pass over the averaged gradients finds it at that
  # step, before the optimizer step.
  grep -q "^mnist_train: error: NaN/Inf in the gradients averaged over the ranks at epoch 3 (step 1 of $STEPS) (every rank's loss was finite: a gradient of a rank's own, or their sum, was not); all ranks stopped; the last checkpoint '$d/ck' ($((2 * STEPS)) steps) is kept" "$d/log" \
    || fail "nan: no message naming epoch 3, step 1 and the kept checkpoint: $(grep 'mnist_train:' "$d/log")"
  grep -q "^epoch 3/10" "$d/log" && fail "nan: epoch 3 was finished"
  # Stopped before the optimizer step: the state stays finite, no second error (the
  # checkpoint's check of the parameters) follows.
  [ "$(grep -c "^mnist_train: error:" "$d/log")" -eq 1 ] || fail "nan: more than the one error: $(grep 'mnist_train: error:' "$d/log")"
  [ -e "$d/metrics.csv" ] && fail "nan: outputs written"
  [ "$(stopped_at "$d")" = 2 ] || fail "nan: the checkpoint kept is not epoch 2's"
  local out
  out=$("${MPI[@]}" -n 2 "$BIN" "${C[@]}" --out "$d" --debug-inject-nan 2:2 2>&1); rc=$?
  [ "$rc" -eq 2 ] && grep -q "^mnist_train: error: --debug-inject-nan: rank 2 does not exist (2 rank(s))" <<<"$out" \
    || fail "nan: a missing rank: exit $rc: $out"
}

stall() {
  local d=$WORK/stall pid rc ranks t0 ms
  mkdir -p "$d"
  bg "$d/log" "${MPI[@]}" -n 2 "$BIN" "${C[@]}" --epochs 100000 --timeout 5 --out "$d" --checkpoint "$d/ck"
  pid=$BG
  wait_for "$d/log" '^epoch 1/100000: train loss' 120 "$pid" || { fail "stall: no epoch line"; return; }
  read -r -a ranks <<<"$(rank_pids "$pid")"
  [ "${#ranks[@]}" -eq 2 ] || { fail "stall: expected 2 ranks, found '${ranks[*]}'"; return; }
  kill -STOP "${ranks[1]}"
  t0=$(now_ms)
  wait_rc "$pid" 60; rc=$?
  ms=$(( $(now_ms) - t0 ))
  kill -CONT "${ranks[1]}" 2>/dev/null
  [ "$rc" -eq 4 ] || fail "stall: exit code $rc, expected 4"
  [ "$ms" -lt 30000 ] || fail "stall: the job ended $ms ms after the stop (bound 30 s)"
  grep -Eq "^stall: rank 0 \(node .*\) waited [0-9.]+ s \(timeout 5 s\) for .*; rank 1 did not arrive" "$d/log" \
    || fail "stall: no report naming rank 1: $(grep stall "$d/log")"
  grep -q "the last checkpoint '$d/ck' ([0-9]* steps) is kept: continue with --resume" "$d/log" \
    || fail "stall: the report does not name the kept checkpoint"
  none_left "$d" 10 || fail "stall: ranks left running"
  local k
  k=$(stopped_at "$d") || return
  echo "  stall: kill -STOP of rank 1 -> exit $rc after $ms ms; checkpoint of epoch $k kept"
  RESUMES+=("stall $k")
}

refusals() {
  local d=$WORK/refuse sum rc name want
  mkdir -p "$d"
  "${MPI[@]}" -n 2 "$BIN" "${C[@]}" --epochs 1 --out "$d" --checkpoint "$d/ck" >"$d/log" 2>&1 || { fail "refusals: the first run exited $?"; return; }
  sum=$(sha256sum <"$d/ck")
  while IFS='|' read -r name want args; do
    rm -f "$d"/rc.* "$d/metrics.csv"
    # shellcheck disable=SC2086  # $args: the options that differ
    RC_DIR=$d "${MPI[@]}" -n 2 "${RECORD[@]}" "$BIN" "${C[@]}" --epochs 2 --out "$d" --checkpoint "$d/ck" --resume $args \
      >"$d/log-$name" 2>&1 </dev/null  # mpiexec would read the cases below from stdin
    every_rank_exited "$d" 2 2 "refusal of $name"
    grep -q "^mnist_train: error: --resume: '$d/ck' was written by a different run (.*$want" "$d/log-$name" \
      || fail "refusal of $name: the message does not say '$want': $(grep 'mnist_train:' "$d/log-$name")"
    grep -q "^epoch" "$d/log-$name" && fail "refusal of $name: trained"
    [ -e "$d/metrics.csv" ] && fail "refusal of $name: metrics.csv written"
    [ "$(sha256sum <"$d/ck")" = "$sum" ] || fail "refusal of $name: the checkpoint changed"
  done <<EOF2
model|layers: 'Linear(784, 32) -> ReLU() -> Linear(32, 10)' in the checkpoint, 'Linear(784, 64) -> ReLU() -> Linear(64, 10)' now|--hidden 64
optimizer|optimizer: 'adam' in the checkpoint, 'sgd' now|--optimizer sgd
seed|seed: '0' in the checkpoint, '7' now|--seed 7
EOF2
}

run_case "a signal at an epoch's last step: checkpoint after the epoch, exit 75" last_step
run_case "NaN on rank 1 at epoch 3: exit 3, epoch-2 checkpoint kept" nan
run_case "a stalled rank: exit 4, checkpoint kept" stall
run_case "another model's, optimizer's, seed's checkpoint refused" refusals

# The resumes: from each stop's checkpoint to TOTAL epochs, bitwise one run that never stopped
# (exported weights; the metrics but the seconds).
resumes() {
  local total=0 r name k d
  for r in "${RESUMES[@]}"; do k=${r#* }; [ "$k" -lt "$total" ] || total=$((k + 1)); done
  [ "$total" -gt 0 ] || { fail "resume: no stopped run to resume"; return; }
  mkdir -p "$WORK/ref"
  "${MPI[@]}" -n 2 "$BIN" "${C[@]}" --epochs "$total" --out "$WORK/ref" --export "$WORK/ref/w.st" >"$WORK/ref/log" 2>&1 \
    || { fail "the uninterrupted run exited $?"; return; }
  for r in "${RESUMES[@]}"; do
    name=${r% *} k=${r#* } d=$WORK/${r% *}/res
    mkdir -p "$d"
    cp "$WORK/$name/ck" "$d/ck"
    "${MPI[@]}" -n 2 "$BIN" "${C[@]}" --epochs "$total" --out "$d" --checkpoint "$d/ck" --resume --export "$d/w.st" \
      >"$d/log" 2>&1 || { fail "$name: resume exited $?"; continue; }
    grep -q "resumed from '$d/ck' after epoch $k of $total" "$d/log" || fail "$name: no 'resumed from' line"
    cmp -s "$d/w.st" "$WORK/ref/w.st" || fail "$name: the weights after the resume differ from the uninterrupted run's"
    [ "$(cut -d, -f1-4 "$d/metrics.csv")" = "$(cut -d, -f1-4 "$WORK/ref/metrics.csv")" ] \
      || fail "$name: the metrics after the resume differ from the uninterrupted run's"
  done
  echo "  resumed ${#RESUMES[@]} run(s) to $total epochs"
}
run_case "resumed after the last-step stop and the stall: bitwise the uninterrupted run" resumes

finish
