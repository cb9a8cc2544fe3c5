#!/usr/bin/env bash
# hddp's poly_train vs the PyTorch DDP tutorial (bench/poly_tutorial.py, gloo backend), side by
# side on this machine, 1 and 3 ranks, each configuration REPS times (median reported).
# Prints a markdown table; needs a build (scripts/run.sh or scripts/test.sh made one).
# Usage: bench/poly_vs_pytorch.sh [REPS]   (env: HDDP_BUILD_DIR, default build/)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${HDDP_BUILD_DIR:-$ROOT/build}"
REPS="${1:-3}"
BIN="$BUILD/drivers/poly_train"
[ -x "$BIN" ] || { echo "no $BIN: build first (bash scripts/run.sh)" >&2; exit 1; }
bash "$ROOT/scripts/setup-deps.sh" python3-torch python3-sklearn python3-matplotlib time
PY=/usr/bin/python3  # Debian's python3-torch lives there, whatever python3 is first on PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# run IMPL P REP: one run; writes "train_s ms_step wall_s loss900 mean_err max_err rss_mb" to stdout.
run() {
  local impl=$1 p=$2 d="$WORK/$1-$2-$3"
  mkdir -p "$d"
  local t0 t1
  t0=$(date +%s.%N)
  if [ "$impl" = hddp ]; then
    timeout 300 mpiexec -n "$p" --oversubscribe --bind-to none /usr/bin/time -f 'RSS_KB %M' "$BIN" --out "$d" >"$d/log" 2>&1
  else
    timeout 300 mpiexec -n "$p" --oversubscribe --bind-to none /usr/bin/time -f 'RSS_KB %M' "$PY" "$ROOT/bench/poly_tutorial.py" "$d" >"$d/log" 2>&1
  fi
  t1=$(date +%s.%N)
  local wall rss
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  rss=$(awk '/^RSS_KB/ { if ($2 > m) m = $2 } END { printf "%.1f", m / 1024 }' "$d/log")
  if [ "$impl" = hddp ]; then
    local train ms l900 mean max
    train=$(sed -n 's/^training: [0-9]* epochs in \([0-9.]*\) s.*/\1/p' "$d/log")
    ms=$(awk -v t="$train" 'BEGIN { printf "%.6f", t }')
    l900=$(awk '/^epoch 900,/ { gsub(",", "", $5); if ($5 + 0 > m) m = $5 + 0 } END { print m }' "$d/log")
    mean=$(sed -n 's/.*mean |f - g| = \([0-9.e+-]*\),.*/\1/p' "$d/log")
    max=$(sed -n 's/.*max |f - g| = \([0-9.e+-]*\) over.*/\1/p' "$d/log")
    echo "$train $ms $wall $l900 $mean $max $rss"
  else
    local r
    r=$(grep '^RESULT' "$d/log")
    echo "$(sed 's/.*train_s=\([^ ]*\).*/\1/' <<<"$r") $(sed 's/.*ms_per_step=\([^ ]*\).*/\1/' <<<"$r") $wall" \
         "$(sed 's/.*loss900_max=\([^ ]*\).*/\1/' <<<"$r") $(sed 's/.*mean_err=\([^ ]*\).*/\1/' <<<"$r")" \
         "$(sed 's/.*max_err=\([^ ]*\).*/\1/' <<<"$r") $rss"
  fi
}

echo "| ranks | implementation | training loop (s) | per step | whole process (s) | max loss at epoch 900 | mean / max abs error | peak RSS per rank (MiB) |"
echo "|---|---|---|---|---|---|---|---|"
for p in 1 3; do
  declare -A res=()
  for rep in $(seq "$REPS"); do  # interleaved: hddp, PyTorch, hddp, PyTorch, ...
    for impl in hddp pytorch; do res[$impl]+="$(run $impl $p $rep)"$'\n'; done
  done
  for impl in hddp pytorch; do
    col() { printf '%s' "${res[$impl]}" | awk -v c="$1" 'NF { print $c }' | median; }
    train=$(col 1) wall=$(col 3) l900=$(col 4) mean=$(col 5) max=$(col 6) rss=$(col 7)
    if [ "$impl" = hddp ]; then step=$(awk -v t="$train" 'BEGIN { printf "%.1f us", t * 1e6 / 1000 }')
    else step=$(awk -v t="$train" 'BEGIN { printf "%.2f ms", t * 1e3 / 1000 }'); fi
    printf '| %d | %s | %.4f | %s | %.2f | %s | %s / %s | %s |\n' "$p" \
      "$([ $impl = hddp ] && echo 'hddp poly_train' || echo 'PyTorch 1.13 DDP (gloo)')" "$train" "$step" "$wall" \
      "$l900" "$mean" "$max" "$rss"
  done
  unset res
done
echo
echo "Median of $REPS interleaved runs each; OMP_NUM_THREADS=1; mpiexec -n P --oversubscribe on $(nproc --all) cores."
