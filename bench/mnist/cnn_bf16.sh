#!/usr/bin/env bash
# The Fashion-MNIST CNN in float and in bf16, hddp and PyTorch, side by side: per round and layout
# (ranks x threads) four runs in turn, hddp float, hddp --precision bf16, PyTorch DDP float,
# PyTorch under torch.autocast(bf16) (bench/mnist/mnist_pytorch.py), each seeded with the round.
# The questions: is bf16 never slower than float (hddp), how far ahead of PyTorch is each
# precision, and do 2 threads run 1.9x one.
#
#   bash bench/mnist/cnn_bf16.sh [OUTDIR]     (default bench/results/<cpu>/bf16/)
#   env: LAYOUTS="1x1 2x1 1x2", REPS=3, EPOCHS=1, LIMIT=25600 (training images; 0: all 60,000),
#        BATCH=64 (per rank), DATA=/usr/share/datasets/fashion-mnist, TORCH_OPENBLAS_CORETYPE
# Writes OUTDIR/cnn_bf16.csv (every epoch of every run: impl, precision, ranks, threads, rep,
# epoch, train_s, test_accuracy, bf16_unit) and OUTDIR/cnn_bf16.md (bench/mnist/cnn_bf16_table.py).
source "$(dirname "$0")/../../scripts/common.sh"
HDDP_TARGETS=mnist_train hddp_build build bench time
PY=/usr/bin/python3
BIN="$BUILD_DIR/drivers/mnist_train"
LAYOUTS="${LAYOUTS:-1x1 2x1 1x2}" REPS="${REPS:-3}" EPOCHS="${EPOCHS:-1}" LIMIT="${LIMIT:-25600}" BATCH="${BATCH:-64}"
DATA="${DATA:-/usr/share/datasets/fashion-mnist}"
source "$HDDP_ROOT/scripts/placement.sh"
hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG/bf16}"
mkdir -p "$OUT"
CSV="$OUT/cnn_bf16.csv" MD="$OUT/cnn_bf16.md"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [ -z "${TORCH_OPENBLAS_CORETYPE+set}" ]; then
  core_json="$("$PY" "$HDDP_ROOT/bench/step/openblas_core.py" "$BATCH" 128 3136)"
  TORCH_OPENBLAS_CORETYPE="$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["best"])' "$core_json")"
  detected="$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["detected"])' "$core_json")"
fi
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

limit=()
[ "$LIMIT" != 0 ] && limit=(--limit-train "$LIMIT")
echo "impl,precision,ranks,threads,rep,epoch,train_s,test_accuracy,bf16_unit" >"$CSV"
for rep in $(seq "$REPS"); do
  for layout in $LAYOUTS; do
    p=${layout%x*} t=${layout#*x}
    hddp_launch_local "$p" "$t" || exit 2
    launch=("${HDDP_LAUNCH[@]}")
    for prec in float bf16; do
      d="$WORK/hddp-$prec-$layout-$rep"
      mkdir -p "$d"
      echo "hddp $prec, $p x $t, round $rep/$REPS" >&2
      timeout 3600 "${launch[@]}" "$BIN" --model cnn --seed "$rep" --precision "$prec" --data "$DATA" \
        --epochs "$EPOCHS" --batch-size "$BATCH" "${limit[@]}" --out "$d" --no-plot \
        --stats-json "$d/stats.json" >"$d/log" 2>&1 || { tail -5 "$d/log" >&2; exit 1; }
      "$PY" - "$d/stats.json" "$prec" "$p" "$t" "$rep" >>"$CSV" <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
unit = [e.get("bf16_unit", "") for e in lines if e["type"] == "summary"][0]
for e in lines:
    if e["type"] == "epoch":
        print(f'hddp,{sys.argv[2]},{sys.argv[3]},{sys.argv[4]},{sys.argv[5]},{e["epoch"]},{e["train_s"]},{e["test_accuracy"]},{unit}')
PYEOF
    done
    for prec in float bf16; do
      d="$WORK/torch-$prec-$layout-$rep"
      mkdir -p "$d"
      echo "PyTorch $prec, $p x $t, round $rep/$REPS" >&2
      HDDP_TORCH_PORT=$((29700 + RANDOM % 200)) HDDP_TORCH_LIMIT_TRAIN="$LIMIT" OPENBLAS_CORETYPE="$TORCH_OPENBLAS_CORETYPE" \
        HDDP_TORCH_AUTOCAST="$([ "$prec" = bf16 ] && echo bf16)" timeout 3600 "${launch[@]}" -x HDDP_TORCH_PORT \
        -x HDDP_TORCH_LIMIT_TRAIN -x OPENBLAS_CORETYPE -x HDDP_TORCH_AUTOCAST \
        "$PY" "$HDDP_ROOT/bench/mnist/mnist_pytorch.py" "$DATA" "$EPOCHS" "$BATCH" 0 cnn "$rep" >"$d/log" 2>&1 \
        || { tail -5 "$d/log" >&2; exit 1; }
      "$PY" - "$d/log" "$prec" "$p" "$t" "$rep" >>"$CSV" <<'PYEOF'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        e = json.loads(l)
        print(f'pytorch,{sys.argv[2]},{sys.argv[3]},{sys.argv[4]},{sys.argv[5]},{e["epoch"]},{e["train_s"]},{e["test_accuracy"]},')
PYEOF
    done
  done
done
"$PY" "$HDDP_ROOT/bench/mnist/cnn_bf16_table.py" "$CSV" "$CPU_MODEL ($CPU_FM)" \
  "PyTorch's OpenBLAS kernel: ${TORCH_OPENBLAS_CORETYPE:-as detected (${detected:-?}), the fastest of the probe}; $LIMIT training images (0: all), batch $BATCH per rank, $EPOCHS epoch(s), $REPS round(s)" >"$MD"
cat "$MD"
echo "raw: $CSV"
