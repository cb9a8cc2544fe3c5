#!/usr/bin/env bash
# Bad input leaves the output folder as it was. For poly_train and mnist_train, an --out folder
# holding a finished run's files (outputs, exported weights, statistics, its checkpoint) is
# given to runs with bad input that would write all of them again (--checkpoint there with
# --resume, --export, --stats-json): a bad option, a damaged --init or --config file, damaged
# IDX files (a wrong type byte, cut labels, a gzip bomb, dimensions whose product wraps), a test
# set of another image shape (14 x 14 beside 28 x 28 training images). Each
# must exit 2 on every rank (each rank's own code, lib.sh RECORD) with a message naming the
# file or option, train nothing, and leave every file of the folder byte-identical, with no
# file added or removed (a listing with types, modes and sha256 before and after).
# Usage: test_bad_input.sh <poly_train> <mpiexec> <faults_ckpt_tool> <scratch dir> <mnist_train>
source "$(dirname "$0")/lib.sh" "$@"
MNIST=$5
SRC=/usr/share/datasets/fashion-mnist

# snapshot DIR: every entry of DIR (type, mode, path) and every file's sha256.
snapshot() {
  (cd "$1" && find . -printf '%y %m %p\n' | sort && find . -type f -exec sha256sum {} + | sort -k 2)
}

# refused NAME PROGRAM DIR WANT ARGS...: PROGRAM on 2 ranks with ARGS exits 2 on every rank,
# says WANT in an error line (fixed strings, '|' between several that must all be there),
# trains nothing, and leaves DIR as it was.
refused() {
  local name=$1 prog=$2 dir=$3 want=$4 rcd=$WORK/rc-$1 before
  shift 4
  mkdir -p "$rcd"
  before=$(snapshot "$dir")
  RC_DIR=$rcd "${MPI[@]}" -n 2 "${RECORD[@]}" "$prog" "$@" >"$rcd/log" 2>&1 </dev/null
  every_rank_exited "$rcd" 2 2 "$name"
  local w
  while IFS= read -r -d '|' w; do
    grep "error:" "$rcd/log" | grep -qF -- "$w" || fail "$name: no error line saying '$w': $(grep -m3 'error' "$rcd/log")"
  done <<<"$want|"
  grep -Eq "^(epoch|progress:)" "$rcd/log" && fail "$name: trained"
  diff <(echo "$before") <(snapshot "$dir") >"$rcd/diff" || fail "$name: the output folder changed: $(cat "$rcd/diff")"
  pass "$name"
}

# poly_train: a finished run's folder.
P=$WORK/poly
mkdir -p "$P" "$WORK/files"
"${MPI[@]}" -n 2 "$BIN" --no-plot --epochs 50 --out "$P" --checkpoint "$P/ck" --export "$P/w.st" \
  --stats-json "$P/stats.json" >"$WORK/poly.log" 2>&1 || fail "poly_train's first run exited $?"
head -c 100 "$P/w.st" >"$WORK/files/cut.st"
printf 'epochs = 60\nno-such-key = 1\n' >"$WORK/files/bad.toml"
PW=(--no-plot --out "$P" --export "$P/w.st" --stats-json "$P/stats.json")
refused poly-bad-option "$BIN" "$P" "--no-such-flag" "${PW[@]}" --epochs 60 --checkpoint "$P/ck" --resume --no-such-flag
refused poly-bad-value "$BIN" "$P" "--hidden" "${PW[@]}" --epochs 60 --checkpoint "$P/ck" --resume --hidden 20,,3
refused poly-bad-init "$BIN" "$P" "$WORK/files/cut.st" "${PW[@]}" --epochs 60 --init "$WORK/files/cut.st"
refused poly-bad-config "$BIN" "$P" "no-such-key" "${PW[@]}" --checkpoint "$P/ck" --resume --config "$WORK/files/bad.toml"

# mnist_train: a finished run's folder; data sets damaged copies of a 256-image subset.
if [ -e "$SRC/train-images-idx3-ubyte.gz" ]; then
  D=$WORK/fmnist M=$WORK/mnist
  python3 "$(dirname "$0")/../../scripts/fmnist_subset.py" "$SRC" "$D" 256 64
  python3 - "$D" "$WORK" <<'PY'
import shutil, struct, sys
src, work = sys.argv[1], sys.argv[2]
import gzip, os
for name in ("magic", "small-test", "cut-labels", "bomb", "wrap"):
    shutil.copytree(src, f"{work}/{name}")
# A gzip bomb: the training images' header and pixels, then 256 MiB of zeros (256 KiB gzip'd).
p = f"{work}/bomb/train-images-idx3-ubyte"
with gzip.open(p + ".gz", "wb", compresslevel=1) as f:
    f.write(open(p, "rb").read())
    zeros = bytes(1 << 20)
    for _ in range(256):
        f.write(zeros)
os.remove(p)
# Dimensions whose product wraps 64 bits (2^16 x 2^24 x 2^24 = 2^64) over the real pixels.
p = f"{work}/wrap/train-images-idx3-ubyte"
raw = open(p, "rb").read()
open(p, "wb").write(raw[:4] + struct.pack(">III", 1 << 16, 1 << 24, 1 << 24) + raw[16:])
# A wrong magic number in the training images.
p = f"{work}/magic/train-images-idx3-ubyte"
b = bytearray(open(p, "rb").read()); b[2] = 9; open(p, "wb").write(bytes(b))
# The test images as 14 x 14 (every other pixel of every other row), the labels unchanged.
p = f"{work}/small-test/t10k-images-idx3-ubyte"
raw = open(p, "rb").read()
n = struct.unpack(">I", raw[4:8])[0]
body = bytearray()
for i in range(n):
    img = raw[16 + i * 784:16 + (i + 1) * 784]
    for r in range(0, 28, 2):
        body += img[r * 28:(r + 1) * 28:2]
open(p, "wb").write(raw[:4] + struct.pack(">III", n, 14, 14) + bytes(body))
# The test labels cut short.
p = f"{work}/cut-labels/t10k-labels-idx1-ubyte"
raw = open(p, "rb").read(); open(p, "wb").write(raw[:-5])
PY
  mkdir -p "$M"
  MC=(--hidden 16 --batch-size 32 --no-plot --out "$M" --export "$M/w.st" --stats-json "$M/stats.json")
  "${MPI[@]}" -n 2 "$MNIST" "${MC[@]}" --data "$D" --epochs 1 --checkpoint "$M/ck" >"$WORK/mnist.log" 2>&1 \
    || fail "mnist_train's first run exited $?"
  MR=("${MC[@]}" --epochs 2 --checkpoint "$M/ck" --resume)
  refused mnist-bad-option "$MNIST" "$M" "--no-such-flag" "${MR[@]}" --data "$D" --no-such-flag
  refused mnist-bad-magic "$MNIST" "$M" "$WORK/magic/train-images-idx3-ubyte" "${MR[@]}" --data "$WORK/magic"
  refused mnist-test-shape "$MNIST" "$M" "$WORK/small-test: the test images|shape (1, 14, 14)" "${MR[@]}" \
    --data "$WORK/small-test"
  refused mnist-cut-labels "$MNIST" "$M" "$WORK/cut-labels/t10k-labels-idx1-ubyte" "${MR[@]}" --data "$WORK/cut-labels"
  refused mnist-gzip-bomb "$MNIST" "$M" "$WORK/bomb/train-images-idx3-ubyte.gz: data after the" "${MR[@]}" --data "$WORK/bomb"
  refused mnist-wrapping-dims "$MNIST" "$M" "$WORK/wrap/train-images-idx3-ubyte: dimensions (65536, 16777216, 16777216)|overflows" \
    "${MR[@]}" --data "$WORK/wrap"
else
  fail "$SRC missing: scripts/setup-deps.sh installs dataset-fashion-mnist"
fi

finish
