#!/usr/bin/env bash
# poly_train's weights in safetensors, with PyTorch on the other side (tests/drivers/torch_safetensors.py):
#   1. hddp trains and --export's; PyTorch loads the file into the tutorial's nn.Sequential and
#      predicts eval.csv within 1e-6;
#   2. PyTorch writes initial weights; one hddp step from them (--init) equals one PyTorch Adam
#      step on the same batch (--debug-save-batch) within 1e-6;
#   3. damaged or mismatched files for --init: exit 2 with a message naming the problem, on 1
#      and 2 ranks, nothing trained or written; --init with --resume is refused.
# Usage: test_safetensors.sh <poly_train> <mpiexec> <scratch dir>
set -uo pipefail
BIN=$1 MPIEXEC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
MPI=("$MPIEXEC" --oversubscribe --bind-to none --timeout 120)
HERE=$(cd "$(dirname "$0")" && pwd)
# Debian's python3-torch is installed for /usr/bin/python3 (scripts/setup-deps.sh); another
# python3 first on PATH (pyenv) may not have it.
PY=python3
python3 -c 'import torch' 2>/dev/null || PY=/usr/bin/python3
"$PY" -c 'import torch' || { echo "FAIL: no PyTorch for $PY (bash scripts/setup-deps.sh installs python3-torch)"; exit 1; }
TORCH=("$PY" "$HERE/torch_safetensors.py")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# 1. hddp -> PyTorch (and, in the same PyTorch process, the initial weights for 2 and the
# damaged files for 3: importing torch costs seconds).
d=$WORK/export; mkdir -p "$d" "$WORK/init" "$WORK/bad"
if "${MPI[@]}" -n 2 "$BIN" --epochs 100 --no-plot --out "$d" --export "$d/w.safetensors" >"$d/log" 2>&1; then
  out=$("${TORCH[@]}" check-export "$d/w.safetensors" "$d/eval.csv" -- write-init "$WORK/init/w0.safetensors" 7 \
        -- make-bad "$d/w.safetensors" "$WORK/bad" 2>&1); prc=$?
  [ "$prc" -eq 0 ] && grep -q "^check-export: 32 points" <<<"$out" &&
    pass "PyTorch predicts eval.csv from --export" || fail "PyTorch's predictions from the exported weights: $out"
  [ -s "$WORK/init/w0.safetensors" ] && [ -s "$WORK/bad/f64.safetensors" ] || fail "write-init / make-bad: $out"
else
  fail "--export run: $(tail -3 "$d/log")"
fi

# 2. PyTorch -> hddp: one step each from the same weights on the same batch.
d=$WORK/init
if "$BIN" --epochs 1 --no-plot --out "$d" --init "$d/w0.safetensors" --export "$d/w1.safetensors" \
     --debug-save-batch "$d/batch.csv" >"$d/log" 2>&1; then
  "${TORCH[@]}" check-step "$d/w0.safetensors" "$d/batch.csv" "$d/w1.safetensors" 1e-3 \
    && pass "one hddp step from PyTorch's weights equals PyTorch's" || fail "hddp's step from --init differs"
else
  fail "--init run: $(tail -3 "$d/log")"
fi

# 3. Bad files: exit 2, the message, nothing written. Every case on 1 rank (a singleton); two of
# them on 2 ranks too (every rank parses the bytes rank 0 read and they agree on the verdict:
# one path for every case).
d=$WORK/bad
cases=(
  "truncated|run past the data" "header_past_end|header length" "not_json|not a JSON object"
  "overlap|overlaps" "tiny|less than the 8-byte header length" "f64|is F64"
  "wrong_shape|has shape [21, 1], the model's is [20, 1]" "missing|has no tensor '1.weight'"
  "extra|holds tensor '2.weight'" "no-such-file|--init: cannot open"
)
for c in "${cases[@]}"; do
  name=${c%%|*} want=${c#*|}
  nps=(1); case "$name" in truncated|wrong_shape) nps+=(2) ;; esac
  for np in "${nps[@]}"; do
    out=$WORK/out-$name-$np; mkdir -p "$out"
    if [ "$np" -eq 1 ]; then
      msg=$(timeout 120 "$BIN" --epochs 5 --no-plot --out "$out" --init "$d/$name.safetensors" 2>&1); rc=$?
    else
      msg=$("${MPI[@]}" -n "$np" "$BIN" --epochs 5 --no-plot --out "$out" --init "$d/$name.safetensors" 2>&1); rc=$?
    fi
    [ $rc -eq 2 ] || fail "$name on $np rank(s): exit $rc, expected 2: $msg"
    grep -qF -- "$want" <<<"$msg" || fail "$name on $np rank(s): the message does not say '$want': $msg"
    grep -q '^epoch' <<<"$msg" && fail "$name: training started"
    [ -z "$(ls -A "$out")" ] || fail "$name: files written: $(ls "$out")"
  done
done
[ $failures -eq 0 ] && pass "bad --init files refused"
msg=$(timeout 120 "$BIN" --out "$WORK" --init "$d/f64.safetensors" --checkpoint "$WORK/c.ckpt" --resume 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- '--init: not with --resume' <<<"$msg" && pass "--init with --resume refused" \
  || fail "--init with --resume: exit $rc: $msg"

echo "$((failures == 0 ? 1 : 0)) passed, $failures failed"
[ $failures -eq 0 ]
