#!/usr/bin/env bash
# Checkpoints that must not be used: corrupt (flipped bytes), truncated, trailing bytes, wrong
# file or checkpoint version, another model / optimizer / sampling / seed, another rank count,
# past --epochs; and an existing checkpoint without --resume. Each is refused with a clear
# message and exit code 2 on every rank, before any training, with the file byte-for-byte
# unchanged and no outputs written. Also: --resume without a checkpoint starts from scratch.
# Usage: test_checkpoint_files.sh <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir>
source "$(dirname "$0")/lib.sh" "$@"

# run NP ARGS...: NP ranks under mpiexec; NP 0: one process without mpiexec (an MPI singleton,
# much cheaper to start, which matters under the sanitizers).
run() {
  local np=$1
  shift
  if [ "$np" -eq 0 ]; then timeout 120 "$BIN" --no-plot "$@"; else "${MPI[@]}" -n "$np" "$BIN" --no-plot "$@"; fi
}

good=$WORK/good; mkdir -p "$good"
run 3 --epochs 300 --out "$good" --checkpoint "$good/ck" >"$good/log" 2>&1 || fail "making the checkpoint exited $?"
size=$(stat -c %s "$good/ck")
[ "$size" -gt 100 ] || fail "checkpoint has only $size bytes"

n=0
# refused NAME REGEX NP FILE-PREP-COMMAND... -- EXTRA-ARGS...: copies the good checkpoint,
# applies the preparation, resumes on NP ranks (0: a singleton); expects exit 2, REGEX in the
# message, no training, no outputs, the file unchanged. Damaged files are refused before the
# rank count is compared, so most of them are tried on a singleton (cheap), a few on 3 ranks
# (every rank must stop with 2).
refused() {
  local name=$1 re=$2 np=$3
  shift 3
  n=$((n + 1))
  local d=$WORK/case$n
  mkdir -p "$d/out"
  cp "$good/ck" "$d/ck"
  local prep=() extra=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do prep+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  extra=("$@")
  if [ ${#prep[@]} -gt 0 ]; then
    (cd "$d" && "${prep[@]}") || { fail "$name: preparing the file failed"; return; }
  fi
  local before after out rc
  before=$(sha256sum <"$d/ck")
  out=$(run "$np" --epochs 400 --out "$d/out" --checkpoint "$d/ck" --resume "${extra[@]}" 2>&1); rc=$?
  after=$(sha256sum <"$d/ck")
  echo "$out" >"$d/log"
  [ "$rc" -eq 2 ] || fail "$name: exit code $rc, expected 2"
  grep -qE -- "$re" <<<"$out" || fail "$name: message does not match '$re': $(grep error <<<"$out")"
  grep -q "^epoch" <<<"$out" && fail "$name: training started"
  [ "$before" = "$after" ] || fail "$name: the checkpoint file was changed"
  [ -z "$(ls -A "$d/out")" ] || fail "$name: outputs were written: $(ls "$d/out")"
  pass "$name refused: $(grep -m1 'error:' <<<"$out" | cut -c1-160)"
}

# flip OFFSET: invert one byte in place (in the current directory's ck).
flip() {
  local off=$1 b
  b=$(od -An -tu1 -j "$off" -N1 ck | tr -d ' ')
  printf "$(printf '\\%03o' $((b ^ 0xff)))" | dd of=ck bs=1 seek="$off" conv=notrunc status=none
}
chop() { truncate -s "$1" ck; }
append() { printf 'x' >>ck; }

refused "flipped magic byte" "is not an hddp tensor file" 0 flip 0 --
refused "flipped version byte" "format version" 0 flip 4 --
refused "flipped size byte" "truncated|unexpected bytes" 0 flip 9 --
refused "flipped descriptor byte" "checksum mismatch" 0 flip 40 --
refused "flipped middle byte" "checksum mismatch" 0 flip $((size / 2)) --
refused "flipped payload byte" "checksum mismatch" 3 flip $((size - 12)) --
refused "flipped checksum byte" "checksum mismatch" 0 flip $((size - 1)) --
refused "flipped byte under mpiexec -n 1" "checksum mismatch" 1 flip $((size / 3)) --
refused "truncated by one byte" "truncated" 0 chop $((size - 1)) --
refused "truncated to half" "truncated" 3 chop $((size / 2)) --
refused "truncated to 10 bytes" "truncated" 0 chop 10 --
refused "empty file" "not an hddp tensor file" 0 chop 0 --
refused "trailing byte" "unexpected bytes after the recorded size" 0 append --
refused "file format version 2" "has format version 2; this build reads version 1" 0 "$TOOL" set-version ck 2 --
refused "checkpoint version 1" "has checkpoint version 1; this build reads version 2" 3 "$TOOL" set-meta-u64 ck ckpt.version 1 --
refused "checkpoint step beyond its losses" "its loss history: 900 losses, expected 3 ranks x 301 epochs" 3 "$TOOL" set-meta-u64 ck ckpt.step 301 --
refused "another model (--hidden 8)" "different run \(layers: 'Linear\(1, 20\) -> Linear\(20, 1, bias=False\) -> Tanh\(\)' in the checkpoint, 'Linear\(1, 8\) -> Linear\(8, 1, bias=False\) -> Tanh\(\)' now\)" 3 -- --hidden 8
refused "another optimizer" "optimizer: 'adam' in the checkpoint, 'sgd' now" 3 -- --optimizer sgd
refused "another sampling" "sampling: 'per-rank' in the checkpoint, 'sharded' now" 3 -- --sampling sharded
refused "another seed" "seed: '42' in the checkpoint, '7' now" 3 -- --seed 7
refused "another function" "function: 'poly' in the checkpoint, 'griewank' now" 3 -- --function griewank
refused "another rank count (2)" "world size \(MPI ranks\): 3 in the checkpoint, 2 now" 2 --
refused "another rank count (1)" "world size \(MPI ranks\): 3 in the checkpoint, 1 now" 0 --
refused "another lr and batch size" "lr: .*batch_size|batch_size: .*lr" 3 -- --lr 0.01 --batch-size 16
refused "past --epochs" "holds 300 epochs done, past this run's 200" 3 -- --epochs 200

# An existing checkpoint without --resume: refused, not overwritten.
d=$WORK/noresume; mkdir -p "$d/out"; cp "$good/ck" "$d/ck"; before=$(sha256sum <"$d/ck")
out=$(run 3 --epochs 400 --out "$d/out" --checkpoint "$d/ck" 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "exists; pass --resume to continue from it" <<<"$out" || fail "existing checkpoint without --resume: exit $rc: $out"
[ "$(sha256sum <"$d/ck")" = "$before" ] || fail "existing checkpoint without --resume: file changed"
pass "existing checkpoint without --resume refused"

# A checkpoint directory that cannot be written: refused up front.
out=$(run 2 --epochs 10 --out "$WORK" --checkpoint /proc/hddp-no-such-dir/ck 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "cannot write into directory" <<<"$out" || fail "unwritable --checkpoint dir: exit $rc: $out"
pass "unwritable checkpoint directory refused"

# --resume without a checkpoint yet: starts from scratch, same result as a run without it.
d=$WORK/fresh; mkdir -p "$d/a" "$d/b"
run 3 --epochs 300 --out "$d/a" --checkpoint "$d/a/ck" --resume >"$d/a/log" 2>&1 || fail "--resume without a file exited $?"
grep -q "no checkpoint '$d/a/ck' yet: starting from scratch" "$d/a/log" || fail "--resume without a file: no notice"
run 3 --epochs 300 --out "$d/b" >"$d/b/log" 2>&1 || fail "plain run exited $?"
cmp -s "$d/a/eval.csv" "$d/b/eval.csv" && cmp -s "$d/a/loss.csv" "$d/b/loss.csv" \
  || fail "--resume without a file differs from a fresh run"
cmp -s "$d/a/ck" "$good/ck" || fail "the final checkpoint of the same run differs"
pass "--resume without a checkpoint starts from scratch"

# The good checkpoint itself: resuming at its last epoch trains nothing and reproduces it.
d=$WORK/same; mkdir -p "$d"; cp "$good/ck" "$d/ck"
run 3 --epochs 300 --out "$d" --checkpoint "$d/ck" --resume >"$d/log" 2>&1 || fail "resume at the end exited $?"
cmp -s "$d/ck" "$good/ck" && cmp -s "$d/eval.csv" "$good/eval.csv" && cmp -s "$d/loss.csv" "$good/loss.csv" \
  || fail "resuming a finished run changed its results"
grep -q "^epoch" "$d/log" && fail "resuming a finished run trained"
pass "resume of a finished run reproduces its outputs"

finish
