#!/usr/bin/env bash
# bench_peak and bench/gemm_table.sh end to end on two small shapes: bench_peak reports a
# positive rate for every instruction set this CPU has and "not supported" for the others;
# the table has one column per hddp micro-kernel the CPU can execute (and none other), a row
# per shape and thread count with numeric ratios; bad input is refused. Timings are not checked.
# Usage: test_gemm_table.sh <bench_peak> <build dir> <scratch dir inside the build tree>
set -uo pipefail
PEAK=$1 BUILD=$2 WORK=$3
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
has() { grep -qw "$1" /proc/cpuinfo; }
avx2=no avx512=no
has avx2 && has fma && avx2=yes
[ $avx2 = yes ] && has avx512f && avx512=yes
echo "CPU: avx2+fma $avx2, avx512f $avx512"

# 1. bench_peak: --help, bad input, one row per instruction set and precision.
"$PEAK" --help >"$WORK/peak.help" 2>&1 && grep -qi 'usage: bench_peak' "$WORK/peak.help" && pass "bench_peak --help" \
  || fail "bench_peak --help"
"$PEAK" --bogus >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && pass "bench_peak --bogus: exit 2" || fail "bench_peak --bogus: exit $rc"
OMP_NUM_THREADS=2 timeout 120 "$PEAK" >"$WORK/peak.md" 2>&1 || fail "bench_peak: exit $?: $(tail -3 "$WORK/peak.md")"
for isa in avx2 avx512; do
  for prec in float double; do
    row=$(grep "^| $isa | $prec | 1 |" "$WORK/peak.md")
    if [ "${!isa}" = yes ]; then
      awk -F'|' '{exit !($5 + 0 > 0)}' <<<"$row" && pass "peak $isa $prec > 0" || fail "peak $isa $prec: '$row'"
      grep -q "^| $isa | $prec | 2 |" "$WORK/peak.md" && pass "peak $isa $prec on 2 threads" \
        || fail "no 2-thread row for $isa $prec"
    else
      grep -q 'not supported' <<<"$row" && pass "peak $isa $prec not supported" || fail "peak $isa $prec: '$row'"
    fi
  done
done

# 2. The table on two shapes (one reported in ns, one in GFLOP/s), 1 and 2 threads: hddp's
#    columns per micro-kernel set the CPU runs, the anchors under the kernels they ran (a
#    second OpenBLAS and BLIS column forced to AVX-512 where the CPU has it), and hddp over the
#    best anchor as a positive number on every row.
GEMM_FILTER='^peak/|/(hddp[-a-z0-9]*|openblas|blis)/s/NN/(32x20x1|128x128x128)/' REPS=2 MIN_TIME=0.02 OUT_DIR="$WORK/json" \
  HDDP_BUILD_DIR="$BUILD" HDDP_BENCH_LOCK='' timeout 400 bash "$ROOT/bench/gemm_table.sh" 1 2 \
  >"$WORK/table.md" 2>"$WORK/table.err" || fail "gemm_table.sh: exit $?: $(tail -3 "$WORK/table.err")"
cat "$WORK/table.md"
header=$(grep '^| shape |' "$WORK/table.md")
for isa in avx2 avx512; do
  if [ "${!isa}" = yes ]; then
    grep -q "| hddp-$isa |" <<<"$header" && pass "column hddp-$isa" || fail "no column hddp-$isa: $header"
  else
    grep -q "hddp-$isa" <<<"$header" && fail "column hddp-$isa on a CPU without it" || pass "no column hddp-$isa"
  fi
done
grep -q '| hddp GFLOP/s (% peak) |' <<<"$header" && pass "column hddp (the configured choice)" || fail "no hddp column: $header"
grep -q '| OpenBLAS [A-Za-z0-9]* |' <<<"$header" && pass "an OpenBLAS column named by its kernel" || fail "no OpenBLAS column: $header"
grep -q '| BLIS [a-z0-9_]* |' <<<"$header" && pass "a BLIS column named by its configuration" || fail "no BLIS column (is libblis-openmp-dev installed?): $header"
if [ $avx512 = yes ]; then
  grep -q '| OpenBLAS SkylakeX |' <<<"$header" && pass "OpenBLAS forced to AVX-512" || fail "no OpenBLAS SkylakeX column: $header"
  grep -q '| BLIS skx |' <<<"$header" && pass "BLIS forced to skx" || fail "no BLIS skx column: $header"
fi
grep -q '^CPU: .*family .*AVX-512F' "$WORK/table.md" && pass "CPU line" || fail "no CPU line"
for t in 1 2; do
  grep -q "^- OMP_NUM_THREADS=$t, OPENBLAS_CORETYPE=unset: OpenBLAS ran .*GFLOP/s (median, interleaved)" "$WORK/table.md" && pass "run line with the interleaved peak, $t thread(s)" || fail "no run line for $t"
  r=$(grep "^| s/NN/32x20x1 | $t |" "$WORK/table.md")
  grep -qE '\| [0-9]+ ns \|' <<<"$r" && pass "32x20x1 at $t in ns" || fail "32x20x1 at $t: '$r'"
  r=$(grep "^| s/NN/128x128x128 | $t |" "$WORK/table.md")
  grep -qE '\| [0-9.]+ \([0-9]+ %\) \|' <<<"$r" && pass "128^3 at $t in GFLOP/s with % peak" || fail "128^3 at $t: '$r'"
  awk -F'|' '{gsub(/[* ]/, "", $(NF - 1)); exit !($(NF - 1) + 0 > 0)}' <<<"$r" \
    && pass "hddp / best anchor at $t is a positive number" || fail "ratio at $t: '$r'"
done

# 2b. A wrong anchor is shown as such and left out of the ratio (a run where BLIS failed the
#     oracle check, made from the real one).
python3 - "$WORK/json/t1-detected.json" "$WORK/wrong.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
for b in run["benchmarks"]:
    if b["run_name"].startswith("gemm/blis/s/NN/128x128x128"):
        b["error_occurred"] = True
        b["error_message"] = "wrong results: C[0][0] = 1, expected 2"
json.dump(run, open(sys.argv[2], "w"))
PY
python3 "$ROOT/bench/gemm_table.py" "$WORK/wrong.json" --csv "$WORK/wrong.csv" >"$WORK/wrong.md" 2>&1 || fail "gemm_table.py on the wrong run: $(tail -3 "$WORK/wrong.md")"
r=$(grep "^| s/NN/128x128x128 | 1 |" "$WORK/wrong.md")
grep -q 'wrong results' <<<"$r" && pass "wrong anchor shown" || fail "wrong anchor not shown: '$r'"
grep -q '| blis ' <<<"$r" && fail "the wrong anchor counted as the best: '$r'" || pass "wrong anchor left out of the ratio"
grep -q '^s/NN/128x128x128,1,hddp / best anchor,' "$WORK/wrong.csv" && pass "CSV has the ratio row" || fail "CSV: $(head -3 "$WORK/wrong.csv")"

# 3. Bad input: a filter that matches nothing, and no binary.
GEMM_FILTER='/no-such-backend/' OUT_DIR="$WORK/json2" HDDP_BUILD_DIR="$BUILD" HDDP_BENCH_LOCK='' REPS=1 \
  timeout 120 bash "$ROOT/bench/gemm_table.sh" 1 >"$WORK/none.md" 2>"$WORK/none.err"; rc=$?
[ $rc -ne 0 ] && grep -q 'no benchmark' "$WORK/none.err" && pass "empty filter refused" \
  || fail "empty filter: rc $rc, $(cat "$WORK/none.err")"
HDDP_BUILD_DIR="$WORK/nowhere" bash "$ROOT/bench/gemm_table.sh" 1 >/dev/null 2>"$WORK/nobin.err"; rc=$?
[ $rc -ne 0 ] && grep -q 'build first' "$WORK/nobin.err" && pass "missing binary refused" || fail "missing binary: rc $rc"

echo "$failures failure(s)"
[ $failures -eq 0 ]
