#!/usr/bin/env bash
# hddp (once per micro-kernel this CPU runs) vs OpenBLAS GEMM, side by side in one run per
# thread count (repetitions interleaved at random, medians), under the bench lock; prints the
# CPU and the markdown table kept in bench/RESULTS.md (bench/gemm_table.py).
# Usage: bench/gemm_table.sh [THREADS...]   (default: 1 2; env HDDP_BUILD_DIR, REPS=5,
#        GEMM_FILTER: a bench_gemm regex instead of the table's shapes, OUT_DIR for the JSON,
#        HDDP_BENCH_LOCK: the lock file other benchmarks share, empty for none)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${HDDP_BUILD_DIR:-$ROOT/build}/bench/bench_gemm"
OUT="${OUT_DIR:-${HDDP_BUILD_DIR:-$ROOT/build}/bench-gemm}"
REPS="${REPS:-5}"
[ -x "$BIN" ] || { echo "no $BIN: build first (bash scripts/test.sh)" >&2; exit 1; }
FILTER="${GEMM_FILTER:-}"
[ -n "$FILTER" ] || FILTER='/(hddp-[a-z0-9]*|openblas)/(s/(NN|NT|TN)/(32x20x1|32x1x20|32x20x20)/|s/NN/(64x64x64|128x128x128|256x256x256|512x512x512|1024x1024x1024|2048x2048x2048|4096x1024x1024)/|s/(NN|NT|TN)/256x4096x4096/|d/NN/(1024x1024x1024|2048x2048x2048)/)'
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(1 2)
LOCK="${HDDP_BENCH_LOCK-/tmp/hddp-bench.lock}"
lock=()
[ -z "$LOCK" ] || lock=(flock "$LOCK")
mkdir -p "$OUT"
files=()
for t in "${threads[@]}"; do
  echo "$(date +%T) $t thread(s) (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  OMP_NUM_THREADS=$t "${lock[@]}" "$BIN" --benchmark_filter="$FILTER" \
    --benchmark_repetitions="$REPS" --benchmark_enable_random_interleaving=true \
    --benchmark_out="$OUT/t$t.json" --benchmark_out_format=json --benchmark_color=false >"$OUT/t$t.txt" 2>&1 \
    || { echo "bench_gemm failed: $(tail -3 "$OUT/t$t.txt")" >&2; exit 1; }
  grep -q '"run_name"' "$OUT/t$t.json" \
    || { echo "gemm_table: no benchmark matched GEMM_FILTER='$FILTER' (list them: $BIN --benchmark_list_tests)" >&2; exit 1; }
  files+=("$OUT/t$t.json")
done
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; AVX-512F: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
python3 "$ROOT/bench/gemm_table.py" "${files[@]}"
