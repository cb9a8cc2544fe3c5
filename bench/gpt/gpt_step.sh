#!/usr/bin/env bash
# The GPT's training step, hddp against PyTorch DDP (bench/gpt/gpt_pytorch.py step: the same
# model, AdamW with the two weight-decay groups, clipping), in float and in bf16 (hddp
# --precision bf16, PyTorch's torch.autocast bf16), per config and layout (ranks x threads), in
# interleaved rounds: per round, config and layout the four runs in turn. Each run reports the
# median of its steps; the table takes the median of the rounds.
#
#   bash bench/gpt/gpt_step.sh [OUTDIR]     (default bench/results/<cpu>/gpt/)
#   env: CONFIGS="small medium gpt2" (below), LAYOUTS="2x1 1x2", REPS=3,
#        TORCH_OPENBLAS_CORETYPE (default: the probe's best kernel for PyTorch's OpenBLAS)
# Configs (layers heads dim context batch-per-rank vocab steps):
#   small   4  4 128  64 12   256 40   nanoGPT's CPU example, 0.83 M parameters
#   medium  6  6 384 256 16   256  8   10.8 M
#   gpt2   12 12 768  64  4 50304  6   GPT-2 small, 124 M (random tokens of its vocabulary)
# Writes OUTDIR/gpt_step.csv (impl, precision, config, layout, rep, step_ms, peak_rss_mb) and
# OUTDIR/gpt_step.md (bench/gpt/gpt_table.py step).
source "$(dirname "$0")/../../scripts/common.sh"
HDDP_TARGETS=gpt_train hddp_build build bench
PY=/usr/bin/python3
BIN="$BUILD_DIR/drivers/gpt_train"
CONFIGS="${CONFIGS:-small medium gpt2}" LAYOUTS="${LAYOUTS:-2x1 1x2}" REPS="${REPS:-3}"
source "$HDDP_ROOT/scripts/placement.sh"
hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG/gpt}"
mkdir -p "$OUT"
CSV="$OUT/gpt_step.csv" MD="$OUT/gpt_step.md"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [ -z "${TORCH_OPENBLAS_CORETYPE+set}" ]; then
  TORCH_OPENBLAS_CORETYPE="$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["best"])' \
    "$("$PY" "$HDDP_ROOT/bench/step/openblas_core.py" 768 384 128)")"
fi
unset OPENBLAS_CORETYPE
declare -A CFG=([small]="4 4 128 64 12 256 40" [medium]="6 6 384 256 16 256 8" [gpt2]="12 12 768 64 4 50304 6")
# GPT-2's vocabulary: a token file of random tokens (the step does not care what they say).
"$PY" - "$WORK/gpt2.tok" <<'PY'
import struct, sys, zlib
import numpy as np
t = np.random.default_rng(0).integers(0, 50304, 400000).astype("<u2").tobytes()
open(sys.argv[1], "wb").write(b"HDDPTOK1" + struct.pack("<IIQII", 1, 50304, len(t) // 2, zlib.crc32(t), 0) + t)
PY
echo "impl,precision,config,layout,rep,step_ms,peak_rss_mb" >"$CSV"
for rep in $(seq "$REPS"); do
  for cfg in $CONFIGS; do
    read -r L H C T B V S <<<"${CFG[$cfg]}"
    data=(); [ "$V" != 256 ] && data=(--tokens "$WORK/gpt2.tok" --prompt 0)
    for layout in $LAYOUTS; do
      p=${layout%x*} t=${layout#*x}
      hddp_launch_local "$p" "$t" || exit 2
      launch=("${HDDP_LAUNCH[@]}")
      for prec in float bf16; do
        d="$WORK/hddp-$cfg-$layout-$prec-$rep"; mkdir -p "$d"
        echo "hddp $cfg $prec, $p x $t, round $rep/$REPS" >&2
        timeout 3600 "${launch[@]}" "$BIN" --layers "$L" --heads "$H" --dim "$C" --context "$T" --batch-size "$B" \
          "${data[@]}" --steps "$S" --eval-every "$S" --eval-windows "$((p * B))" --warmup 1 --precision "$prec" \
          --sample-tokens 0 --log-every 0 --no-plot --out "$d" --stats-json "$d/stats.json" >"$d/log" 2>&1 ||
          { tail -5 "$d/log" >&2; exit 1; }
        "$PY" "$HDDP_ROOT/bench/gpt/gpt_table.py" rows step-hddp "$d/stats.json" "$prec" "$cfg" "$layout" "$rep" >>"$CSV"
      done
      for prec in float bf16; do
        echo "PyTorch $cfg $prec, $p x $t, round $rep/$REPS" >&2
        HDDP_TORCH_PORT=$((29700 + RANDOM % 200)) OPENBLAS_CORETYPE="$TORCH_OPENBLAS_CORETYPE" \
          HDDP_TORCH_AUTOCAST="$([ "$prec" = bf16 ] && echo bf16)" timeout 3600 "${launch[@]}" -x HDDP_TORCH_PORT \
          -x OPENBLAS_CORETYPE -x HDDP_TORCH_AUTOCAST "$PY" "$HDDP_ROOT/bench/gpt/gpt_pytorch.py" step "$L" "$H" "$C" "$T" "$B" "$V" "$S" \
          >"$WORK/torch.log" 2>&1 || { tail -5 "$WORK/torch.log" >&2; exit 1; }
        "$PY" "$HDDP_ROOT/bench/gpt/gpt_table.py" rows step-pytorch "$WORK/torch.log" "$prec" "$cfg" "$layout" "$rep" >>"$CSV"
      done
    done
  done
done
"$PY" "$HDDP_ROOT/bench/gpt/gpt_table.py" step "$CSV" "$CPU_MODEL ($CPU_FM)" >"$MD"
cat "$MD"
echo "raw: $CSV"
