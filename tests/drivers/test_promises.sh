#!/usr/bin/env bash
# The README's promises about results, end to end, each compared so that breaking it fails:
#   threads  poly_train and mnist_train (MLP and CNN) give byte-identical outputs and exported
#            weights on 1 and 2 OpenMP threads (OMP_NUM_THREADS and --threads);
#   resume   the optimizer kit resumes bitwise: the CNN with AdamW, weight decay, warmup, clipping
#            and dropout on 2 ranks, 2 epochs straight vs 1 and --resume (step decay: the warmup
#            crosses the resume) and vs stopped by SIGTERM and resumed (cosine); poly_train on 2
#            ranks the same way; exported weights compared byte for byte, not as printed digits;
#   ranks    1 rank x 64 and 2 ranks x 32 take the same samples: with SGD (Adam hides a gradient
#            scale, so a reducer that summed would pass with it) their weights agree up to the
#            order of the float sums, with and without --clip-grad-norm small enough to clip every
#            step (the global norm after the allreduce: clipping each rank's own gradients before
#            it gives other weights); the clipped run must differ from the unclipped one.
# Usage: test_promises.sh <poly_train> <mnist_train> <mpiexec> <scratch dir inside the build tree>
set -uo pipefail
POLY=$1 MNIST=$2 MPIEXEC=$3 WORK=$4
SRC=/usr/share/datasets/fashion-mnist
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=("$MPIEXEC" --oversubscribe --bind-to none --timeout 240)
rm -rf "$WORK" && mkdir -p "$WORK"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
source "$(dirname "$0")/../common/signals.sh"
[ -e "$SRC/train-images-idx3-ubyte.gz" ] || { echo "FAIL: $SRC missing: scripts/setup-deps.sh installs dataset-fashion-mnist"; exit 1; }
python3 "$(dirname "$0")/../../scripts/fmnist_subset.py" "$SRC" "$WORK/fmnist" 1024 256
DATA=$WORK/fmnist

# run NAME LAUNCH... -- ARGS...: runs into $WORK/NAME (log, --out), exports $WORK/NAME/w.st.
run() {
  local name=$1; shift
  local launch=()
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done
  shift
  mkdir -p "$WORK/$name"
  "${launch[@]}" "$@" --no-plot --out "$WORK/$name" --export "$WORK/$name/w.st" >>"$WORK/$name/log" 2>&1 ||
    { fail "$name exited non-zero: $(tail -3 "$WORK/$name/log")"; return 1; }
  [ -s "$WORK/$name/w.st" ] || { fail "$name exported nothing"; return 1; }
}
# same A B FILE...: byte-identical files of two runs.
same() {
  local a=$1 b=$2 f ok=1; shift 2
  for f in "$@"; do
    cmp -s "$WORK/$a/$f" "$WORK/$b/$f" || { ok=0; fail "$a and $b: $f differs"; }
  done
  return $((1 - ok))
}
# close A B RTOL: every tensor of the two exports, max |a - b| <= RTOL * max |a|; prints the ratio.
close() {
  python3 - "$WORK/$1/w.st" "$WORK/$2/w.st" "$3" <<'EOF'
import json, struct, sys, array
def load(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; hdr = json.loads(raw[8:8 + n]); hdr.pop("__metadata__", None)
    out = {}
    for k, v in hdr.items():
        assert v["dtype"] == "F32", v
        a = array.array("f"); a.frombytes(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]); out[k] = a
    return out
a, b, rtol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys(), (a.keys(), b.keys())
worst = 0.0
for k in a:
    assert len(a[k]) == len(b[k]), k
    scale = max(abs(x) for x in a[k]) or 1.0
    worst = max(worst, max(abs(x - y) for x, y in zip(a[k], b[k])) / scale)
print("%.3g" % worst)
sys.exit(0 if worst <= rtol else 1)
EOF
}

# --- threads: byte-identical on 1 and 2 threads ------------------------------------------------
# poly_train wide enough for the threaded paths (GEMM, Adam, tanh): 1 rank, hidden 64,64, batch 256.
P=(--hidden 64,64 --batch-size 256 --epochs 60)
run poly-t1 env OMP_NUM_THREADS=1 "$POLY" -- "${P[@]}" &&
  run poly-t2 env OMP_NUM_THREADS=2 "$POLY" -- "${P[@]}" &&
  run poly-t2opt env OMP_NUM_THREADS=1 "$POLY" -- "${P[@]}" --threads 2 &&
  same poly-t1 poly-t2 w.st eval.csv loss.csv && same poly-t1 poly-t2opt w.st eval.csv loss.csv &&
  pass "poly_train: 1 and 2 threads (OMP_NUM_THREADS, --threads) byte-identical"
# mnist_train, the MLP and the CNN (with dropout), 1 rank.
M=(--data "$DATA" --limit-train 512 --limit-test 128 --epochs 1)
run mlp-t1 env OMP_NUM_THREADS=1 "$MNIST" -- "${M[@]}" &&
  run mlp-t2 env OMP_NUM_THREADS=2 "$MNIST" -- "${M[@]}" &&
  run mlp-t2opt env OMP_NUM_THREADS=1 "$MNIST" -- "${M[@]}" --threads 2 &&
  same mlp-t1 mlp-t2 w.st confusion.csv && same mlp-t1 mlp-t2opt w.st confusion.csv &&
  pass "mnist_train MLP: 1 and 2 threads byte-identical"
C=(--data "$DATA" --limit-train 256 --limit-test 128 --epochs 1 --model cnn --dropout 0.25)
run cnn-t1 env OMP_NUM_THREADS=1 "$MNIST" -- "${C[@]}" &&
  run cnn-t2 env OMP_NUM_THREADS=2 "$MNIST" -- "${C[@]}" &&
  same cnn-t1 cnn-t2 w.st confusion.csv && pass "mnist_train CNN: 1 and 2 threads byte-identical"

# --- resume: bitwise the run that never stopped -----------------------------------------------
# 1024 images on 2 ranks x 64: 8 steps per epoch. A cosine anneals over the run's total steps
# (--epochs), so a run split by --epochs takes a schedule that does not depend on it (warmup 12
# then step:4:0.5: the resume after epoch 1, step 8, lands inside the warmup), and the cosine
# run is split by SIGTERM (the ranks stop at a step of their choosing, write the checkpoint and
# exit 75) and resumed.
K=(--data "$DATA" --limit-test 128 --model cnn --optimizer adamw --weight-decay 0.05 --warmup 12 --clip-grad-norm 0.5
   --dropout 0.25)
run kit-whole "${MPI[@]}" -n 2 "$MNIST" -- "${K[@]}" --lr-schedule step:4:0.5 --epochs 2 &&
  run kit-parts "${MPI[@]}" -n 2 "$MNIST" -- "${K[@]}" --lr-schedule step:4:0.5 --epochs 1 --checkpoint "$WORK/kit-parts/ck" &&
  run kit-parts "${MPI[@]}" -n 2 "$MNIST" -- "${K[@]}" --lr-schedule step:4:0.5 --epochs 2 --checkpoint "$WORK/kit-parts/ck" --resume &&
  { grep -q "resumed from '$WORK/kit-parts/ck' after epoch 1 of 2" "$WORK/kit-parts/log" || fail "the kit: no 'resumed' line"; } &&
  same kit-whole kit-parts w.st confusion.csv &&
  pass "the CNN with AdamW, warmup + step decay, clipping, dropout: 1 epoch + --resume byte-identical to 2 epochs"
KC=("${K[@]}" --lr-schedule cosine:0.0001 --epochs 2 --check-every 1)
if run kit-cos-whole "${MPI[@]}" -n 2 "$MNIST" -- "${KC[@]}"; then
  mkdir -p "$WORK/kit-cos"
  "${MPI[@]}" -n 2 "$MNIST" "${KC[@]}" --no-plot --out "$WORK/kit-cos" --checkpoint "$WORK/kit-cos/ck" >"$WORK/kit-cos/log" 2>&1 &
  pid=$!
  signal_ranks "$pid" mnist_train 2 TERM
  caught=$CAUGHT
  wait "$pid"; rc=$?
  if [ "$caught" -eq 1 ] && [ "$rc" -eq 75 ]; then
    run kit-cos "${MPI[@]}" -n 2 "$MNIST" -- "${KC[@]}" --checkpoint "$WORK/kit-cos/ck" --resume &&
      { grep -q "resumed from '$WORK/kit-cos/ck'" "$WORK/kit-cos/log" || fail "the kit, cosine: no 'resumed' line"; } &&
      same kit-cos-whole kit-cos w.st confusion.csv &&
      pass "the CNN with AdamW, warmup + cosine, clipping, dropout: SIGTERM + --resume byte-identical to 2 epochs"
  else
    fail "the kit, cosine: SIGTERM caught $caught, exit $rc (expected 75): $(tail -3 "$WORK/kit-cos/log")"
  fi
fi
# poly_train: 2 ranks, Adam, 200 epochs vs 100 + --resume.
Q=(--hidden 16 --log-every 50)
run poly-whole "${MPI[@]}" -n 2 "$POLY" -- "${Q[@]}" --epochs 200 &&
  run poly-parts "${MPI[@]}" -n 2 "$POLY" -- "${Q[@]}" --epochs 100 --checkpoint "$WORK/poly-parts/ck" &&
  run poly-parts "${MPI[@]}" -n 2 "$POLY" -- "${Q[@]}" --epochs 200 --checkpoint "$WORK/poly-parts/ck" --resume &&
  same poly-whole poly-parts w.st &&
  pass "poly_train: 100 epochs + --resume byte-identical to 200"

# --- ranks: 1 x 64 == 2 x 32 with SGD, with and without clipping ------------------------------
R=(--data "$DATA" --limit-test 128 --epochs 2 --optimizer sgd --lr 0.05)
run sgd-p1 "$MNIST" -- "${R[@]}" --batch-size 64 &&
  run sgd-p2 "${MPI[@]}" -n 2 "$MNIST" -- "${R[@]}" --batch-size 32 &&
  if r=$(close sgd-p1 sgd-p2 1e-4); then pass "SGD: 1 x 64 and 2 x 32 agree (weights within $r)"
  else fail "SGD: 1 x 64 and 2 x 32 differ: relative $r (a reducer that does not average?)"; fi
run clip-p1 "$MNIST" -- "${R[@]}" --batch-size 64 --clip-grad-norm 0.2 &&
  run clip-p2 "${MPI[@]}" -n 2 "$MNIST" -- "${R[@]}" --batch-size 32 --clip-grad-norm 0.2 &&
  if r=$(close clip-p1 clip-p2 1e-4); then pass "SGD, clipped: 1 x 64 and 2 x 32 agree (weights within $r)"
  else fail "SGD, clipped: 1 x 64 and 2 x 32 differ: relative $r (clipped before the allreduce, per rank?)"; fi
# The clipping is at work (otherwise the comparison above tests nothing).
if r=$(close sgd-p1 clip-p1 1e-2); then fail "--clip-grad-norm 0.2 changed the weights by $r only: not clipping"
else pass "--clip-grad-norm 0.2 clips (weights moved by $r)"; fi

[ "$failures" -eq 0 ] && echo "all promise checks passed" || { echo "$failures failure(s)"; exit 1; }
