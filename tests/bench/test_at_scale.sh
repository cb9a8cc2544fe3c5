#!/usr/bin/env bash
# bench/at_scale end to end, small (bench/at_scale/README.md):
#   tools   at_scale_replay / at_scale_measure: --help, the CSVs they write, bad input (exit 2,
#           the file and line named); at_scale_mpi on real Open MPI: the libnbc-like schedule's
#           sums on 4 ranks, a measured allreduce table the replay reads; bench_allreduce's
#           --table-csv read by the replay
#   smpi    (only with at_scale_sim) 4-16 simulated ranks: the allreduce table's rows, the step
#           with --check-sums (every bucket's sum on every rank), the in-simulator step against
#           the replay (step within 10 %, exposed time within 5 %, and a 1.5x network error
#           caught), a non-power-of-two count refused
# Usage: test_at_scale.sh tools|smpi <build>/bench <mpiexec> <scratch dir inside the build tree>
set -uo pipefail
PART=$1 BIN=$2 MPIEXEC=$3 WORK=$4
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# expect CODE PATTERN CMD...: the exit code and PATTERN in the output
expect() {
  local code=$1 pat=$2; shift 2
  if declare -F "$1" >/dev/null; then "$@" >"$WORK/out" 2>&1; else timeout 120 "$@" >"$WORK/out" 2>&1; fi
  local rc=$?
  if [ $rc -eq "$code" ] && { [ -z "$pat" ] || grep -q -- "$pat" "$WORK/out"; }; then pass "$code '$pat': ${*##*/}"; else
    fail "'$*': rc $rc (want $code), want '$pat' in: $(tail -3 "$WORK/out")"; fi
}
# rows_ok CSV N: a header and N data rows, every number finite and >= 0
rows_ok() {
  python3 - "$1" "$2" <<'PY'
import csv, math, sys
r = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
assert len(r) == int(sys.argv[2]), f"{len(r)} rows, want {sys.argv[2]}"
for row in r:
    for k, v in row.items():
        try:
            x = float(v)
        except ValueError:
            continue
        assert math.isfinite(x) and x >= 0, f"{k} = {v}"
PY
}

W="$WORK/profiles"
mkdir -p "$W"
"$BIN/at_scale_measure" --model wide --batch 256 --flop --profile-out "$W/wide.csv" >/dev/null || fail "measure --flop"
python3 "$ROOT/bench/at_scale/profiles.py" "$W" 32 2>/dev/null || fail "profiles.py"

if [ "$PART" = tools ]; then
  expect 0 "--table" "$BIN/at_scale_replay" --help
  expect 0 "--model" "$BIN/at_scale_measure" --help
  # A measured profile and config; the replay reads both.
  "$BIN/at_scale_measure" --model tutorial --batch 32 --reps 20 --profile-out "$W/tut.csv" --config-out "$W/tut.toml" \
    >"$WORK/m.log" 2>&1 && python3 -c "
import re; t = open('$W/tut.toml').read()
o, g = (float(re.search('^' + k + r' = (\S+)$', t, re.M).group(1)) for k in ('other-ms', 'reduce-gbps'))
assert 0 < o < 100 and 0.1 < g < 1000, (o, g)" \
    && rows_ok "$W/tut.csv" 3 && pass "measure: tutorial profile and config" || fail "measure: $(cat "$WORK/m.log")"
  # Layer 2 of the wide MLP at batch 256: 1024x1024 + bias; forward 2 B in out + B out flop,
  # backward twice that.
  python3 -c "
import csv; r = [x for x in csv.DictReader(open('$W/wide.csv')) if x['layer'] == '2'][0]
f = 2 * 256 * 1024 * 1024 + 256 * 1024
assert r['params'] == '1048576+1024' and float(r['forward_flop']) == f and abs(float(r['backward_flop']) / (2 * f) - 1) < 1e-8, r" \
    && pass "flop profile: layer 2 is 1024x1024 + bias, its flop counted" || fail "flop profile"
  # A hand-made table at 2 and 4 ranks.
  T="$WORK/t.csv"
  printf 'op,ranks,bytes,seconds,reduction_charged\n' >"$T"
  for p in 2 4; do for op in allreduce iallreduce; do
    printf '%s,%s,4096,%s,0\n%s,%s,16777216,%s,0\n' $op $p 1e-5 $op $p 2e-3 >>"$T"; done; done
  "$BIN/at_scale_replay" --profile "$W/tut.csv" --table "$T" --config "$W/tut.toml" --out "$WORK/r.csv" 2>/dev/null \
    && rows_ok "$WORK/r.csv" 6 && pass "replay: 3 rows at 2 and at 4 ranks" || fail "replay on the tutorial"
  "$BIN/at_scale_replay" --profile "$W/resnet50.csv" --node-gflops 560 --table "$T" --ranks 1,4 --no-best-cap \
    --out "$WORK/r2.csv" 2>/dev/null && rows_ok "$WORK/r2.csv" 4 \
    && python3 -c "import csv,sys; r=list(csv.DictReader(open('$WORK/r2.csv'))); assert float(r[0]['efficiency'])==1.0 and float(r[2]['efficiency'])<1.0" \
    && pass "replay: 1 rank is pure compute, 4 ranks less efficient" || fail "replay: resnet50 at 1,4"
  # Bad input: exit 2, the file and line named.
  expect 2 "no-such.csv" "$BIN/at_scale_replay" --profile "$W/no-such.csv" --table "$T"
  sed '3s/.*/allreduce,2,4096,soon,0/' "$T" >"$WORK/bad.csv"
  expect 2 "bad.csv:3: seconds 'soon'" "$BIN/at_scale_replay" --profile "$W/tut.csv" --table "$WORK/bad.csv"
  printf 'layer,params,forward_s,backward_s\nfc,10,1e-3,1e-3\nfc2,10,1e-3\n' >"$WORK/badp.csv"
  expect 2 "badp.csv:3: expected 4 fields, found 3" "$BIN/at_scale_replay" --profile "$WORK/badp.csv" --table "$T"
  expect 2 "counts flop: give --node-gflops" "$BIN/at_scale_replay" --profile "$W/wide.csv" --table "$T"
  expect 2 "no allreduce and iallreduce rows at 8 ranks" "$BIN/at_scale_replay" --profile "$W/tut.csv" --table "$T" --ranks 2,8
  expect 2 "--poll-us" "$BIN/at_scale_replay" --profile "$W/tut.csv" --table "$T" --poll-us -1
  expect 2 "--model" "$BIN/at_scale_measure" --model resnet --profile-out "$WORK/x.csv"
  # at_scale_mpi on real Open MPI: the libnbc-like schedule's sums (4 ranks, 7 buckets of a
  # 3.1 M-parameter model), and a measured table (reduction_charged 1) the replay reads.
  expect 0 "" "$MPIEXEC" --oversubscribe --bind-to none -n 4 "$BIN/at_scale_mpi" step --profile "$W/wide.csv" \
    --compute-ms 2 --cap-mib 2 --check-sums --steps 2 --out "$WORK/mpi-step.csv"
  rows_ok "$WORK/mpi-step.csv" 1 && pass "at_scale_mpi step: timeline row" || fail "at_scale_mpi step row"
  expect 0 "" "$MPIEXEC" --oversubscribe --bind-to none -n 2 "$BIN/at_scale_mpi" allreduce --max-mib 1 --reps 3 --out "$WORK/mt.csv"
  rows_ok "$WORK/mt.csv" 10 && grep -q '^iallreduce,2,1048576,.*,1$' "$WORK/mt.csv" && pass "at_scale_mpi table" \
    || fail "at_scale_mpi table: $(cat "$WORK/mt.csv")"
  "$BIN/at_scale_replay" --profile "$W/wide.csv" --compute-ms 5 --table "$WORK/mt.csv" --out "$WORK/r3.csv" 2>/dev/null \
    && rows_ok "$WORK/r3.csv" 3 && pass "replay on a measured table" || fail "replay on the measured table"
  expect 2 "--mode" "$MPIEXEC" -n 1 "$BIN/at_scale_mpi" step --profile "$W/wide.csv" --mode sometimes
  # at_scale_comm_check on real Open MPI, 2 ranks, 2 rounds. No timing asserted (the kept
  # measurements are checked by test_comm_model): on a loaded machine a round's communication
  # can hide entirely (0 ms) and its ratio leave any tolerance, so the verdict may be either
  # exit 0 or exit 1 with the rows named; 4 rows either way, and the raw file re-derives them.
  cc=(--profile "$W/wide.csv" --compute-ms 1 --caps-mib 1,4 --rounds 2 --tolerance 10)
  timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -n 2 "$BIN/at_scale_comm_check" "${cc[@]}" --out "$WORK/cc.csv" \
    --raw-out "$WORK/cc.json" >"$WORK/cc.log" 2>&1
  rc=$?
  { [ $rc -eq 0 ] || { [ $rc -eq 1 ] && grep -q "communication model off by more than" "$WORK/cc.log"; }; } \
    && pass "at_scale_comm_check: exit $rc" || fail "at_scale_comm_check: rc $rc: $(tail -5 "$WORK/cc.log")"
  # The raw file re-derives the same rows and the same verdict (its exit code).
  "$BIN/at_scale_comm_check" --from-raw "$WORK/cc.json" --tolerance 10 --out "$WORK/cc2.csv" >"$WORK/cc2.log" 2>&1
  rc2=$?
  [ "$rc2" -eq "$rc" ] || fail "at_scale_comm_check --from-raw: exit $rc2, the live run's was $rc: $(tail -3 "$WORK/cc2.log")"
  python3 -c "import csv; r=list(csv.DictReader(open('$WORK/cc.csv'))); assert len(r)==4 and {x['mode'] for x in r}=={'blocking','overlapped'} and all(float(x['measured_comm_ms'])>=0 and float(x['replay_comm_ms'])>0 for x in r)" \
    && cmp -s "$WORK/cc.csv" "$WORK/cc2.csv" \
    && pass "at_scale_comm_check: 4 rows, re-derived from its raw file" || fail "at_scale_comm_check: $(cat "$WORK/cc.csv")"
  expect 2 "needs 2 or more ranks" "$MPIEXEC" -n 1 "$BIN/at_scale_comm_check" --profile "$W/wide.csv" --compute-ms 1
  # bench_allreduce --table-csv writes the same table from its own runs.
  expect 0 "" "$MPIEXEC" --oversubscribe --bind-to none -n 2 "$BIN/bench_allreduce" \
    --benchmark_filter='^allreduce/(blocking|iallreduce_wait)/(4KiB|1MiB)' --table-csv="$WORK/bt.csv"
  rows_ok "$WORK/bt.csv" 4 && grep -q '^allreduce,2,1048576,.*,1$' "$WORK/bt.csv" \
    && "$BIN/at_scale_replay" --profile "$W/wide.csv" --compute-ms 5 --table "$WORK/bt.csv" --out "$WORK/r4.csv" 2>/dev/null \
    && rows_ok "$WORK/r4.csv" 3 && pass "bench_allreduce --table-csv: the replay reads it" || fail "bench_allreduce --table-csv"
else
  SIM="$BIN/at_scale_sim" OUT="$WORK" LINK_LAT_US=0.25 BW_FACTOR=0.97 LAT_FACTOR=1
  source "$ROOT/bench/at_scale/lib.sh"
  mkdir -p "$WORK/platforms"
  # The allreduce table at 4 and 16 simulated ranks: 2 ops x 6 sizes each, times grow with size.
  for p in 4 16; do
    if smpi $p "$(platform $p 100 0.25)" allreduce --max-mib 4 --out "$WORK/t$p.csv" >"$WORK/t$p.log" 2>&1 \
      && rows_ok "$WORK/t$p.csv" 12 \
      && python3 - "$WORK/t$p.csv" <<'PY'
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))
for op in ("allreduce", "iallreduce"):
    t = [float(x["seconds"]) for x in r if x["op"] == op]
    assert len(t) == 6 and all(a < b for a, b in zip(t, t[1:])), (op, t)
assert all(x["reduction_charged"] == "0" for x in r)
PY
    then pass "SMPI allreduce table at $p ranks"; else fail "SMPI table at $p: $(tail -3 "$WORK/t$p.log")"; fi
  done
  { cat "$WORK/t4.csv"; tail -n +2 "$WORK/t16.csv"; } >"$WORK/t.csv"
  # The in-simulator step on real data (every bucket's sum checked on every rank), then the
  # replay of the same step: within 10 % (they model the same schedule).
  for p in 4 8 16; do
    smpi $p "$(platform $p 100 0.25)" step --profile "$W/wide.csv" --node-gflops 560 --cap-mib 2 --check-sums \
      --out "$WORK/s$p.csv" >"$WORK/s$p.log" 2>&1 && rows_ok "$WORK/s$p.csv" 1 \
      && pass "SMPI step on real data, $p ranks: sums correct" || fail "SMPI step --check-sums $p: $(tail -3 "$WORK/s$p.log")"
  done
  # The exposed time is compared, not only the step (which compute dominates): within 5 % (the
  # reductions are most of it here), and the replay on the table x1.5 (network 1.5x off) must miss it.
  for p in 4 16; do
    smpi $p "$(platform $p 100 0.25)" step --profile "$W/wide.csv" --node-gflops 560 --cap-mib 2 \
      --reduce-gbps 10 --out "$WORK/sim$p.csv" >"$WORK/sim$p.log" 2>&1 || fail "SMPI step $p: $(tail -3 "$WORK/sim$p.log")"
    awk -F, 'NR == 1 { print; next } { $4 = $4 * 1.5; print }' OFS=, "$WORK/t.csv" >"$WORK/t15.csv"
    for t in t t15; do
      "$BIN/at_scale_replay" --profile "$W/wide.csv" --node-gflops 560 --cap-mib 2 --reduce-gbps 10 --table "$WORK/$t.csv" \
        --ranks $p --no-best-cap --out "$WORK/rep$p-$t.csv" 2>/dev/null || fail "replay $p on $t.csv"
    done
    python3 - "$WORK/sim$p.csv" "$WORK/rep$p-t.csv" "$WORK/rep$p-t15.csv" <<'PY' && pass "replay vs SMPI step at $p ranks" || fail "replay vs SMPI at $p"
import csv, sys
sim = list(csv.DictReader(open(sys.argv[1])))[0]
rep, off = ([r for r in csv.DictReader(open(f)) if r["mode"] == "overlapped"][0] for f in sys.argv[2:4])
a, b = float(rep["step_ms"]), float(sim["step_ms"])
e, es, eo = float(rep["exposed_ms"]), float(sim["exposed_ms"]), float(off["exposed_ms"])
print(f"  replay {a:.4f} ms, SMPI {b:.4f} ms, ratio {a / b:.4f}; exposed {e:.4f} / {es:.4f} ms ({e / es:.4f}); "
      f"with the table x1.5: {eo:.4f} ms ({eo / es:.4f})")
assert abs(a / b - 1) <= 0.10 and int(rep["buckets"]) == int(sim["buckets"]) > 2
assert es > 0 and abs(e / es - 1) <= 0.05, "exposed time off"
assert abs(eo / es - 1) > 0.05, "a 1.5x network error passes: the check cannot fail"
PY
  done
  seq 0 5 | sed 's/^/node-/' >"$WORK/platforms/hosts-6"
  expect 1 "power-of-two number of ranks, got 6" smpi 6 "$(platform 8 100 0.25)" step --profile "$W/wide.csv" \
    --node-gflops 560
  expect 2 "counts flop" smpi 4 "$(platform 4 100 0.25)" step --profile "$W/wide.csv"
fi
[ $failures -eq 0 ] && echo "test_at_scale $PART: all passed" || echo "test_at_scale $PART: $failures failure(s)"
exit $((failures > 0))
