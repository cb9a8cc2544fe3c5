#!/usr/bin/env bash
# The Fashion-MNIST classifier, hddp's mnist_train against PyTorch DDP (bench/mnist/mnist_pytorch.py)
# side by side in one run: the same data, MLP 784-W-W-10 (ReLU), softmax cross-entropy, Adam
# 1e-3, batch B per rank, a shuffle sharded over the ranks each epoch; 1 and 2 ranks x 1 thread,
# ranks bound to cores; REPS interleaved rounds (hddp, PyTorch, hddp, ...), median reported.
# Round r (1..REPS) seeds both with r: the weights and the shuffle (mnist_train --seed r,
# mnist_pytorch.py's 6th argument: torch.manual_seed and DistributedSampler's seed).
# Seconds per epoch (the step loop), time to 87 % test accuracy (training seconds summed up to
# the epoch that first reaches it), accuracy after EPOCHS, peak RSS per rank, and the whole
# run's wall-clock seconds (run_s: the mpiexec command from start to end, so start-up, data
# loading and each epoch's evaluation included; the same value on every epoch row of that run).
#
#   bash bench/mnist_vs_pytorch.sh [OUTDIR]     (default bench/results/<cpu>/)
#   env: EPOCHS=10, RANKS="1 2", BATCH=64, WIDTH=256, REPS=1, DATA=/usr/share/datasets/fashion-mnist
#   MODEL=cnn: mnist_train --model cnn against the same CNN in PyTorch (oneDNN convolutions), at
#   the layouts LAYOUTS="1x1 2x1 1x2" (ranks x threads, placed by scripts/placement.sh); writes
#   mnist_cnn_vs_pytorch.{csv,md} (bench/mnist/cnn_table.py: times the median over the rounds,
#   accuracy the mean over them, i.e. over seeds 1..REPS); LAYOUTS_CNN overrides the layouts.
#   PRECISION=bf16: mnist_train --precision bf16 against PyTorch under torch.autocast(bf16);
#   files named ..._bf16.{csv,md}.
#
# Installs what is missing (PyTorch, the data set) and builds first; PyTorch's OpenBLAS runs the
# fastest correct kernel for this CPU (bench/step/openblas_core.py; TORCH_OPENBLAS_CORETYPE
# overrides). Writes OUTDIR/mnist_vs_pytorch.csv (every epoch of every run; columns impl, ranks,
# threads, rep, epoch, train_s, elapsed_train_s, test_accuracy, test_loss, rss_mib, run_s) and
# OUTDIR/mnist_vs_pytorch.md (the table and goals, bench/mnist/mnist_table.py), and prints it.
source "$(dirname "$0")/../scripts/common.sh"
HDDP_TARGETS=mnist_train hddp_build build bench time
PY=/usr/bin/python3
BIN="$BUILD_DIR/drivers/mnist_train"
EPOCHS="${EPOCHS:-10}" RANKS="${RANKS:-1 2}" BATCH="${BATCH:-64}" WIDTH="${WIDTH:-256}" REPS="${REPS:-1}"
DATA="${DATA:-/usr/share/datasets/fashion-mnist}" MODEL="${MODEL:-mlp}"
LAYOUTS="${LAYOUTS:-$(for p in $RANKS; do printf '%sx1 ' "$p"; done)}"
[ "$MODEL" = cnn ] && LAYOUTS="${LAYOUTS_CNN:-1x1 2x1 1x2}"
source "$HDDP_ROOT/scripts/placement.sh"

hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG}"
mkdir -p "$OUT"
name=mnist_vs_pytorch
[ "$MODEL" = cnn ] && name=mnist_cnn_vs_pytorch
PRECISION="${PRECISION:-float}"
case "$PRECISION" in float) ;; bf16) name="${name}_bf16" ;; *) echo "PRECISION=$PRECISION: expected float or bf16" >&2; exit 2 ;; esac
CSV="$OUT/$name.csv" MD="$OUT/$name.md"
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

echo "impl,ranks,threads,rep,epoch,train_s,elapsed_train_s,test_accuracy,test_loss,rss_mib,run_s" >"$CSV"
# since T0: the seconds from T0 (date +%s.%N) to now, to the millisecond.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }
for rep in $(seq "$REPS"); do
  for layout in $LAYOUTS; do
    p=${layout%x*} t=${layout#*x}
    hddp_launch_local "$p" "$t" || exit 2
    launch=("${HDDP_LAUNCH[@]}")
    d="$WORK/hddp-$layout-$rep"
    mkdir -p "$d"
    echo "hddp, $p rank(s) x $t thread(s), round $rep/$REPS" >&2
    t0=$(date +%s.%N)
    timeout 3600 "${launch[@]}" /usr/bin/time -f 'RSS_KB %M' "$BIN" --model "$MODEL" --seed "$rep" --precision "$PRECISION" \
      --data "$DATA" --epochs "$EPOCHS" --batch-size "$BATCH" --hidden "$WIDTH,$WIDTH" --out "$d" --no-plot \
      --stats-json "$d/stats.json" >"$d/log" 2>&1 || { tail -5 "$d/log" >&2; exit 1; }
    run_s=$(since "$t0")
    rss=$(awk '/^RSS_KB/ { if ($2 > m) m = $2 } END { printf "%.1f", m / 1024 }' "$d/log")
    "$PY" - "$d/stats.json" "$p" "$t" "$rep" "$rss" "$run_s" >>"$CSV" <<'EOF'
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["type"] == "epoch":
        print(f'hddp,{sys.argv[2]},{sys.argv[3]},{sys.argv[4]},{e["epoch"]},{e["train_s"]},,{e["test_accuracy"]},{e["test_loss"]},{sys.argv[5]},{sys.argv[6]}')
EOF
    d="$WORK/torch-$layout-$rep"
    mkdir -p "$d"
    echo "PyTorch, $p rank(s) x $t thread(s), round $rep/$REPS" >&2
    core=()
    [ -n "$TORCH_OPENBLAS_CORETYPE" ] && core=(-x "OPENBLAS_CORETYPE=$TORCH_OPENBLAS_CORETYPE")
    t0=$(date +%s.%N)
    HDDP_TORCH_PORT=$((29700 + RANDOM % 200)) timeout 3600 "${launch[@]}" -x HDDP_TORCH_PORT "${core[@]}" \
      -x HDDP_TORCH_AUTOCAST="$([ "$PRECISION" = bf16 ] && echo bf16)" \
      /usr/bin/time -f 'RSS_KB %M' "$PY" "$HDDP_ROOT/bench/mnist/mnist_pytorch.py" \
      "$DATA" "$EPOCHS" "$BATCH" "$WIDTH" "$MODEL" "$rep" >"$d/log" 2>&1 || { tail -5 "$d/log" >&2; exit 1; }
    run_s=$(since "$t0")
    rss=$(awk '/^RSS_KB/ { if ($2 > m) m = $2 } END { printf "%.1f", m / 1024 }' "$d/log")
    "$PY" - "$d/log" "$p" "$t" "$rep" "$rss" "$run_s" >>"$CSV" <<'EOF'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        e = json.loads(l)
        print(f'pytorch,{sys.argv[2]},{sys.argv[3]},{sys.argv[4]},{e["epoch"]},{e["train_s"]},,{e["test_accuracy"]},{e["test_loss"]},{sys.argv[5]},{sys.argv[6]}')
EOF
  done
done

[ "$PRECISION" = bf16 ] && note="hddp --precision bf16 (gemm_bf16 set: $(grep -ho '"bf16_kernel":"[a-z0-9-]*"' "$WORK"/hddp-*/stats.json | sort -u | tr '\n' ' ')) against PyTorch under torch.autocast(bf16); $note"
if [ "$MODEL" = cnn ]; then
  goal=2.5  # bf16 against PyTorch's autocast: 2 with AMX, 1.5 with AVX512_BF16 alone
  [ "$PRECISION" = bf16 ] && { grep -qw amx_bf16 /proc/cpuinfo && goal=2 || goal=1.5; }
  "$PY" "$HDDP_ROOT/bench/mnist/cnn_table.py" "$CSV" "$CPU_MODEL ($CPU_FM)" "$note" "$EPOCHS" "$BATCH" "$REPS" "$goal" >"$MD"
  cat "$MD"
  echo "raw: $CSV"
  exit 0
fi
"$PY" "$HDDP_ROOT/bench/mnist/mnist_table.py" "$CSV" "$CPU_MODEL ($CPU_FM)" "$note" "$EPOCHS" "$BATCH" "$WIDTH" "$REPS" >"$MD"
cat "$MD"
echo "raw: $CSV"
