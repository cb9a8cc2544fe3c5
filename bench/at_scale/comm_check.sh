#!/usr/bin/env bash
# The communication model against the real reducer, on this machine: at 2 and 3 ranks,
# a communication-bound model (24 layers of 128 x 512 + bias, 6.3 MB of gradients, 4 ms of
# compute per step) with bucket caps of 256 KiB, 1 MiB and 4 MiB, Blocking and Test mode;
# at_scale_comm_check measures, replays and compares (bench/at_scale/README.md, "Validation").
# Keeps the profile, the verdicts and every round's raw measurements under
# bench/results/<cpu>/at_scale/ (comm-<P>.csv, comm-<P>.json); tests/bench/test_comm_model.sh
# re-checks the kept JSON with the current replay.
#
#   bash bench/at_scale/comm_check.sh          (about 30 s; HDDP_BUILD_DIR: the build, default build)
# Exit 1 when a median ratio replayed / measured is outside 1 +- 0.25 (TOLERANCE).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
source "$ROOT/scripts/common.sh"
BIN="${HDDP_BUILD_DIR:-$ROOT/build}/bench/at_scale_comm_check"
[ -x "$BIN" ] || { echo "error: no $BIN: build first (bash scripts/test.sh, or cmake --build build)" >&2; exit 2; }
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
hddp_cpu_info
OUT="$ROOT/bench/results/$CPU_SLUG/at_scale"
mkdir -p "$OUT"
{ echo "layer,params,forward_s,backward_s"; for i in $(seq 0 23); do echo "fc$i,65536+512,1e-4,2e-4"; done; } >"$OUT/comm-model.csv"
rc=0
for p in 2 3; do
  echo "== $p ranks ($CPU_MODEL, $CPU_FM), 1 thread each" >&2
  OMP_NUM_THREADS=1 timeout 600 mpiexec --oversubscribe --bind-to none -n "$p" "$BIN" --profile "$OUT/comm-model.csv" \
    --compute-ms 4 --caps-mib 0.25,1,4 --rounds 31 --tolerance "${TOLERANCE:-0.25}" \
    --out "$OUT/comm-$p.csv" --raw-out "$OUT/comm-$p.json" || rc=1
  column -s, -t "$OUT/comm-$p.csv" | cut -c1-200 >&2
done
python3 "$ROOT/bench/at_scale/tables.py" comm "$OUT" >"$OUT/comm.md"
cat "$OUT/comm.md" >&2
echo "kept: $OUT/comm-{model.csv,2.csv,2.json,3.csv,3.json} and comm.md (bench/results/at_scale.md's table)" >&2
exit $rc
