#!/usr/bin/env bash
# End-to-end checks of drivers/mnist_train: a short run on the real Fashion-MNIST (Debian's
# dataset-fashion-mnist) on 2 ranks with every output, results independent of the rank count,
# and bad input (options, a missing data set, malformed IDX files made here) stopping every rank
# with exit 2 and a message.
# Usage: test_mnist_train.sh <mnist_train> <mpiexec> <scratch dir inside the build tree>
set -uo pipefail
BIN=$1 MPIEXEC=$2 WORK=$3
DATA=/usr/share/datasets/fashion-mnist
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=("$MPIEXEC" --oversubscribe --bind-to none --timeout 240)
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/../common/signals.sh"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || { echo "FAIL: $DATA missing: scripts/setup-deps.sh installs dataset-fashion-mnist"; exit 1; }
# The real data's first 4000 training and 1000 test images, written once, uncompressed: no run
# below decompresses the whole set (every rank of every run would).
python3 "$(dirname "$0")/../../scripts/fmnist_subset.py" "$DATA" "$WORK/fmnist" 4000 1000
DATA=$WORK/fmnist

# 2 ranks, 4000 training and 1000 test images, 3 epochs: every output, learning happened.
d=$WORK/two; mkdir -p "$d"
if "${MPI[@]}" -n 2 "$BIN" --data "$DATA" --epochs 3 --out "$d" --stats-json "$d/stats.json" \
  --export "$d/w.safetensors" >"$d/log" 2>&1; then
  [ "$(wc -l <"$d/metrics.csv")" -eq 4 ] || fail "metrics.csv should have a header and 3 rows"
  awk -F, 'NR == 4 { exit !($4 > 0.70 && $3 < 0.9) }' "$d/metrics.csv" || fail "accuracy after 3 epochs <= 70 %: $(tail -1 "$d/metrics.csv")"
  awk -F, 'NR > 1 { l[NR] = $2 } END { exit !(l[4] < l[2]) }' "$d/metrics.csv" || fail "the training loss did not fall"
  # The confusion matrix counts every test image once; its diagonal is the last accuracy.
  awk -F, -v acc="$(awk -F, 'NR == 4 { print $4 }' "$d/metrics.csv")" \
    'NR > 1 { for (i = 2; i <= 11; i++) { s += $i; if (i == NR) diag += $i } } END { exit !(NR == 11 && s == 1000 && diag == acc * 1000) }' \
    "$d/confusion.csv" || fail "confusion.csv does not add up to 1000 test images with the reported accuracy"
  [ "$(head -c 4 "$d/training.pdf" 2>/dev/null)" = "%PDF" ] || fail "training.pdf is not a PDF"
  python3 - "$d/stats.json" <<'EOF' || fail "stats.json"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l["epoch"] for l in lines if l["type"] == "epoch"] == [1, 2, 3], lines
s = lines[-1]
assert s["type"] == "summary" and s["ranks"] == 2 and s["epochs"] == 3, s
EOF
  [ "$(head -c 8 "$d/w.safetensors" | od -An -tu8 | tr -d ' ')" -gt 0 ] 2>/dev/null || fail "no safetensors header"
  grep -q '"0.weight"' "$d/w.safetensors" && grep -q '"4.bias"' "$d/w.safetensors" || fail "safetensors names"
  [ "$(grep -c '^epoch [1-3]/3: train loss' "$d/log")" -eq 3 ] || fail "expected 3 progress lines"
  pass "2 ranks: outputs"
else
  fail "2 rank run exited non-zero: $(tail -3 "$d/log")"
fi

# The rank count: 1 rank x batch 64 and 2 ranks x 32 take the same samples each step (the
# shuffle is shared; rank r takes every P-th), so they agree up to the order of the float sums.
# SGD, not Adam: Adam divides out a gradient scale, so a reducer that summed instead of averaging
# would pass with it.
for pb in "1 64" "2 32"; do
  set -- $pb
  mkdir -p "$WORK/p$1"
  "${MPI[@]}" -n "$1" "$BIN" --data "$DATA" --limit-train 2000 --limit-test 500 --epochs 2 --batch-size "$2" --no-plot \
    --optimizer sgd --lr 0.1 --out "$WORK/p$1" >"$WORK/p$1/log" 2>&1 || fail "P=$1 exited non-zero: $(tail -3 "$WORK/p$1/log")"
done
if [ "$(wc -l <"$WORK/p1/metrics.csv")" -eq 3 ] && [ "$(wc -l <"$WORK/p2/metrics.csv")" -eq 3 ] &&
   paste -d, "$WORK/p1/metrics.csv" "$WORK/p2/metrics.csv" |
   awk -F, 'NR > 1 { for (c = 2; c <= 4; c++) { d = $c - $(c + 6); if (d < 0) d = -d; if (d > 2e-3) bad = 1 } } END { exit bad }'; then
  pass "1 x 64 and 2 x 32 agree"
else
  fail "1 x 64 and 2 x 32 differ (or a metrics.csv is short): $(paste -d' ' "$WORK/p1/metrics.csv" "$WORK/p2/metrics.csv")"
fi

# Checkpoint and resume: 2 epochs with --checkpoint, then --resume to 3, equal to 3 epochs in one
# go, bitwise: the exported weights byte for byte, and every column of metrics.csv but the seconds
# (the order of epoch e comes from (seed, e)).
C=(--data "$DATA" --limit-train 1000 --limit-test 300 --no-plot)
mkdir -p "$WORK/whole" "$WORK/parts"
"${MPI[@]}" -n 2 "$BIN" "${C[@]}" --epochs 3 --out "$WORK/whole" --export "$WORK/whole/w.st" >"$WORK/whole/log" 2>&1 || fail "whole run: $(tail -3 "$WORK/whole/log")"
"${MPI[@]}" -n 2 "$BIN" "${C[@]}" --epochs 2 --out "$WORK/parts" --checkpoint "$WORK/run.ckpt" >"$WORK/parts/log1" 2>&1 ||
  fail "first part: $(tail -3 "$WORK/parts/log1")"
"${MPI[@]}" -n 2 "$BIN" "${C[@]}" --epochs 3 --out "$WORK/parts" --checkpoint "$WORK/run.ckpt" --resume \
  --export "$WORK/parts/w.st" >"$WORK/parts/log2" 2>&1 || fail "resumed part: $(tail -3 "$WORK/parts/log2")"
grep -q "resumed from '$WORK/run.ckpt' after epoch 2 of 3" "$WORK/parts/log2" || fail "no 'resumed' line"
if [ "$(cut -d, -f1-4 "$WORK/whole/metrics.csv")" = "$(cut -d, -f1-4 "$WORK/parts/metrics.csv")" ] &&
  [ "$(wc -l <"$WORK/parts/metrics.csv")" -eq 4 ] && cmp -s "$WORK/whole/w.st" "$WORK/parts/w.st"; then
  pass "resume: bitwise the run that never stopped"
else
  fail "resume differs (weights: $(cmp "$WORK/whole/w.st" "$WORK/parts/w.st" 2>&1)): $(paste -d' ' "$WORK/whole/metrics.csv" "$WORK/parts/metrics.csv")"
fi
# bf16 (--precision bf16: the CNN's convolutions and Linear layers; --grad-dtype bf16: the
# buckets as bf16): resumes bitwise too, and it is not the float run (the products did round).
B16=(--model cnn --precision bf16 --grad-dtype bf16 --data "$DATA" --limit-train 600 --limit-test 200 --no-plot)
mkdir -p "$WORK/b16whole" "$WORK/b16parts" "$WORK/f32whole"
"${MPI[@]}" -n 2 "$BIN" "${B16[@]}" --epochs 2 --out "$WORK/b16whole" --export "$WORK/b16whole/w.st" \
  --stats-json "$WORK/b16whole/stats.json" >"$WORK/b16whole/log" 2>&1 || fail "bf16 run: $(tail -3 "$WORK/b16whole/log")"
"${MPI[@]}" -n 2 "$BIN" "${B16[@]}" --epochs 1 --out "$WORK/b16parts" --checkpoint "$WORK/b16.ckpt" \
  >"$WORK/b16parts/log1" 2>&1 || fail "bf16 first part: $(tail -3 "$WORK/b16parts/log1")"
"${MPI[@]}" -n 2 "$BIN" "${B16[@]}" --epochs 2 --out "$WORK/b16parts" --checkpoint "$WORK/b16.ckpt" --resume \
  --export "$WORK/b16parts/w.st" >"$WORK/b16parts/log2" 2>&1 || fail "bf16 resumed part: $(tail -3 "$WORK/b16parts/log2")"
"${MPI[@]}" -n 2 "$BIN" --model cnn --data "$DATA" --limit-train 600 --limit-test 200 --no-plot --epochs 2 \
  --out "$WORK/f32whole" --export "$WORK/f32whole/w.st" --stats-json "$WORK/f32whole/stats.json" \
  >"$WORK/f32whole/log" 2>&1 || fail "float run: $(tail -3 "$WORK/f32whole/log")"
if [ "$(cut -d, -f1-4 "$WORK/b16whole/metrics.csv")" = "$(cut -d, -f1-4 "$WORK/b16parts/metrics.csv")" ] &&
  cmp -s "$WORK/b16whole/w.st" "$WORK/b16parts/w.st"; then
  pass "bf16: resume bitwise the run that never stopped"
else
  fail "bf16 resume differs: $(paste -d' ' "$WORK/b16whole/metrics.csv" "$WORK/b16parts/metrics.csv")"
fi
# The run names the unit its bf16 products took, and why (kernels/units.h). On a bf16 unit the
# weights are not the float run's (the products rounded); without one the products stay float.
unit=$(grep -o '"bf16_unit":"[a-z0-9]*"' "$WORK/b16whole/stats.json" | cut -d'"' -f4)
if [ "$unit" = float ]; then
  cmp -s "$WORK/b16whole/w.st" "$WORK/f32whole/w.st" || fail "no bf16 unit, yet the bf16 weights are not the float run's"
else
  cmp -s "$WORK/b16whole/w.st" "$WORK/f32whole/w.st" && fail "bf16 weights equal the float run's: nothing rounded"
fi
if grep -q "^precision: bf16 products on $unit (measured per core: float FMA" "$WORK/b16whole/log" &&
  [[ "$unit" =~ ^(amx|avx512bf16|float)$ ]]; then
  pass "bf16: the log and stats name the unit ($unit)"
else
  fail "bf16: no unit named (stats '$unit'): $(grep -m1 '^precision' "$WORK/b16whole/log")"
fi
b16_bytes=$(grep -o '"allreduce_bytes_per_step":[0-9]*' "$WORK/b16whole/stats.json" | cut -d: -f2)
f32_bytes=$(grep -o '"allreduce_bytes_per_step":[0-9]*' "$WORK/f32whole/stats.json" | cut -d: -f2)
if [ -n "$b16_bytes" ] && [ -n "$f32_bytes" ] && [ $((2 * b16_bytes)) -eq "$f32_bytes" ]; then
  pass "--grad-dtype bf16: half the allreduce bytes ($b16_bytes of $f32_bytes)"
else
  fail "--grad-dtype bf16 bytes per step: '$b16_bytes' against float '$f32_bytes'"
fi
# --bucket-mb auto: every distinct plan tried, the choice printed and in --stats-json, among the
# plans tried, and the run trains with it (the same bits as with those caps given: 2 ranks
# average exactly whatever the buckets).
d=$WORK/auto; mkdir -p "$d/fixed"
if "${MPI[@]}" -n 2 "$BIN" --model cnn --data "$DATA" --limit-train 640 --limit-test 100 --epochs 1 --no-plot \
     --bucket-mb auto --out "$d" --stats-json "$d/stats.json" --export "$d/w.st" >"$d/log" 2>&1; then
  grep -Eq "^bucket caps: auto -> .*, [0-9]+ buckets: [0-9.]+ ms per step, the fastest of [0-9]+ plans tried on this network" "$d/log" ||
    fail "--bucket-mb auto: no choice line: $(grep 'bucket caps' "$d/log")"
  caps=$(python3 - "$d/stats.json" <<'EOF2'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][0]
assert a["type"] == "bucket_autosize", a
t = a["trials"]
assert len(t) >= 2 and all(x["step_s"] > 0 for x in t), t
assert len({(x["cap_bytes"], x["first_cap_bytes"]) for x in t}) == len(t), t  # distinct plans
chosen = [x for x in t if (x["cap_bytes"], x["first_cap_bytes"]) == (a["cap_bytes"], a["first_cap_bytes"])]
assert len(chosen) == 1 and chosen[0]["buckets"] == a["buckets"] and chosen[0]["step_s"] == a["step_s"], (a, t)
print(a["cap_bytes"] / 1048576.0, a["first_cap_bytes"] / 1048576.0)
EOF2
  ) || fail "--bucket-mb auto: the stats-json line: $caps"
  set -- $caps
  "${MPI[@]}" -n 2 "$BIN" --model cnn --data "$DATA" --limit-train 640 --limit-test 100 --epochs 1 --no-plot \
    --bucket-mb "$1" --first-bucket-mb "$2" --out "$d/fixed" --export "$d/fixed/w.st" >"$d/fixed/log" 2>&1 ||
    fail "--bucket-mb $1: $(tail -3 "$d/fixed/log")"
  cmp -s "$d/w.st" "$d/fixed/w.st" && pass "--bucket-mb auto: plans tried, the choice printed and in stats.json, trained with it" ||
    fail "--bucket-mb auto: the weights differ from a run with the caps it chose ($1, $2 MiB)"
else
  fail "--bucket-mb auto run: $(tail -3 "$d/log")"
fi
# SIGTERM to the ranks (scancel, preemption): every rank finishes its step, rank 0 writes the
# checkpoint (inside an epoch), all exit 75; --resume then ends bitwise where the run that never
# stopped ends (metrics but the seconds, exported weights). The ranks are frozen (SIGSTOP) at a
# moment both have their handler installed (SigCgt in /proc: a state, not a time), before
# training can have ended (they install it before reading the data), given SIGTERM, let go.
S=(--data "$DATA" --limit-test 500 --epochs 2 --no-plot --check-every 1)
mkdir -p "$WORK/sig-whole" "$WORK/sig"
"${MPI[@]}" -n 2 "$BIN" "${S[@]}" --out "$WORK/sig-whole" --export "$WORK/sig-whole/w.st" >"$WORK/sig-whole/log" 2>&1 ||
  fail "signal reference run: $(tail -3 "$WORK/sig-whole/log")"
"${MPI[@]}" -n 2 "$BIN" "${S[@]}" --out "$WORK/sig" --checkpoint "$WORK/sig/ck" --export "$WORK/sig/w.st" \
  >"$WORK/sig/log" 2>&1 &
pid=$!
signal_ranks "$pid" mnist_train 2 TERM
caught=$CAUGHT
wait "$pid"; rc=$?
if [ "$caught" -eq 1 ] && [ "$rc" -eq 75 ]; then
  grep -Eq "^mnist_train: SIGTERM: all ranks stopped after epoch [12] \(step [0-9]+ of 32\); checkpoint '$WORK/sig/ck' written" "$WORK/sig/log" ||
    fail "no stop message naming the step: $(grep mnist_train: "$WORK/sig/log")"
  "${MPI[@]}" -n 2 "$BIN" "${S[@]}" --out "$WORK/sig" --checkpoint "$WORK/sig/ck" --resume --export "$WORK/sig/w.st" \
    >>"$WORK/sig/log" 2>&1 || fail "resume after SIGTERM: $(tail -3 "$WORK/sig/log")"
  grep -Eq "resumed from '$WORK/sig/ck' (inside epoch [12] \(step [0-9]+ of 32\) of 2 epochs|after epoch 1 of 2)" "$WORK/sig/log" ||
    fail "no 'resumed' line: $(grep resumed "$WORK/sig/log")"
  [ "$(cut -d, -f1-4 "$WORK/sig-whole/metrics.csv")" = "$(cut -d, -f1-4 "$WORK/sig/metrics.csv")" ] ||
    fail "after SIGTERM and resume the metrics differ: $(paste -d' ' "$WORK/sig-whole/metrics.csv" "$WORK/sig/metrics.csv")"
  cmp -s "$WORK/sig-whole/w.st" "$WORK/sig/w.st" || fail "after SIGTERM and resume the weights differ"
  pass "SIGTERM -> checkpoint inside the epoch -> 75 -> resume: bitwise the run that never stopped"
else
  fail "SIGTERM: caught $caught, exit $rc (expected 75): $(tail -3 "$WORK/sig/log")"
fi
# The CNN with the optimizer kit, 1 epoch on 2 ranks, its weights read back by PyTorch: the same
# accuracy on the test images (within one image: float rounding may tip a near tie).
d=$WORK/cnn; mkdir -p "$d"
if "${MPI[@]}" -n 2 "$BIN" --data "$DATA" --model cnn --optimizer adamw --lr-schedule cosine --warmup 10 \
     --clip-grad-norm 5 --dropout 0.25 --epochs 1 --no-plot --out "$d" --export "$d/w.safetensors" >"$d/log" 2>&1; then
  acc=$(awk -F, 'NR == 2 { print $4 }' "$d/metrics.csv")
  awk -v a="$acc" 'BEGIN { exit !(a > 0.6) }' || fail "the CNN learned little in an epoch: accuracy $acc"
  /usr/bin/python3 "$(dirname "$0")/torch_safetensors.py" check-mnist "$d/w.safetensors" "$DATA" 1000 "$acc" >"$d/torch.log" 2>&1 &&
    pass "the CNN (AdamW, cosine after warmup, clipping, dropout): PyTorch reproduces its test accuracy ($acc)" ||
    fail "the CNN's export in PyTorch: $(cat "$d/torch.log")"
else
  fail "the CNN run: $(tail -3 "$d/log")"
fi
head -c 3000 "$WORK/run.ckpt" >"$WORK/cut.ckpt"

# expect_usage NAME RANKS WANT ARGS...: exit 2, WANT in the output, nothing trained.
expect_usage() {
  local name=$1 ranks=$2 want=$3
  shift 3
  local o=$WORK/bad-$name; mkdir -p "$o"
  if [ "$ranks" -eq 1 ]; then  # a singleton: MPI without mpiexec
    timeout 120 "$BIN" --out "$o" --no-plot "$@" >"$o/log" 2>&1
  else
    "${MPI[@]}" -n "$ranks" "$BIN" --out "$o" --no-plot "$@" >"$o/log" 2>&1
  fi
  local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$want" "$o/log" && ! grep -q '^epoch' "$o/log" && [ ! -e "$o/metrics.csv" ]; then
    pass "$name: exit 2"
  else
    fail "$name: want exit 2 and '$want', got $rc: $(tail -3 "$o/log")"
  fi
}

# IDX files made here: 20 images of 4 x 4 and their labels, then damaged copies.
python3 - "$WORK" <<'EOF'
import gzip, os, struct, sys
w = sys.argv[1]
def idx(dims, data):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)
def put(dirname, files):
    os.makedirs(f"{w}/{dirname}", exist_ok=True)
    for name, blob in files.items():
        with gzip.open(f"{w}/{dirname}/{name}.gz", "wb") as f:
            f.write(blob)
good = {"train-images-idx3-ubyte": idx([20, 4, 4], [i % 256 for i in range(320)]),
        "train-labels-idx1-ubyte": idx([20], [i % 10 for i in range(20)]),
        "t10k-images-idx3-ubyte": idx([10, 4, 4], [i % 256 for i in range(160)]),
        "t10k-labels-idx1-ubyte": idx([10], [i % 10 for i in range(10)])}
put("good", good)
# 2 x 2 images: too small for the CNN's second pool (exit 2, naming that layer).
put("small", {"train-images-idx3-ubyte": idx([20, 2, 2], [i % 256 for i in range(80)]),
              "train-labels-idx1-ubyte": good["train-labels-idx1-ubyte"],
              "t10k-images-idx3-ubyte": idx([10, 2, 2], [i % 256 for i in range(40)]),
              "t10k-labels-idx1-ubyte": good["t10k-labels-idx1-ubyte"]})
put("magic", {**good, "train-images-idx3-ubyte": b"\x1f\x8b" + good["train-images-idx3-ubyte"][2:]})
put("count", {**good, "train-labels-idx1-ubyte": idx([19], [1] * 19)})
put("trunc", {**good, "t10k-images-idx3-ubyte": good["t10k-images-idx3-ubyte"][:-7]})
put("label", {**good, "t10k-labels-idx1-ubyte": idx([10], [3] * 9 + [12])})
os.makedirs(f"{w}/nolabels", exist_ok=True)
for k in ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
    with gzip.open(f"{w}/nolabels/{k}.gz", "wb") as f:
        f.write(good[k])
EOF
o=$WORK/tiny; mkdir -p "$o"
"${MPI[@]}" -n 2 "$BIN" --data "$WORK/good" --epochs 2 --batch-size 4 --hidden 8 --no-plot --out "$o" >"$o/log" 2>&1 &&
  grep -q 'data: 20 training and 10 test images of 16 pixels' "$o/log" && [ "$(wc -l <"$o/metrics.csv")" -eq 3 ] &&
  pass "generated IDX files train" || fail "generated IDX files: $(tail -3 "$o/log")"

expect_usage missing-data 2 "apt-get install dataset-fashion-mnist" --data "$WORK/nowhere"
expect_usage cnn-small-images 2 "layer 5 (MaxPool2d(kernel_size=2, stride=2))" --model cnn --data "$WORK/small"
expect_usage cnn-lr-schedule 1 "--lr-schedule" --lr-schedule "cosine:x"
expect_usage cnn-warmup 1 "needs more total steps than warmup steps" --data "$WORK/good" --lr-schedule cosine --warmup 100000
expect_usage bad-magic 1 "bad magic" --data "$WORK/magic"
expect_usage label-count 1 "19 labels for the 20 images" --data "$WORK/count"
expect_usage truncated 1 "truncated" --data "$WORK/trunc"
expect_usage label-range 1 "label 12 of image 9" --data "$WORK/label"
expect_usage no-labels 1 "no 'train-labels-idx1-ubyte.gz'" --data "$WORK/nolabels"
expect_usage epochs 1 "--epochs" --epochs 0
expect_usage optimizer 1 "--optimizer" --optimizer lbfgs
expect_usage mode 1 "--reduce-mode" --reduce-mode sometimes
expect_usage unknown 1 "--no-such-flag" --no-such-flag
expect_usage export-dir 2 "cannot write into directory" --export /proc/nowhere/w.safetensors
expect_usage ckpt-exists 2 "pass --resume" "${C[@]}" --checkpoint "$WORK/run.ckpt"
expect_usage ckpt-other-run 2 "batch_size: '64' in the checkpoint, '32' now" "${C[@]}" --epochs 4 --batch-size 32 \
  --checkpoint "$WORK/run.ckpt" --resume
expect_usage ckpt-ranks 1 "world size (MPI ranks): 2 in the checkpoint, 1 now" "${C[@]}" --epochs 4 \
  --checkpoint "$WORK/run.ckpt" --resume
expect_usage ckpt-truncated 2 "is truncated" "${C[@]}" --epochs 4 --checkpoint "$WORK/cut.ckpt" --resume
expect_usage resume-alone 1 "--resume: needs --checkpoint" --resume
expect_usage precision 1 "--precision" --precision fp8
export HDDP_BF16_UNIT=fp8
expect_usage bf16-unit 2 "HDDP_BF16_UNIT='fp8': expected float, avx512bf16 or amx" --precision bf16 --data "$DATA" --epochs 1
unset HDDP_BF16_UNIT
expect_usage grad-dtype 1 "--grad-dtype" --grad-dtype half
expect_usage ckpt-precision 2 "precision" "${C[@]}" --epochs 4 --precision bf16 --checkpoint "$WORK/run.ckpt" --resume
if "$BIN" --help >"$WORK/help" 2>&1 && grep -q -- '--data' "$WORK/help" && grep -q -- '--reduce-mode' "$WORK/help"; then
  pass "--help"
else
  fail "--help: $(head -3 "$WORK/help")"
fi

echo "$((failures == 0 ? 1 : 0)) passed, $failures failed"
[ $failures -eq 0 ]
