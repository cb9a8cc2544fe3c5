#!/usr/bin/env bash
# The communication model against the kept measurements (bench/at_scale/comm_check.sh
# made them, bench/results/<cpu>/at_scale/comm-<P>.json): this build's replay re-checks every
# round of them (at_scale_comm_check --from-raw, no MPI, no timing), so a change to the model
# that the measurements contradict fails here, on any machine and under any load.
#   1. each kept verdict (comm-<P>.csv) is what this build makes of its raw file, byte for byte;
#   2. at 2 ranks every row is within 25 % (exit 0); 3 ranks: the kept verdict names its one row
#      outside (oversubscribed: 3 ranks on 2 cores; bench/results/at_scale.md);
#   3. the check can fail: the same data with the table scaled by 1.5 (a network model 1.5x off)
#      exits 1 naming the rows;
#   4. bad input: a missing file and a file of another format exit 2 naming the file;
#   5. the same over shaped network links (bench/link/comm_check_link.sh), below.
# Usage: test_comm_model.sh <build>/bench/at_scale_comm_check <scratch dir in the build tree>
set -uo pipefail
BIN=$1 WORK=$2
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
kept=$(ls "$ROOT"/bench/results/*/at_scale/comm-[0-9].json 2>/dev/null)
[ -n "$kept" ] || { echo "FAIL: no kept bench/results/*/at_scale/comm-<P>.json (run bench/at_scale/comm_check.sh)"; exit 1; }
for raw in $kept; do
  p=$(basename "$raw" .json) p=${p#comm-}
  timeout 60 "$BIN" --from-raw "$raw" --out "$WORK/v.csv" 2>"$WORK/err"
  rc=$?
  cmp -s "$WORK/v.csv" "${raw%.json}.csv" && pass "$raw: the kept verdict re-derived" \
    || fail "$raw: this build's verdict differs from ${raw%.json}.csv: $(diff "$WORK/v.csv" "${raw%.json}.csv" | head -4)"
  if [ "$p" = 2 ]; then
    [ $rc -eq 0 ] && pass "2 ranks: every cap and mode within 25 %" || fail "2 ranks: rc $rc: $(cat "$WORK/err")"
  else
    n=$(grep -c 'off by more than 25 %' "$WORK/err")
    [ $rc -eq 1 ] && [ "$n" -eq 1 ] && grep -q "$p ranks, overlapped, cap 262144 B" "$WORK/err" \
      && pass "$p ranks: the one known row outside, named" || fail "$p ranks: rc $rc, $n rows off: $(cat "$WORK/err")"
  fi
  timeout 60 "$BIN" --from-raw "$raw" --network-scale 1.5 --out "$WORK/s.csv" 2>"$WORK/err"
  rc=$? n=$(grep -c 'off by more than 25 %' "$WORK/err")
  [ $rc -eq 1 ] && [ "$n" -ge 4 ] && pass "$p ranks: a 1.5x network error fails ($n of 6 rows)" \
    || fail "$p ranks: the table scaled by 1.5 gave rc $rc, $n rows off"
done
# Over shaped network links (bench/link/comm_check_link.sh, bench/results/<cpu>/link/comm-<rate>-<P>.json):
# each kept verdict re-derived byte for byte (a change to the model that moves any row fails);
# on 2 nodes the Blocking rows are within 15 %, and at 1 Gbit/s every row (what bench/results/link.md
# states).
for raw in $(ls "$ROOT"/bench/results/*/link/comm-*-[0-9].json 2>/dev/null); do
  timeout 60 "$BIN" --from-raw "$raw" --tolerance 0.15 --out "$WORK/v.csv" 2>"$WORK/err"
  cmp -s "$WORK/v.csv" "${raw%.json}.csv" && pass "$raw: the kept verdict re-derived" \
    || fail "$raw: this build's verdict differs from ${raw%.json}.csv: $(diff "$WORK/v.csv" "${raw%.json}.csv" | head -4)"
  case "$raw" in
    *-1gbit-2.json) modes="blocking overlapped" ;;
    *-2.json) modes="blocking" ;;
    *) modes="" ;;
  esac
  for mode in $modes; do
    off=$(awk -F, -v m="$mode" 'NR > 1 && $3 == m && ($11 < 0.85 || $11 > 1.15) { print $3 " " $4 ": " $11 }' "$WORK/v.csv")
    [ -z "$off" ] && pass "$raw: 2 nodes, $mode: every cap within 15 %" || fail "$raw: $mode rows off by more than 15 %: $off"
  done
done
timeout 60 "$BIN" --from-raw "$WORK/none.json" >"$WORK/out" 2>&1
[ $? -eq 2 ] && grep -q "none.json" "$WORK/out" && pass "missing raw file: exit 2, named" || fail "missing file: $(cat "$WORK/out")"
echo '{"format": "something-else"}' >"$WORK/other.json"
timeout 60 "$BIN" --from-raw "$WORK/other.json" >"$WORK/out" 2>&1
[ $? -eq 2 ] && grep -q "other.json: .*not an at_scale_comm_check raw file" "$WORK/out" && pass "another format: exit 2" \
  || fail "another format: $(cat "$WORK/out")"
timeout 60 "$BIN" >"$WORK/out" 2>&1
[ $? -eq 2 ] && grep -q "give --profile" "$WORK/out" && pass "no input: exit 2" || fail "no input: $(cat "$WORK/out")"
[ $failures -eq 0 ] && echo "test_comm_model: all passed" || echo "test_comm_model: $failures failure(s)"
exit $((failures > 0))
