#!/usr/bin/env bash
# hddp's GEMM against the best BLAS on this CPU, side by side, per thread count (repetitions
# interleaved at random, medians), under the bench lock; prints the markdown table kept in
# bench/results/gemm.md (bench/gemm_table.py) and keeps the raw JSON.
#
# Each anchor at its best: one bench_gemm run with OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE and
# BLIS_ARCH_TYPE unset (the libraries' own detection; for this command alone, whatever the
# machine sets), and where the CPU has AVX-512F a second run with OpenBLAS forced to its AVX-512
# kernels (OPENBLAS_CORETYPE=SkylakeX) and BLIS to its skx configuration. hddp runs in both,
# so every ratio is taken within one process. Anchors that compute wrong results here are
# reported as such and left out of the ratio.
# Repetitions are short (MIN_TIME seconds each, default 0.1) and many (REPS, default 11), all
# backends and the FMA probe (peak/<s|d>) interleaved at random: on a machine whose speed
# drifts (a VM) the medians of one process still compare.
# Usage: bench/gemm_table.sh [THREADS...]   (default: 1 2; env HDDP_BUILD_DIR, REPS=11, MIN_TIME,
#        GEMM_FILTER: a bench_gemm regex instead of the table's shapes, or "cnn" for a CNN's
#        products (bench_gemm's conv* and fc1_* rows; bench/results/gemm.md, "GEMM on
#        the convolution's shapes"), OUT_DIR for the JSON,
#        HDDP_BENCH_LOCK: the lock file other benchmarks share, empty for none)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/scripts/common.sh"
BIN="${HDDP_BUILD_DIR:-$ROOT/build}/bench/bench_gemm"
OUT="${OUT_DIR:-${HDDP_BUILD_DIR:-$ROOT/build}/bench-gemm}"
REPS="${REPS:-11}"
MIN_TIME="${MIN_TIME:-0.1}"
[ -x "$BIN" ] || { echo "no $BIN: build first (bash scripts/test.sh)" >&2; exit 1; }
FILTER="${GEMM_FILTER:-}"
[ "$FILTER" != cnn ] || FILTER='^peak/|/(hddp[-a-z0-9]*|openblas|blis)/s/(NN|NT|TN)/[0-9x]+/(conv|fc)[0-9]+_[a-z]+/'
[ -n "$FILTER" ] || FILTER='^peak/|/(hddp[-a-z0-9]*|openblas|blis)/(s/(NN|NT|TN)/(32x20x1|32x1x20|32x20x20|256x1024x1024|256x4096x4096|1024x1024x1024)/|s/NN/(64x64x64|256x256x256|2048x2048x2048)/|d/NN/(1024x1024x1024|2048x2048x2048)/)'
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(1 2)
for t in "${threads[@]}"; do
  [[ "$t" =~ ^[1-9][0-9]*$ ]] || { echo "gemm_table: thread count '$t' is not a positive integer" >&2; exit 2; }
done
LOCK="${HDDP_BENCH_LOCK-/tmp/hddp-bench.lock}"
lock=()
[ -z "$LOCK" ] || lock=(flock "$LOCK")
mkdir -p "$OUT"
runs=(detected)
grep -qw avx512f /proc/cpuinfo && runs+=(avx512)
files=()
for t in "${threads[@]}"; do
  for r in "${runs[@]}"; do
    envs=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u BLIS_ARCH_TYPE)
    filter="$FILTER"
    if [ "$r" = avx512 ]; then
      envs+=(OPENBLAS_CORETYPE=SkylakeX BLIS_ARCH_TYPE=skx)
      filter="${FILTER//hddp\[-a-z0-9\]\*/hddp}"  # hddp's per-set columns come from the first run
    fi
    echo "$(date +%T) $t thread(s), anchors $r (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    json="$OUT/t$t-$r.json"
    "${envs[@]}" OMP_NUM_THREADS="$t" "${lock[@]}" "$BIN" --benchmark_filter="$filter" \
      --benchmark_repetitions="$REPS" --benchmark_min_time="$MIN_TIME" --benchmark_enable_random_interleaving=true \
      --benchmark_out="$json" --benchmark_out_format=json --benchmark_color=false >"$OUT/t$t-$r.txt" 2>&1 \
      || { echo "bench_gemm failed: $(tail -3 "$OUT/t$t-$r.txt")" >&2; exit 1; }
    grep -q '"run_name"' "$json" \
      || { echo "gemm_table: no benchmark matched GEMM_FILTER='$FILTER' (list them: $BIN --benchmark_list_tests)" >&2; exit 1; }
    files+=("$json")
  done
done
hddp_cpu_info
echo "CPU: $CPU_MODEL ($CPU_FM), $(nproc) cores; AVX-512F: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no); the machine's OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} (unset for these runs)"
python3 "$ROOT/bench/gemm_table.py" "${files[@]}"
