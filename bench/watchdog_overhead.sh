#!/usr/bin/env bash
# The stall watchdog's cost (poly_train --timeout, distributed/watchdog.h), side by side in one run:
#   1. the tutorial's step: poly_train with --timeout 300 (the default) and --timeout 0 (off),
#      alternating short runs (PAIRS pairs of EPOCHS epochs, the order flipped every pair), per
#      rank count; the per-pair ratio of us/step, median over pairs;
#   2. the wide-MLP step: bench_allreduce's step/wide benchmarks, whose rounds run every mode
#      back to back (test vs test_watchdog, blocking vs blocking_watchdog): the per-round
#      ratio, median over rounds.
# Prints markdown tables for bench/results/watchdog.md. Run on a quiet machine.
#   bash bench/watchdog_overhead.sh [build dir]     (default: build; PAIRS=15 EPOCHS=20000)
set -euo pipefail
BUILD=${1:-build}
PAIRS=${PAIRS:-15}
EPOCHS=${EPOCHS:-20000}
BIN=$BUILD/drivers/poly_train
[ -x "$BIN" ] || { echo "watchdog_overhead.sh: $BIN is missing; build first (bash scripts/run.sh or cmake --build $BUILD)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores; $(lscpu | grep -o 'avx512f\|avx2' | sort -u | tr '\n' ' ')"
echo
echo "| ranks | us/step, --timeout 300 (median) | us/step, --timeout 0 (median) | ratio on/off (median of $PAIRS pairs) | range |"
echo "|---|---|---|---|---|"
us_per_step() {  # $1 ranks, $2 timeout
  mpiexec -n "$1" --oversubscribe --bind-to none "$BIN" --epochs "$EPOCHS" --no-plot --log-every 1000000 \
    --out "$tmp" --timeout "$2" 2>/dev/null | sed -n 's/^training: .*(\([0-9.]*\) us\/step).*/\1/p'
}
for np in 2 3; do
  on=() off=() ratio=()
  for p in $(seq 1 "$PAIRS"); do
    if [ $((p % 2)) -eq 1 ]; then a=$(us_per_step "$np" 300); b=$(us_per_step "$np" 0)
    else b=$(us_per_step "$np" 0); a=$(us_per_step "$np" 300); fi
    on+=("$a") off+=("$b") ratio+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", a / b }')")
  done
  med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  lo=$(printf '%s\n' "${ratio[@]}" | sort -g | head -1) hi=$(printf '%s\n' "${ratio[@]}" | sort -g | tail -1)
  echo "| $np | $(med "${on[@]}") | $(med "${off[@]}") | $(med "${ratio[@]}") | $lo-$hi |"
done

echo
echo "| wide MLP (1-1024x4-1), 2 ranks | test ms | test_watchdog ms | ratio | blocking ms | blocking_watchdog ms | ratio |"
echo "|---|---|---|---|---|---|---|"
mpiexec -n 2 --oversubscribe --bind-to none "$BUILD/bench/bench_allreduce" \
  --benchmark_filter='^step/wide/b(8|32)/cap25MiB' --benchmark_format=json 2>/dev/null >"$tmp/step.json"
python3 - "$tmp/step.json" <<'EOF'
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    g = b.get
    print(f"| {b['name']} | {g('test_ms'):.3f} | {g('test_watchdog_ms'):.3f} | {g('test_watchdog_vs_off'):.3f} | "
          f"{g('blocking_ms'):.3f} | {g('blocking_watchdog_ms'):.3f} | {g('blocking_watchdog_vs_off'):.3f} |")
EOF
