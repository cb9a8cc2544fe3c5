#!/usr/bin/env bash
# The training step over network links: mnist_train (hddp) and PyTorch DDP over gloo, 2 ranks on
# nodes of their own joined by a shaped link (bench/link/shaped_link.sh), at each rate of RATES,
# beside the step's compute alone (1 rank, no communication) and its communication alone (the
# same bytes through bench_allreduce over the same link). REPS interleaved rounds; the table
# takes medians over them.
#
#   bash bench/link/link_table.sh [OUTDIR]      (default bench/results/<cpu>/link/)
#   env: RATES="none 25gbit 10gbit 3gbit 1gbit", MODELS="cnn mlp", REPS=3
#
# Models (mnist_train's), one epoch each:
#   cnn  --model cnn, batch 64 per rank, 12,800 images (100 steps per rank), 1.69 MB of gradients
#   mlp  --hidden 1024,1024, batch 256 per rank, 25,600 images (50 steps per rank), 7.45 MB
# Variants per link: hddp with its defaults, --reduce-mode blocking, --reduce-mode thread,
# --bucket-mb 25 (PyTorch's cap), --bucket-mb auto, --grad-dtype bf16; PyTorch DDP with
# bucket_cap_mb 1, 4 and 25 (its default) and its fp16 compression hook (25; gloo has no bf16
# allreduce). Compute alone: each on one rank over half the images (the same steps). Exposed
# communication = step - compute alone.
#
# Needs root (network namespaces). Installs what is missing and builds first. Writes
# OUTDIR/link_steps.csv (rate, model, rep, impl, variant, train_s, steps, note) and
# OUTDIR/link_steps.md (bench/link/link_table.py), and prints the table.
source "$(dirname "$0")/../../scripts/common.sh"
HDDP_TARGETS="mnist_train bench_allreduce" hddp_build build bench tests
PY=/usr/bin/python3
BIN="$BUILD_DIR/drivers/mnist_train"
RATES="${RATES:-none 25gbit 10gbit 3gbit 1gbit}" MODELS="${MODELS:-cnn mlp}" REPS="${REPS:-3}"
DATA=/usr/share/datasets/fashion-mnist
LINK=(bash "$HDDP_ROOT/bench/link/shaped_link.sh")
hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG/link}"
mkdir -p "$OUT"
CSV="$OUT/link_steps.csv" MD="$OUT/link_steps.md"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# PyTorch's OpenBLAS on its fastest correct kernel for this CPU (as bench/mnist_vs_pytorch.sh).
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
core_json="$("$PY" "$HDDP_ROOT/bench/step/openblas_core.py" 256 1024 784)"
TORCH_CORE="$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["best"])' "$core_json")"

model_args() {  # model_args MODEL: sets MARGS (mnist_train's model options), IMAGES, BATCH, WIDTH, BYTES
  if [ "$1" = cnn ]; then
    MARGS=(--model cnn --batch-size 64) IMAGES=12800 BATCH=64 WIDTH=0 BYTES=1686568
  else
    MARGS=(--hidden 1024,1024 --batch-size 256) IMAGES=25600 BATCH=256 WIDTH=1024 BYTES=7451176
  fi
}

# row RATE MODEL REP IMPL VARIANT TRAIN_S STEPS NOTE
row() { echo "$1,$2,$3,$4,$5,$6,$7,$8" >>"$CSV"; }

# hddp RATE MODEL REP VARIANT [ARGS...]: one epoch of mnist_train over the link (RATE solo: one
# rank, half the images, no link).
hddp() {
  local rate=$1 model=$2 rep=$3 variant=$4 d
  shift 4
  d="$WORK/h-$rate-$model-$variant-$rep"
  mkdir -p "$d"
  model_args "$model"
  if [ "$rate" = solo ]; then
    OMP_NUM_THREADS=1 timeout 600 taskset -c 0 "$BIN" "${MARGS[@]}" --limit-train $((IMAGES / 2)) --limit-test 1000 --epochs 1 \
      --seed "$rep" --out "$d" --no-plot --stats-json "$d/s.json" "$@" >"$d/log" 2>&1
  else
    local r=(--rate "$rate"); [ "$rate" = none ] && r=()
    OMP_NUM_THREADS=1 timeout 600 "${LINK[@]}" "${r[@]}" -- "$BIN" "${MARGS[@]}" --limit-train "$IMAGES" --limit-test 1000 \
      --epochs 1 --seed "$rep" --out "$d" --no-plot --stats-json "$d/s.json" "$@" >"$d/log" 2>&1
  fi || { echo "hddp $rate $model $variant failed:" >&2; tail -5 "$d/log" >&2; exit 1; }
  "$PY" - "$d/s.json" "$rate" "$model" "$rep" "$variant" >>"$CSV" <<'EOF'
import json, sys
note = ""
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["type"] == "bucket_autosize":
        note = f"auto cap {e['cap_bytes']} B first {e['first_cap_bytes']} B {e['buckets']} buckets"
    if e["type"] == "summary":
        print(f"{sys.argv[2]},{sys.argv[3]},{sys.argv[4]},hddp,{sys.argv[5]},{e['train_s']},{e['steps']},{note}")
EOF
}

# torch RATE MODEL REP VARIANT [ENV=VALUE...]: one epoch of bench/mnist/mnist_pytorch.py.
torch() {
  local rate=$1 model=$2 rep=$3 variant=$4 d ranks=2
  shift 4
  d="$WORK/t-$rate-$model-$variant-$rep"
  mkdir -p "$d"
  model_args "$model"
  local images=$IMAGES
  [ "$rate" = solo ] && { ranks=1; images=$((IMAGES / 2)); }
  local envs=(-x OMP_NUM_THREADS=1 -x "HDDP_TORCH_LIMIT_TRAIN=$images" -x "HDDP_TORCH_PORT=$((29700 + RANDOM % 200))")
  [ -n "$TORCH_CORE" ] && envs+=(-x "OPENBLAS_CORETYPE=$TORCH_CORE")
  local e
  for e in "$@"; do envs+=(-x "$e"); done
  local kind=mlp; [ "$model" = cnn ] && kind=cnn
  local cmd=("$PY" "$HDDP_ROOT/bench/mnist/mnist_pytorch.py" "$DATA" 1 "$BATCH" "$WIDTH" "$kind" "$rep")
  if [ "$rate" = solo ]; then
    timeout 600 mpiexec -n 1 --bind-to core "${envs[@]}" "${cmd[@]}" >"$d/log" 2>&1
  else
    local r=(--rate "$rate"); [ "$rate" = none ] && r=()
    local m=()
    for e in "${envs[@]}" -x MASTER_ADDR=10.99.0.1 -x GLOO_SOCKET_IFNAME=data; do m+=(--mpiexec-arg "$e"); done
    timeout 600 "${LINK[@]}" "${r[@]}" "${m[@]}" -- "${cmd[@]}" >"$d/log" 2>&1
  fi || { echo "torch $rate $model $variant failed:" >&2; tail -5 "$d/log" >&2; exit 1; }
  local steps=$(( (images / ranks + BATCH - 1) / BATCH ))
  "$PY" - "$d/log" "$rate" "$model" "$rep" "$variant" "$steps" >>"$CSV" <<'EOF'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        e = json.loads(l)
        print(f"{sys.argv[2]},{sys.argv[3]},{sys.argv[4]},pytorch,{sys.argv[5]},{e['train_s']},{sys.argv[6]},")
EOF
}

# comm RATE MODEL REP: the step's gradient bytes alone over the link, bench_allreduce's median
# of MPI_Allreduce and of the reducer's MPI_Iallreduce (rabenseifner), the faster, times the steps.
comm() {
  local rate=$1 model=$2 rep=$3 d
  d="$WORK/c-$rate-$model-$rep"
  mkdir -p "$d"
  model_args "$model"
  local r=(--rate "$rate"); [ "$rate" = none ] && r=()
  OMP_NUM_THREADS=1 timeout 600 "${LINK[@]}" "${r[@]}" -- "$BUILD_DIR/bench/bench_allreduce" --bytes="$BYTES" \
    --benchmark_filter="^allreduce/(blocking/${BYTES}B|iallreduce_wait/${BYTES}B/nbc:rabenseifner)/" \
    --benchmark_format=json --benchmark_out="$d/b.json" >"$d/log" 2>&1 || { echo "comm $rate $model failed:" >&2; tail -5 "$d/log" >&2; exit 1; }
  local steps=$(( IMAGES / 2 / BATCH ))
  "$PY" - "$d/b.json" "$rate" "$model" "$rep" "$steps" >>"$CSV" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1]))["benchmarks"]
t = {("blocking" if "/blocking/" in x["name"] else "iallreduce"): x["median_us"] * 1e-6 for x in b}
best = min(t, key=t.get)
steps = int(sys.argv[5])
print(f"{sys.argv[2]},{sys.argv[3]},{sys.argv[4]},comm,allreduce,{t[best] * steps},{steps},{best}: "
      f"blocking {t['blocking'] * 1e3:.3f} ms iallreduce rabenseifner {t['iallreduce'] * 1e3:.3f} ms per step")
EOF
}

echo "rate,model,rep,impl,variant,train_s,steps,note" >"$CSV"
for rep in $(seq "$REPS"); do
  for model in $MODELS; do
    echo "round $rep/$REPS: $model, compute alone" >&2
    hddp solo "$model" "$rep" default
    torch solo "$model" "$rep" default
  done
  for rate in $RATES; do
    for model in $MODELS; do
      echo "round $rep/$REPS: $model over $rate" >&2
      comm "$rate" "$model" "$rep"
      hddp "$rate" "$model" "$rep" default
      hddp "$rate" "$model" "$rep" blocking --reduce-mode blocking
      hddp "$rate" "$model" "$rep" thread --reduce-mode thread
      hddp "$rate" "$model" "$rep" cap25 --bucket-mb 25
      hddp "$rate" "$model" "$rep" auto --bucket-mb auto
      hddp "$rate" "$model" "$rep" bf16 --grad-dtype bf16
      torch "$rate" "$model" "$rep" cap1 HDDP_TORCH_BUCKET_MB=1
      torch "$rate" "$model" "$rep" cap4 HDDP_TORCH_BUCKET_MB=4
      torch "$rate" "$model" "$rep" cap25 HDDP_TORCH_BUCKET_MB=25
      torch "$rate" "$model" "$rep" fp16 HDDP_TORCH_BUCKET_MB=25 HDDP_TORCH_COMM_HOOK=fp16
    done
  done
done

"$PY" "$HDDP_ROOT/bench/link/link_table.py" "$CSV" "$CPU_MODEL ($CPU_FM)" "PyTorch's OpenBLAS kernel: ${TORCH_CORE:-as detected} (probe: $core_json)" >"$MD"
cat "$MD"
echo "raw: $CSV"
