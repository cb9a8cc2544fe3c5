#!/usr/bin/env bash
# bench_allreduce at 2 ranks (REPS runs) and 1 rank (one run), each run in three parts (step,
# allreduce, overlap) interleaved round by round, under the bench lock; then the tables kept in
# bench/results/allreduce.md, medians over the runs with [min..max].
# Usage: bench/allreduce_table.sh [OUT_DIR]   (env HDDP_BUILD_DIR, REPS=3, RANKS=2)
# 1 OpenMP thread per rank, --bind-to none (2 ranks on 2 cores). About 4 minutes per round here.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${HDDP_BUILD_DIR:-$ROOT/build}/bench/bench_allreduce"
OUT="${1:-${HDDP_BUILD_DIR:-$ROOT/build}/bench-allreduce}"
REPS="${REPS:-3}"
RANKS="${RANKS:-2}"
[ -x "$BIN" ] || { echo "no $BIN: build first (bash scripts/test.sh)" >&2; exit 1; }
mkdir -p "$OUT"
rm -f "$OUT"/r*.json
root_flag=()
[ "$(id -u)" -ne 0 ] || root_flag=(--allow-run-as-root)

# one LABEL NP FILTER: one bench_allreduce run, JSON into OUT/LABEL.json
one() {
  echo "$(date +%T) $1 (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  OMP_NUM_THREADS=1 flock /tmp/hddp-bench.lock \
    mpiexec "${root_flag[@]}" --oversubscribe --bind-to none -n "$2" -x OMP_NUM_THREADS "$BIN" \
    --benchmark_filter="$3" --benchmark_out="$OUT/$1.json" --benchmark_out_format=json \
    --benchmark_color=false >"$OUT/$1.txt" 2>&1 || { echo "run $1 failed: $(tail -3 "$OUT/$1.txt")" >&2; exit 1; }
}
for rep in $(seq 1 "$REPS"); do
  for part in step allreduce overlap; do
    one "r$RANKS-$part-$rep" "$RANKS" "^$part/"
    # 1 rank once, for reference (no overlap part: nothing to overlap)
    [ "$rep" -eq 1 ] && [ "$part" != overlap ] && one "r1-$part-$rep" 1 "^$part/"
  done
done
python3 "$ROOT/bench/allreduce_tables.py" "$OUT/r$RANKS-*.json" "$OUT/r1-*.json" | tee "$OUT/tables.md"
