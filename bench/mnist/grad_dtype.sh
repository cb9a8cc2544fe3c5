#!/usr/bin/env bash
# --grad-dtype bf16 against float: the Fashion-MNIST CNN on 2 ranks x 1 thread, EPOCHS epochs,
# seeds 1..REPS, interleaved; the allreduce bytes per step and the test accuracy after the last
# epoch of each run. Writes OUTDIR/grad_dtype.csv (default bench/results/<cpu>/bf16/).
#   bash bench/mnist/grad_dtype.sh [OUTDIR]     env: EPOCHS=3 REPS=3 DATA=/usr/share/datasets/fashion-mnist
source "$(dirname "$0")/../../scripts/common.sh"
HDDP_TARGETS=mnist_train hddp_build build bench
EPOCHS="${EPOCHS:-3}" REPS="${REPS:-3}" DATA="${DATA:-/usr/share/datasets/fashion-mnist}"
hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG/bf16}"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "grad_dtype,seed,epochs,test_accuracy,allreduce_bytes_per_step,epoch_s" >"$OUT/grad_dtype.csv"
for seed in $(seq "$REPS"); do
  for g in float bf16; do
    d="$WORK/$g-$seed"
    mkdir -p "$d"
    echo "--grad-dtype $g, seed $seed" >&2
    OMP_NUM_THREADS=1 timeout 1800 mpiexec -n 2 --bind-to core -x OMP_NUM_THREADS "$BUILD_DIR/drivers/mnist_train" \
      --model cnn --grad-dtype "$g" --seed "$seed" --epochs "$EPOCHS" --data "$DATA" --out "$d" --no-plot \
      --stats-json "$d/stats.json" >"$d/log" 2>&1 || { tail -5 "$d/log" >&2; exit 1; }
    /usr/bin/python3 - "$d/stats.json" "$g" "$seed" "$EPOCHS" >>"$OUT/grad_dtype.csv" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
print(f'{sys.argv[2]},{sys.argv[3]},{sys.argv[4]},{s["test_accuracy"]},{s["allreduce_bytes_per_step"]},{s["epoch_s"]}')
PY
  done
done
cat "$OUT/grad_dtype.csv"
