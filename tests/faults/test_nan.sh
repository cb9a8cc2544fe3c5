#!/usr/bin/env bash
# NaN/Inf (injected with --debug-inject-nan EPOCH:RANK): every rank stops with exit code 3,
# the message names the epoch and the rank, no outputs are written, and the last good
# checkpoint is kept: never overwritten with bad state.
# Usage: test_nan.sh <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir>
source "$(dirname "$0")/lib.sh" "$@"

run3() { "${MPI[@]}" -n 3 "$BIN" --no-plot "$@"; }

# The good state at epoch 20: a 20-epoch run's final checkpoint (the checkpoint holds no
# --epochs, so a longer run's epoch-20 checkpoint is the same file).
ref=$WORK/ref; mkdir -p "$ref"
run3 --epochs 20 --out "$ref" --checkpoint "$ref/ck20" >"$ref/log" 2>&1 || fail "reference run exited $?"
run3 --epochs 25 --out "$ref" --checkpoint "$ref/ck25" >"$ref/log25" 2>&1 || fail "reference run exited $?"

# expect_nan DIR EPOCH RANK: exit 3 (already in $rc), the message, no outputs, no training after.
expect_nan() {
  local d=$1 e=$2 r=$3 name=$4
  [ "$rc" -eq 3 ] || fail "$name: exit code $rc, expected 3"
  grep -q "^poly_train: error: NaN/Inf at epoch $e on rank $r (its loss or own gradients); all ranks stopped" "$d/log" \
    || fail "$name: no message naming epoch $e and rank $r"
  grep -q "^\[rank $r\] non-finite value at epoch $e: loss = nan" "$d/log" || fail "$name: rank $r did not report its loss"
  [ -e "$d/eval.csv" ] || [ -e "$d/loss.csv" ] && fail "$name: outputs written after NaN"
  # The tutorial's loss lines count epochs from 0: epoch e is its line e - 1.
  awk -v e="$e" '/^epoch / { x = $2; sub(",", "", x); if (x + 1 >= e) bad = 1 } END { exit !bad }' "$d/log" \
    && fail "$name: a loss line for epoch >= $e was printed"
}

# 1. Checkpoints every 10 epochs, NaN on rank 1 at epoch 25: the epoch-20 checkpoint stays.
d=$WORK/every10; mkdir -p "$d"
run3 --epochs 1000 --out "$d" --checkpoint "$d/ck" --checkpoint-every 10 --debug-inject-nan 25:1 >"$d/log" 2>&1; rc=$?
expect_nan "$d" 25 1 "checkpoint-every 10"
cmp -s "$d/ck" "$ref/ck20" || fail "checkpoint-every 10: the checkpoint is not the epoch-20 one"
grep -q "the last checkpoint '$d/ck' (20 epochs) is kept" "$d/log" || fail "checkpoint-every 10: message does not name the kept checkpoint"
pass "NaN on rank 1 at epoch 25, checkpoint of epoch 20 kept"

# 2. NaN right at a checkpoint epoch (30: the checkpoint of 30 is due after it): 25 stays.
d=$WORK/at-ckpt; mkdir -p "$d"
run3 --epochs 1000 --out "$d" --checkpoint "$d/ck" --checkpoint-every 5 --debug-inject-nan 30:2 >"$d/log" 2>&1; rc=$?
expect_nan "$d" 30 2 "NaN in the epoch a checkpoint is due after"
cmp -s "$d/ck" "$ref/ck25" || fail "NaN at epoch 30: the checkpoint is not the epoch-25 one"
pass "NaN on rank 2 at epoch 30 (a checkpoint due after it): epoch-25 checkpoint kept"

# 3. Resumed from a good checkpoint, NaN before the next checkpoint: the file is unchanged.
d=$WORK/resumed; mkdir -p "$d"
cp "$ref/ck20" "$d/ck"
sum=$(sha256sum <"$d/ck")
run3 --epochs 1000 --out "$d" --checkpoint "$d/ck" --checkpoint-every 100 --resume --debug-inject-nan 40:0 >"$d/log" 2>&1; rc=$?
expect_nan "$d" 40 0 "resumed"
[ "$(sha256sum <"$d/ck")" = "$sum" ] || fail "resumed: the checkpoint changed"
pass "NaN after a resume: the checkpoint is unchanged"

# 4. Rare agreement (--check-every 50): averaged gradients are NaN on every rank at once, so
# the ranks still agree at the very epoch; and a single rank, epoch 1.
d=$WORK/rare; mkdir -p "$d"
run3 --epochs 1000 --out "$d" --check-every 50 --debug-inject-nan 7:1 >"$d/log" 2>&1; rc=$?
expect_nan "$d" 7 1 "--check-every 50"
pass "NaN detected at its epoch with --check-every 50"
d=$WORK/single; mkdir -p "$d"
timeout 60 "$BIN" --no-plot --epochs 100 --out "$d" --debug-inject-nan 1 >"$d/log" 2>&1; rc=$?
expect_nan "$d" 1 0 "1 rank"
pass "NaN on a single rank at epoch 1"

# 5. --debug-inject-nan naming a rank that does not exist: a usage error.
out=$(run3 --epochs 10 --out "$WORK" --debug-inject-nan 3:7 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "rank 7 does not exist" <<<"$out" || fail "--debug-inject-nan 3:7 on 3 ranks: exit $rc: $out"
pass "injection on a missing rank refused"

finish
