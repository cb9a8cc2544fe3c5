#!/usr/bin/env bash
# bench/conv_vs_pytorch.sh end to end on the built tree (no configure, no build), one short
# round at 1 and 2 threads: the CSV has every conv row and pass for hddp, OpenBLAS and PyTorch at
# each thread count with positive seconds and GFLOP/s; the table has one row per conv row, pass
# and thread count with numbers and a positive ratio; a build without bench_layers is refused
# (exit 2). Timings are not checked.
# Usage: test_conv_vs_pytorch.sh <source dir> <build dir> <scratch dir inside the build tree>
set -uo pipefail
SRC=$1 BUILD=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
HDDP_NO_BUILD=1 HDDP_BUILD_DIR="$BUILD" THREADS="1 2" REPS=1 MIN_TIME=0.01 timeout 240 \
  bash "$SRC/bench/conv_vs_pytorch.sh" "$WORK/out" >"$WORK/log" 2>&1 || { cat "$WORK/log"; exit 1; }
cat "$WORK/out/conv_vs_pytorch.md"
python3 - "$WORK/out/conv_vs_pytorch.csv" <<'PY' || fail "conv_vs_pytorch.csv: $(cat "$WORK/out/conv_vs_pytorch.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
have = {(r["row"], r["pass"], r["impl"], r["threads"]) for r in rows}
for row in ("c1_1x28x28_to_32", "c2_32x14x14_to_64"):
    for p in ("fwd", "fwd+bwd"):
        for impl in ("hddp", "im2col", "openblas", "pytorch"):
            for t in ("1", "2"):
                assert (row, p, impl, t) in have, (row, p, impl, t)
assert len(rows) == 32, len(rows)
for r in rows:
    assert float(r["seconds"]) > 0 and float(r["gflops"]) > 0 and r["round"] == "1" and "family" in r["cpu"], r
PY
md=$WORK/out/conv_vs_pytorch.md
head -1 "$md" | grep -q '^CPU: .*(family [0-9]*, model [0-9]*)' || fail "no CPU line: $(head -1 "$md")"
for row in c1_1x28x28_to_32 c2_32x14x14_to_64; do
  for p in fwd fwd+bwd; do
    for t in 1 2; do
      n=$(grep -cF "| $row | $p | $t |" "$md")
      [ "$n" -eq 1 ] || fail "$n table rows for $row $p $t"
      grep -F "| $row | $p | $t |" "$md" | grep -qE '^(\| [^|]+ ){3}(\| [0-9]+\.[0-9] ){4}\| [0-9]+\.[0-9]+ \|$' \
        && awk -F'|' '{exit !($(NF - 1) + 0 > 0)}' <<<"$(grep -F "| $row | $p | $t |" "$md")" \
        || fail "row $row $p $t: $(grep -F "| $row | $p | $t |" "$md")"
    done
  done
done
[ "$(grep -c '^| c[12]_' "$md")" -eq 8 ] || fail "not 8 table rows"
grep -q '^Command: `THREADS="1 2" REPS=1 MIN_TIME=0.01 bash bench/conv_vs_pytorch.sh`' "$md" || fail "no command line"
out=$(HDDP_NO_BUILD=1 HDDP_BUILD_DIR="$WORK/nowhere" bash "$SRC/bench/conv_vs_pytorch.sh" "$WORK/x" 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "build first" <<<"$out" || fail "a build without bench_layers: exit $rc: $out"
[ "$failed" -eq 0 ] && echo "conv_vs_pytorch: end to end: ok"
exit "$failed"
