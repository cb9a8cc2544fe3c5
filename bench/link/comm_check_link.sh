#!/usr/bin/env bash
# The communication model (bench/at_scale's replay) against the real reducer over shaped network
# links: bench/at_scale/comm_check.sh's measurement (a communication-bound model: 24 layers of
# 128 x 512 + bias, 6.3 MB of gradients, 4 ms of compute per step; caps 256 KiB, 1 MiB, 4 MiB;
# Blocking and Test mode) run on nodes joined by bench/link/shaped_link.sh at each rate of
# RATES, 2 nodes (and 3 at the rates of RATES3), goal: replayed within 15 % of measured.
# The allreduce table the replay reads is measured over the same link in the same rounds.
#
#   bash bench/link/comm_check_link.sh          (needs root; about a minute per rate)
#   env: RATES="10gbit 1gbit", RATES3="1gbit", ROUNDS=15
# Keeps comm-<rate>-<P>.{csv,json} and comm.md under bench/results/<cpu>/link/;
# tests/bench/test_comm_model.sh re-checks the kept JSON with the current replay.
# Exit 1 when a median ratio replayed / measured is outside 1 +- 0.15.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
source "$ROOT/scripts/common.sh"
BIN="${HDDP_BUILD_DIR:-$ROOT/build}/bench/at_scale_comm_check"
[ -x "$BIN" ] || { echo "error: no $BIN: build first (bash scripts/test.sh, or cmake --build build)" >&2; exit 2; }
hddp_cpu_info
OUT="$ROOT/bench/results/$CPU_SLUG/link"
mkdir -p "$OUT"
MODEL="$OUT/comm-model.csv"
{ echo "layer,params,forward_s,backward_s"; for i in $(seq 0 23); do echo "fc$i,65536+512,1e-4,2e-4"; done; } >"$MODEL"
rc=0
check() {  # check RATE NODES
  echo "== $2 nodes over $1 ($CPU_MODEL, $CPU_FM), 1 thread each" >&2
  OMP_NUM_THREADS=1 timeout 900 bash "$ROOT/bench/link/shaped_link.sh" --rate "$1" --nodes "$2" -- "$BIN" \
    --profile "$MODEL" --compute-ms 4 --caps-mib 0.25,1,4 --rounds "${ROUNDS:-15}" --tolerance 0.15 \
    --out "$OUT/comm-$1-$2.csv" --raw-out "$OUT/comm-$1-$2.json" || rc=1
}
for r in ${RATES:-10gbit 1gbit}; do check "$r" 2; done
for r in ${RATES3:-1gbit}; do check "$r" 3; done
python3 "$ROOT/bench/at_scale/tables.py" comm-link "$OUT" >"$OUT/comm.md"
cat "$OUT/comm.md" >&2
exit $rc
