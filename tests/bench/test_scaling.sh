#!/usr/bin/env bash
# bench/scaling/run.sh end to end, the smallest study (QUICK=1: one short repetition, threads 1
# and 2, the layouts 1x2 and 2x1 of a 2-core node): one CSV row per workload and layout with
# the speed-up over 1 x 1 (exactly 1 there), every program's raw output and command kept, the
# PDF drawn; a build folder without the programs is refused (exit 2).
# Usage: test_scaling.sh <source dir> <build dir> <scratch dir>
set -uo pipefail
SRC=$1 BUILD=$2 WORK=$3
rm -rf "$WORK"; mkdir -p "$WORK"
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }
QUICK=1 CORES=2 HDDP_BUILD_DIR="$BUILD" bash "$SRC/bench/scaling/run.sh" "$WORK/out" >"$WORK/log" 2>&1 ||
  { cat "$WORK/log"; exit 1; }
csv=$WORK/out/scaling.csv
python3 - "$csv" <<'PY' || fail "scaling.csv: $(cat "$csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
have = {(r["workload"], int(r["ranks"]), int(r["threads"])) for r in rows}
for w in ("sgemm_1024", "sgemm_thin", "adam_16Mi", "tanh_16Mi", "mlp_step_bench"):
    for t in (1, 2):
        assert (w, 1, t) in have, (w, t)
for w in ("mlp_step", "mnist_step", "tutorial_step"):
    for p, t in ((1, 1), (1, 2), (2, 1)):
        assert (w, p, t) in have, (w, p, t)
for r in rows:
    assert float(r["value"]) > 0, r
    assert r["cpu_model"] and r["placement"], r
    if (int(r["ranks"]), int(r["threads"])) == (1, 1):
        assert float(r["speedup"]) == 1.0, r
    else:
        assert abs(float(r["efficiency"]) * int(r["cores"]) - float(r["speedup"])) < 1e-3, r
print(f"scaling.csv: {len(rows)} rows")
PY
ls "$WORK/out/raw/"*.cmd >/dev/null 2>&1 || fail "no command lines kept"
[ "$(head -c 4 "$WORK/out/scaling.pdf" 2>/dev/null)" = "%PDF" ] || fail "scaling.pdf is not a PDF"
# scaling.md: one table row per CSV row, the CPU named; the data subset is not left in OUT.
[ "$(grep -c '^| [A-Za-z_0-9]* | [0-9]' "$WORK/out/scaling.md")" -eq "$(($(wc -l <"$csv") - 1))" ] ||
  fail "scaling.md rows != scaling.csv rows: $(cat "$WORK/out/scaling.md")"
grep -q '^CPU: ' "$WORK/out/scaling.md" || fail "scaling.md names no CPU"
[ ! -e "$WORK/out/fmnist" ] || fail "the Fashion-MNIST subset was left in the output folder"
out=$(HDDP_BUILD_DIR="$WORK/nowhere" bash "$SRC/bench/scaling/run.sh" "$WORK/x" 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "build first" <<<"$out" || fail "a build without the programs: exit $rc: $out"
[ "$failed" -eq 0 ] && echo "scaling: the study end to end: ok"
exit "$failed"
