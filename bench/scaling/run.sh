#!/usr/bin/env bash
# Thread and rank scaling of hddp on this node, over the programs that already measure each
# workload (bench_gemm, bench_elementwise, bench_layers, the drivers' --stats-json):
#   threads   one rank at T = 1, 2, 4, ... threads up to the node's cores (and the count itself):
#             sgemm 1024^3 and the MLP step's thin shape (256 x 4096 x 4096, NT), Adam and tanh
#             over 16 Mi floats (memory-bound), the wide MLP's step (bench_layers), the
#             Fashion-MNIST step and the tutorial's step (the drivers);
#   layouts   ranks x threads = the node's cores (1x2 and 2x1 here; 1x16, 2x8, 4x4, 16x1 on a
#             16-core node): the wide MLP's step and the Fashion-MNIST step for one global batch
#             split over the ranks (256 and 64 samples), the tutorial's step (32 per rank).
# Placement is scripts/placement.sh's (slurm/run.sbatch's rule): threads one per core with
# OMP_PLACES=cores OMP_PROC_BIND=close, each rank on its own cores; every row names it.
#
#   bash bench/scaling/run.sh [OUT]     (default bench/results/<cpu>/scaling)
#   env HDDP_BUILD_DIR (build), CORES (this node's cores: nproc), THREADS ("1 2 4 ... CORES"),
#       LAYOUTS ("PxT ..." with P x T = CORES), REPS (5: runs of each driver measurement),
#       MIN_TIME (0.5 s per Google Benchmark repetition), QUICK=1 (a smoke run: the test's)
# Writes OUT/raw/ (every program's own JSON and a command line each), OUT/scaling.csv
# (bench/scaling/collect.py: speed-up and efficiency against 1 rank x 1 thread), OUT/scaling.md
# (its table) and
# OUT/scaling.pdf (bench/scaling/plots.gp). On a cluster: sbatch slurm/scaling.sbatch.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
source "$ROOT/scripts/common.sh"
source "$ROOT/scripts/placement.sh"
hddp_cpu_info
BIN="${HDDP_BUILD_DIR:-$ROOT/build}"
OUT="$(realpath -m "${1:-$ROOT/bench/results/$CPU_SLUG/scaling}")"
CORES="${CORES:-$(nproc)}"
if [ -z "${THREADS:-}" ]; then
  THREADS="" t=1
  while [ "$t" -lt "$CORES" ]; do THREADS+="$t "; t=$((2 * t)); done
  THREADS+="$CORES"
fi
if [ -z "${LAYOUTS:-}" ]; then
  LAYOUTS="" p=1
  while [ "$p" -le "$CORES" ]; do [ $((CORES % p)) -eq 0 ] && LAYOUTS+="${p}x$((CORES / p)) "; p=$((2 * p)); done
  [ $((CORES & (CORES - 1))) -eq 0 ] || LAYOUTS+="${CORES}x1"
fi
REPS="${REPS:-5}" MIN_TIME="${MIN_TIME:-0.5}" EPOCHS=400 LIMIT=12800
DATA="$(mktemp -d)"  # the Fashion-MNIST subset the mnist step trains on, removed at the end
trap 'rm -rf "$DATA"' EXIT
if [ "${QUICK:-0}" = 1 ]; then REPS=1 MIN_TIME=0.05 EPOCHS=40 LIMIT=640; fi
for p in bench/bench_gemm bench/bench_elementwise bench/bench_layers drivers/poly_train drivers/mnist_train; do
  [ -x "$BIN/$p" ] || { echo "scaling: no $BIN/$p: build first (bash scripts/test.sh, or cmake --build build)" >&2; exit 2; }
done
rm -rf "$OUT/raw" && mkdir -p "$OUT/raw"
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The Fashion-MNIST images this study trains on, written once (uncompressed): no rank of any run
# decompresses the whole set.
if [ ! -s "$DATA/train-images-idx3-ubyte" ]; then
  mkdir -p "$DATA"
  python3 "$ROOT/scripts/fmnist_subset.py" /usr/share/datasets/fashion-mnist "$DATA" 12800 1000
fi

# place P T: the placement of P ranks of T threads (HDDP_PLACE for mpiexec, OMP_* exported).
place() { hddp_place "$1" "$2" "$CORES" 0 >/dev/null && echo "$HDDP_PLACE_WHY" >"$OUT/raw/placement-$1x$2.txt"; }
# note NAME COMMAND...: runs it (OMP_* as exported), its command line kept beside its output.
note() {
  local name=$1; shift
  echo "OMP_NUM_THREADS=${OMP_NUM_THREADS:-} OMP_PLACES=${OMP_PLACES:-} OMP_PROC_BIND=${OMP_PROC_BIND:-} $*" >"$OUT/raw/$name.cmd"
  "$@"
}

for t in $THREADS; do
  place 1 "$t"
  export OMP_NUM_THREADS=$t
  echo "scaling: 1 rank x $t thread(s) ($HDDP_PLACE_WHY)" >&2
  gb=(--benchmark_repetitions="$REPS" --benchmark_min_time="$MIN_TIME" --benchmark_report_aggregates_only=true
      --benchmark_format=json)
  # OpenBLAS is not timed here, but the variables that tune it stay out of every benchmark.
  note gemm-1x$t env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BIN/bench/bench_gemm" \
    --benchmark_filter='^gemm/hddp/s/(NN/1024x1024x1024|NT/256x4096x4096)/' "${gb[@]}" >"$OUT/raw/gemm-1x$t.json"
  note elementwise-1x$t "$BIN/bench/bench_elementwise" --benchmark_filter='^(adam|tanh)/threaded/16777216$' \
    "${gb[@]}" >"$OUT/raw/elementwise-1x$t.json"
  note layers-1x$t "$BIN/bench/bench_layers" --benchmark_filter='^step/wide/hddp/' "${gb[@]}" >"$OUT/raw/layers-1x$t.json"
done

# The drivers at every layout (1 x T above counts as one), REPS runs each: --stats-json's step time.
for layout in $(for t in $THREADS; do echo "1x$t"; done) $LAYOUTS; do
  p=${layout%x*} t=${layout#*x}
  [ -e "$OUT/raw/mlp-$layout-1.jsonl" ] && continue  # 1 x CORES is in both lists
  place "$p" "$t"
  export OMP_NUM_THREADS=$t
  # --oversubscribe: a job of one task (sbatch -n 1 -c 16) gives Open MPI one slot; the binding
  # below, not the slot count, keeps the ranks apart.
  launch=(mpiexec -n "$p" --oversubscribe "${HDDP_PLACE[@]}" -x OMP_NUM_THREADS -x OMP_PLACES -x OMP_PROC_BIND)
  [ "${HDDP_PLACE[1]:-}" = none ] && launch=(mpiexec -n "$p" --oversubscribe --bind-to none -x OMP_NUM_THREADS)
  echo "scaling: $p rank(s) x $t thread(s) ($HDDP_PLACE_WHY)" >&2
  for r in $(seq 1 "$REPS"); do
    note "mlp-$layout-$r" "${launch[@]}" "$BIN/drivers/poly_train" --hidden 1024,1024,1024 --sampling sharded \
      --batch-size $((256 / p)) --epochs "$EPOCHS" --log-every "$EPOCHS" --no-plot --out "$OUT/raw" \
      --stats-json "$OUT/raw/mlp-$layout-$r.jsonl" >/dev/null
    note "tutorial-$layout-$r" "${launch[@]}" "$BIN/drivers/poly_train" --epochs $((10 * EPOCHS)) --log-every 100000 \
      --no-plot --out "$OUT/raw" --stats-json "$OUT/raw/tutorial-$layout-$r.jsonl" >/dev/null
    note "mnist-$layout-$r" "${launch[@]}" "$BIN/drivers/mnist_train" --data "$DATA" --limit-train "$LIMIT" \
      --limit-test 100 --epochs 1 --batch-size $((64 / p)) --no-plot --out "$OUT/raw" \
      --stats-json "$OUT/raw/mnist-$layout-$r.jsonl" >/dev/null
  done
done
rm -f "$OUT/raw/"{eval.csv,loss.csv,metrics.csv,confusion.csv}

python3 "$ROOT/bench/scaling/collect.py" "$OUT/raw" "$CPU_MODEL" "$CPU_FM" >"$OUT/scaling.csv"
python3 "$ROOT/bench/scaling/collect.py" --md "$OUT/scaling.csv" >"$OUT/scaling.md"
if command -v gnuplot >/dev/null; then
  gnuplot -e "csv='$OUT/scaling.csv'; out='$OUT/scaling.pdf'; cpu='$CPU_MODEL ($CPU_FM)'" "$ROOT/bench/scaling/plots.gp"
fi
echo "scaling: wrote $OUT/scaling.csv$(command -v gnuplot >/dev/null && echo " and $OUT/scaling.pdf")"
