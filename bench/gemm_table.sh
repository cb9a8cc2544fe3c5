#!/usr/bin/env bash
# hddp vs OpenBLAS GEMM, side by side in one run per thread count (interleaved repetitions,
# medians), printed as the markdown table kept in bench/RESULTS.md.
# Usage: bench/gemm_table.sh [THREADS...]   (default: 1 2; env HDDP_BUILD_DIR, REPS)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${HDDP_BUILD_DIR:-$ROOT/build}/bench/bench_gemm"
REPS="${REPS:-5}"
[ -x "$BIN" ] || { echo "no $BIN: build first (bash scripts/test.sh)" >&2; exit 1; }
FILTER="${GEMM_FILTER:-}"
[ -n "$FILTER" ] || FILTER='/s/(NN|NT|TN)/(32x20x1|32x1x20|32x20x20)/|/s/NN/(64x64x64|128x128x128|256x256x256|512x512x512|1024x1024x1024|2048x2048x2048|4096x1024x1024)|/s/(NN|NT|TN)/256x4096x4096|/d/NN/(1024x1024x1024|2048x2048x2048)'
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(1 2)
for t in "${threads[@]}"; do
  OMP_NUM_THREADS=$t "$BIN" --benchmark_filter="($FILTER)" --benchmark_repetitions="$REPS" \
    --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
    --benchmark_format=csv 2>/dev/null | grep '_median' | sed "s/^/$t,/"
done | awk -F, '
  {
    split($2, p, "/"); gsub("\"", "", p[2]); key = p[3] "/" p[4] "/" p[5]
    t = $1; ns[t, p[2], key] = $4; gf[t, p[2], key] = $(NF - 1)  # real_time (ns), GFLOPS
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    th[t] = 1
  }
  END {
    for (i = 1; i <= n; i++) for (t = 1; t <= 4096; t++) { if (!(t in th)) continue
      k = order[i]; h = ns[t, "hddp", k]; o = ns[t, "openblas", k]
      if (h == "" || o == "") continue
      unit = (h < 10000) ? sprintf("%.0f ns | %.0f ns", h, o) : sprintf("%.1f GFLOP/s | %.1f GFLOP/s", gf[t, "hddp", k], gf[t, "openblas", k])
      split(k, q, "/"); split(q[3], d, "x")  # sort key: precision, size, transpose, threads
      printf "%s %012d %s %04d| %s | %s | %s | %.2f |\n", q[1], d[1] * d[2] * d[3], q[2], t, k, t, unit, o / h
    }
  }' | sort | cut -d"|" -f2- | sed 's/^/|/' | { echo "| shape | threads | hddp | OpenBLAS | hddp / OpenBLAS |"; echo "|---|---|---|---|---|"; cat; }
