#!/usr/bin/env bash
# Two builds side by side in one run (a refactoring must not move the figures by more than
# noise): the tutorial's step (poly_train, us/step) per rank count and reducer mode, and the
# reducer's own path (bench_allreduce allreduce/reducer/*) per mode and size. Runs alternate
# between the builds (order flipped every round); the figure is the median over rounds of the
# per-round ratio B/A. Prints markdown tables for bench/RESULTS.md. Run on a quiet machine.
#   bash bench/builds_compare.sh <build A> <build B>     (ROUNDS=9 EPOCHS=20000 PARTS="poly reducer")
# Example: git worktree add /tmp/base <commit>; cmake -S /tmp/base -B /tmp/base/build
#   -DCMAKE_BUILD_TYPE=Release; cmake --build /tmp/base/build --target poly_train bench_allreduce;
#   bash bench/builds_compare.sh /tmp/base/build build
set -euo pipefail
A=${1:?usage: builds_compare.sh <build A> <build B>} B=${2:?usage: builds_compare.sh <build A> <build B>}
ROUNDS=${ROUNDS:-9}
EPOCHS=${EPOCHS:-20000}
PARTS=${PARTS:-poly reducer}
for b in "$A" "$B"; do
  for exe in drivers/poly_train bench/bench_allreduce; do
    [ -x "$b/$exe" ] || { echo "builds_compare.sh: $b/$exe is missing; build it first" >&2; exit 1; }
  done
done
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
range() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }'; }

echo "A: $A ($(git -C "$(dirname "$A")" rev-parse --short HEAD 2>/dev/null || echo '?')), B: $B ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores; $(lscpu | grep -o 'avx512f\|avx2' | sort -u | tr '\n' ' ')"
if [[ " $PARTS " == *" poly "* ]]; then
echo
echo "poly_train, tutorial model, $EPOCHS epochs, 1 thread per rank, $ROUNDS rounds:"
echo
echo "| ranks | mode | A us/step | B us/step | B/A (median) | range |"
echo "|---|---|---|---|---|---|"
us_per_step() {  # $1 build, $2 ranks, $3.. mode flags
  local b=$1 np=$2; shift 2
  mpiexec -n "$np" --oversubscribe --bind-to none "$b/drivers/poly_train" --epochs "$EPOCHS" --no-plot \
    --log-every 100000000 --out "$tmp" "$@" 2>/dev/null | sed -n 's/^training: .*(\([0-9.]*\) us\/step).*/\1/p'
}
for np in 1 2 3; do
  for mode in test blocking thread; do
    flags=(--reduce-mode "$mode")
    [ "$np" -eq 1 ] && [ "$mode" != test ] && continue
    a=() b=() r=()
    for k in $(seq 1 "$ROUNDS"); do
      if [ $((k % 2)) -eq 1 ]; then x=$(us_per_step "$A" "$np" "${flags[@]}"); y=$(us_per_step "$B" "$np" "${flags[@]}")
      else y=$(us_per_step "$B" "$np" "${flags[@]}"); x=$(us_per_step "$A" "$np" "${flags[@]}"); fi
      a+=("$x") b+=("$y") r+=("$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.4f", y / x }')")
    done
    echo "| $np | $mode | $(med "${a[@]}") | $(med "${b[@]}") | $(med "${r[@]}") | $(range "${r[@]}") |"
  done
done
fi
[[ " $PARTS " == *" reducer "* ]] || exit 0

echo
echo "bench_allreduce allreduce/reducer (2 ranks), median_us of the reducer's step, $ROUNDS rounds:"
echo
FILTER='allreduce/reducer/(blocking|test|thread)/(4B|64KiB|1MiB|4MiB)(/|$)'
for k in $(seq 1 "$ROUNDS"); do
  for b in $([ $((k % 2)) -eq 1 ] && echo "A B" || echo "B A"); do
    dir=$([ "$b" = A ] && echo "$A" || echo "$B")
    mpiexec -n 2 --oversubscribe --bind-to none "$dir/bench/bench_allreduce" --benchmark_filter="$FILTER" \
      --benchmark_format=json --benchmark_out="$tmp/$b.$k.json" --benchmark_out_format=json >/dev/null 2>&1
  done
done
python3 - "$tmp" "$ROUNDS" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def load(tag, k):
    # rank 0's file: benchmark name -> the reducer's own time (counter 'reducer_us' or real_time)
    out = {}
    for bm in json.load(open(f"{tmp}/{tag}.{k}.json"))["benchmarks"]:
        out[bm["name"]] = bm.get("reducer_us", bm["real_time"])
    return out
A = [load("A", k) for k in range(1, rounds + 1)]
B = [load("B", k) for k in range(1, rounds + 1)]
print("| benchmark | A us | B us | B/A (median) | range |")
print("|---|---|---|---|---|")
for name in A[0]:
    a = [r[name] for r in A]; b = [r[name] for r in B]
    q = sorted(y / x for x, y in zip(a, b))
    print(f"| {name} | {statistics.median(a):.2f} | {statistics.median(b):.2f} | {statistics.median(q):.3f} | {q[0]:.3f}-{q[-1]:.3f} |")
PY
