#!/usr/bin/env bash
# One Conv2d, hddp against PyTorch (oneDNN), side by side in one run: bench_layers' conv/ rows
# (the direct convolution Conv2d runs in float, and im2col over hddp's GEMM and over OpenBLAS) and
# bench/layers/conv_pytorch.py, at the CNN's two shapes (batch 64, 3x3, pad 1: c1 1x28x28 -> 32,
# backward dW and db; c2 32x14x14 -> 64, backward dW, db and dX), forward and forward+backward,
# per thread count; REPS interleaved rounds (bench_layers, PyTorch, bench_layers, ...), median
# reported. GFLOP/s count the products a pass runs, as bench_layers counts them.
#
#   bash bench/conv_vs_pytorch.sh [OUTDIR]     (default bench/results/<cpu>/)
#   env: THREADS="1 2", REPS=5, MIN_TIME=0.5 (seconds per measurement), HDDP_BUILD_DIR,
#        HDDP_NO_BUILD=1 (the built tree as it is: no configure, no build)
#
# Installs what is missing and builds first. Writes OUTDIR/conv_vs_pytorch.csv (every
# measurement) and OUTDIR/conv_vs_pytorch.md (the table, bench/layers/conv_table.py), and prints it.
source "$(dirname "$0")/../scripts/common.sh"
[ "${HDDP_NO_BUILD:-0}" = 1 ] || HDDP_TARGETS=bench_layers hddp_build build bench
PY=/usr/bin/python3  # Debian's python3-torch lives there, whatever python3 is first on PATH
BIN="$BUILD_DIR/bench/bench_layers"
[ -x "$BIN" ] || { echo "no $BIN: build first" >&2; exit 2; }
THREADS="${THREADS:-1 2}" REPS="${REPS:-5}" MIN_TIME="${MIN_TIME:-0.5}"

hddp_cpu_info
OUT="${1:-$HDDP_ROOT/bench/results/$CPU_SLUG}"
mkdir -p "$OUT"
CSV="$OUT/conv_vs_pytorch.csv" MD="$OUT/conv_vs_pytorch.md"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE  # each library's own CPU detection

to_csv() {  # FILE THREADS ROUND: bench_layers' JSON or conv_pytorch.py's JSON lines, as CSV rows
  "$PY" - "$@" "$CPU_MODEL ($CPU_FM)" >>"$CSV" <<'PY'
import csv, json, sys
f, t, r, cpu = sys.argv[1:]
try:
    bs = json.load(open(f))["benchmarks"]
except ValueError:
    bs = [json.loads(l) for l in open(f) if l.startswith("{")]
for b in bs:
    _, row, pas, impl = b["name"].split("/")[:4]  # bench_layers appends /real_time
    s = b["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[b["time_unit"]]
    csv.writer(sys.stdout).writerow([cpu, t, r, row, pas, impl, s, b["GFLOPS"]])
PY
}

echo "cpu,threads,round,row,pass,impl,seconds,gflops" >"$CSV"
load0="$(cut -d' ' -f1 /proc/loadavg)"  # a busy machine shows here: the 2-thread rows suffer most
for rep in $(seq "$REPS"); do
  for t in $THREADS; do
    echo "$t thread(s), round $rep/$REPS" >&2
    # The float rows only (bench_layers' conv/<row>/<pass>/hddp-bf16 rows are the bf16 study's).
    OMP_NUM_THREADS=$t timeout 600 "$BIN" --benchmark_filter='^conv/[^/]+/[^/]+/(hddp|im2col|openblas)(/|$)' --benchmark_min_time="$MIN_TIME" \
      --benchmark_format=json >"$WORK/layers.json" 2>"$WORK/err" || { tail -5 "$WORK/err" >&2; exit 1; }
    to_csv "$WORK/layers.json" "$t" "$rep"
    OMP_NUM_THREADS=$t timeout 600 "$PY" "$HDDP_ROOT/bench/layers/conv_pytorch.py" 1 "$MIN_TIME" \
      >"$WORK/torch.json" 2>"$WORK/err" || { tail -5 "$WORK/err" >&2; exit 1; }
    to_csv "$WORK/torch.json" "$t" "$rep"
  done
done

"$PY" "$HDDP_ROOT/bench/layers/conv_table.py" "$CSV" \
  "THREADS=\"$THREADS\" REPS=$REPS MIN_TIME=$MIN_TIME bash bench/conv_vs_pytorch.sh" >"$MD"
printf '\nLoad average (1 min): %s at the start, %s at the end, %s cores.\n' "$load0" "$(cut -d' ' -f1 /proc/loadavg)" "$(nproc)" >>"$MD"
cat "$MD"
echo "raw: $CSV"
