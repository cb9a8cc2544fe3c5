#!/usr/bin/env bash
# The first GPT config (4 layers, 4 heads, dim 128, context 64, batch 12 per rank: nanoGPT's CPU
# example) trained for real on Debian's fortunes by hddp (gpt_train) and by PyTorch DDP (the same
# model, optimizer, schedule and split: bench/gpt/gpt_pytorch.py train), 2 ranks x 1 thread, seeds
# 1..SEEDS: the validation loss every 250 steps, side by side. The goal: the same validation loss
# after 2,000 steps within 0.05 nats (mean over the seeds).
#
#   bash bench/gpt/gpt_loss.sh [OUTDIR]     (default bench/results/<cpu>/gpt/)
#   env: SEEDS=3, STEPS=2000, EVERY=250, TORCH_OPENBLAS_CORETYPE (default: the probe's best)
# Writes OUTDIR/gpt_loss.csv (impl, precision, seed, step, val_loss, train_s) and gpt_loss.md
# (bench/gpt/gpt_table.py loss) and gpt_loss.pdf (the curves).
source "$(dirname "$0")/../../scripts/common.sh"
HDDP_TARGETS=gpt_train hddp_build build bench
PY=/usr/bin/python3
BIN="$BUILD_DIR/drivers/gpt_train"
SEEDS="${SEEDS:-3}" STEPS="${STEPS:-2000}" EVERY="${EVERY:-250}"
source "$HDDP_ROOT/scripts/placement.sh"
hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG/gpt}"
mkdir -p "$OUT"
CSV="$OUT/gpt_loss.csv"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [ -z "${TORCH_OPENBLAS_CORETYPE+set}" ]; then
  TORCH_OPENBLAS_CORETYPE="$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["best"])' \
    "$("$PY" "$HDDP_ROOT/bench/step/openblas_core.py" 768 384 128)")"
fi
unset OPENBLAS_CORETYPE
hddp_launch_local 2 1 || exit 2
launch=("${HDDP_LAUNCH[@]}")
echo "impl,precision,seed,step,val_loss,train_s" >"$CSV"
for seed in $(seq "$SEEDS"); do
  d="$WORK/hddp-$seed"; mkdir -p "$d"
  echo "hddp, seed $seed" >&2
  timeout 7200 "${launch[@]}" "$BIN" --steps "$STEPS" --eval-every "$EVERY" --seed "$seed" --out "$d" --no-plot \
    --stats-json "$d/stats.json" --sample-tokens 0 >"$d/log" 2>&1 || { tail -5 "$d/log" >&2; exit 1; }
  "$PY" "$HDDP_ROOT/bench/gpt/gpt_table.py" rows loss-hddp "$d/stats.json" "$seed" >>"$CSV"
  echo "PyTorch, seed $seed" >&2
  HDDP_TORCH_PORT=$((29700 + RANDOM % 200)) OPENBLAS_CORETYPE="$TORCH_OPENBLAS_CORETYPE" timeout 7200 "${launch[@]}" \
    -x HDDP_TORCH_PORT -x OPENBLAS_CORETYPE "$PY" "$HDDP_ROOT/bench/gpt/gpt_pytorch.py" train 4 4 128 64 12 "$STEPS" "$EVERY" "$seed" \
    >"$WORK/torch-$seed.log" 2>&1 || { tail -5 "$WORK/torch-$seed.log" >&2; exit 1; }
  "$PY" "$HDDP_ROOT/bench/gpt/gpt_table.py" rows loss-pytorch "$WORK/torch-$seed.log" "$seed" >>"$CSV"
done
"$PY" "$HDDP_ROOT/bench/gpt/gpt_table.py" loss "$CSV" "$CPU_MODEL ($CPU_FM)" "$OUT/gpt_loss.pdf" >"$OUT/gpt_loss.md"
cat "$OUT/gpt_loss.md"
echo "raw: $CSV"
