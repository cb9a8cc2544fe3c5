#!/usr/bin/env bash
# The Fashion-MNIST classifier, hddp's mnist_train against PyTorch DDP (bench/mnist/mnist_pytorch.py)
# side by side in one run: the same data, MLP 784-W-W-10 (ReLU), softmax cross-entropy, Adam
# 1e-3, batch B per rank, a shuffle sharded over the ranks each epoch; 1 and 2 ranks x 1 thread,
# ranks bound to cores; REPS interleaved rounds (hddp, PyTorch, hddp, ...), median reported.
# Seconds per epoch (the step loop), time to 87 % test accuracy (training seconds summed up to
# the epoch that first reaches it), accuracy after EPOCHS, peak RSS per rank.
#
#   bash bench/mnist_vs_pytorch.sh [OUTDIR]     (default bench/results/<cpu>/)
#   env: EPOCHS=10, RANKS="1 2", BATCH=64, WIDTH=256, REPS=1, DATA=/usr/share/datasets/fashion-mnist
#
# Installs what is missing (PyTorch, the data set) and builds first; PyTorch's OpenBLAS runs the
# fastest correct kernel for this CPU (bench/step/openblas_core.py; TORCH_OPENBLAS_CORETYPE
# overrides). Writes OUTDIR/mnist_vs_pytorch.csv (every epoch of every run) and
# OUTDIR/mnist_vs_pytorch.md (the table and goals, bench/mnist/mnist_table.py), and prints it.
source "$(dirname "$0")/../scripts/common.sh"
HDDP_TARGETS=mnist_train hddp_build build bench time
PY=/usr/bin/python3
BIN="$BUILD_DIR/drivers/mnist_train"
EPOCHS="${EPOCHS:-10}" RANKS="${RANKS:-1 2}" BATCH="${BATCH:-64}" WIDTH="${WIDTH:-256}" REPS="${REPS:-1}"
DATA="${DATA:-/usr/share/datasets/fashion-mnist}"

hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG}"
mkdir -p "$OUT"
CSV="$OUT/mnist_vs_pytorch.csv" MD="$OUT/mnist_vs_pytorch.md"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

if [ -z "${TORCH_OPENBLAS_CORETYPE+set}" ]; then
  core_json="$("$PY" "$HDDP_ROOT/bench/step/openblas_core.py" "$BATCH" "$WIDTH" 784)"
  TORCH_OPENBLAS_CORETYPE="$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["best"])' "$core_json")"
  note="OpenBLAS kernel for PyTorch: ${TORCH_OPENBLAS_CORETYPE:-as detected} (probe: $core_json)"
else
  note="OpenBLAS kernel for PyTorch: ${TORCH_OPENBLAS_CORETYPE:-as detected} (TORCH_OPENBLAS_CORETYPE)"
fi
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_NUM_THREADS=1

echo "impl,ranks,rep,epoch,train_s,elapsed_train_s,test_accuracy,test_loss,rss_mib" >"$CSV"
for rep in $(seq "$REPS"); do
  for p in $RANKS; do
    d="$WORK/hddp-$p-$rep"
    mkdir -p "$d"
    echo "hddp, $p rank(s), round $rep/$REPS" >&2
    timeout 1800 mpiexec -n "$p" --bind-to core -x OMP_NUM_THREADS /usr/bin/time -f 'RSS_KB %M' "$BIN" \
      --data "$DATA" --epochs "$EPOCHS" --batch-size "$BATCH" --hidden "$WIDTH,$WIDTH" --out "$d" --no-plot \
      --stats-json "$d/stats.json" >"$d/log" 2>&1 || { tail -5 "$d/log" >&2; exit 1; }
    rss=$(awk '/^RSS_KB/ { if ($2 > m) m = $2 } END { printf "%.1f", m / 1024 }' "$d/log")
    "$PY" - "$d/stats.json" "$p" "$rep" "$rss" >>"$CSV" <<'EOF'
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["type"] == "epoch":
        print(f'hddp,{sys.argv[2]},{sys.argv[3]},{e["epoch"]},{e["train_s"]},,{e["test_accuracy"]},{e["test_loss"]},{sys.argv[4]}')
EOF
    d="$WORK/torch-$p-$rep"
    mkdir -p "$d"
    echo "PyTorch, $p rank(s), round $rep/$REPS" >&2
    core=()
    [ -n "$TORCH_OPENBLAS_CORETYPE" ] && core=(-x "OPENBLAS_CORETYPE=$TORCH_OPENBLAS_CORETYPE")
    HDDP_TORCH_PORT=$((29700 + RANDOM % 200)) timeout 1800 mpiexec -n "$p" --bind-to core -x OMP_NUM_THREADS \
      -x HDDP_TORCH_PORT "${core[@]}" /usr/bin/time -f 'RSS_KB %M' "$PY" "$HDDP_ROOT/bench/mnist/mnist_pytorch.py" \
      "$DATA" "$EPOCHS" "$BATCH" "$WIDTH" >"$d/log" 2>&1 || { tail -5 "$d/log" >&2; exit 1; }
    rss=$(awk '/^RSS_KB/ { if ($2 > m) m = $2 } END { printf "%.1f", m / 1024 }' "$d/log")
    "$PY" - "$d/log" "$p" "$rep" "$rss" >>"$CSV" <<'EOF'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        e = json.loads(l)
        print(f'pytorch,{sys.argv[2]},{sys.argv[3]},{e["epoch"]},{e["train_s"]},,{e["test_accuracy"]},{e["test_loss"]},{sys.argv[4]}')
EOF
  done
done

"$PY" "$HDDP_ROOT/bench/mnist/mnist_table.py" "$CSV" "$CPU_MODEL ($CPU_FM)" "$note" "$EPOCHS" "$BATCH" "$WIDTH" "$REPS" >"$MD"
cat "$MD"
echo "raw: $CSV"
