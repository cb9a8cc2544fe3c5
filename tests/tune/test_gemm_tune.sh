#!/usr/bin/env bash
# gemm_tune end to end (a --quick search: the mechanics, not the speed): it writes a wisdom
# entry for this CPU (every shape class's tile) that the library then runs with, reads files
# written before the shape classes, keeps other CPUs' entries, writes
# nothing under --dry-run, and refuses bad input (unknown option, corrupt or foreign file, a
# place it cannot write) with a message and a non-zero exit; the library refuses corrupt wisdom.
# Usage: test_gemm_tune.sh <gemm_tune> <scratch dir inside the build tree>
set -uo pipefail
TUNE=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
export HDDP_GEMM_WISDOM="$WORK/none.json" OMP_NUM_THREADS=1
unset HDDP_GEMM_KERNEL
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

"$TUNE" --help >"$WORK/help" 2>&1 && grep -q -- '--quick' "$WORK/help" && grep -q 'OMP_NUM_THREADS' "$WORK/help" \
  && pass "--help" || fail "--help: $(cat "$WORK/help")"
"$TUNE" --bogus >"$WORK/bogus" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q 'bogus' "$WORK/bogus" && pass "unknown option refused (exit $rc)" || fail "--bogus: rc $rc"
"$TUNE" --rounds 0 >"$WORK/rounds" 2>&1; rc=$?
[ $rc -ne 0 ] && pass "--rounds 0 refused" || fail "--rounds 0 accepted"

key=$("$TUNE" --show | sed -n 's/^cpu: //p')
[ -n "$key" ] && pass "--show names the CPU: $key" || fail "--show: no cpu line"
"$TUNE" --show | grep -q '^choice: .*from built-in' && pass "no wisdom: the built-in choice" \
  || fail "no wisdom: $("$TUNE" --show)"

# A file with another CPU's entry: tuning adds ours and keeps it.
cat >"$WORK/w.json" <<'J'
{"format": "hddp-gemm-wisdom-1", "cpus": {"Other family 1 model 1: Other CPU": {"float": {"kernel": "portable", "blocking": {"portable": {"MC": 12, "KC": 64, "NC": 64}}}, "double": {"kernel": "portable", "blocking": {"portable": {"MC": 12, "KC": 64, "NC": 64}}}}}}
J
timeout 300 "$TUNE" --quick --rounds 1 --out "$WORK/w.json" >"$WORK/tune.log" 2>&1; rc=$?
[ $rc -eq 0 ] && pass "quick tuning" || fail "quick tuning: rc $rc: $(tail -5 "$WORK/tune.log")"
grep -q '^float: chosen ' "$WORK/tune.log" && grep -q '^double: chosen ' "$WORK/tune.log" \
  && pass "a choice per precision" || fail "no choice lines: $(tail -5 "$WORK/tune.log")"
python3 - "$WORK/w.json" "$key" <<'PY' && pass "wisdom holds this CPU's entry and the other's" || fail "wisdom file: $(cat "$WORK/w.json")"
import json, sys
w = json.load(open(sys.argv[1]))
assert w["format"] == "hddp-gemm-wisdom-1"
e = w["cpus"][sys.argv[2]]
for prec in ("float", "double"):
    k = e[prec]["kernel"]
    assert k in ("avx512", "avx2", "portable"), k
    b = e[prec]["blocking"][k]
    assert all(b[x] > 0 for x in ("MR", "NR", "MC", "KC", "NC")), b
    for cls in ("narrow", "thin", "long_k"):  # the other shape classes' tiles
        assert all(b[cls][x] > 0 for x in ("MR", "NR", "MC", "KC", "NC")), b
        assert b[cls]["MC"] % b[cls]["MR"] == 0, b
assert e["threads"] == 1 and e["search"] == "quick"
assert "Other family 1 model 1: Other CPU" in w["cpus"]
PY
HDDP_GEMM_WISDOM="$WORK/w.json" "$TUNE" --show >"$WORK/show" 2>&1
grep -q "^choice: float .*from wisdom $WORK/w.json" "$WORK/show" && pass "the library runs the wisdom's choice" \
  || fail "not from wisdom: $(cat "$WORK/show")"
python3 - "$WORK/w.json" "$key" "$WORK/show" <<'PY' && pass "--show names the wisdom's class tiles" || fail "classes: $(cat "$WORK/show")"
import json, re, sys
e = json.load(open(sys.argv[1]))["cpus"][sys.argv[2]]["float"]
b = e["blocking"][e["kernel"]]
line = next(l for l in open(sys.argv[3]) if l.startswith("classes: float "))
for cls in ("narrow", "thin", "long_k"):
    t = b[cls]
    want = f"{cls} {t['MR']}x{t['NR']} MC {t['MC']} KC {t['KC']} NC {t['NC']}"
    assert want in line, (want, line)
PY
# A file written before the shape classes (no "narrow"/"thin", no MR/NR) still reads.
cat >"$WORK/old.json" <<J
{"format": "hddp-gemm-wisdom-1", "cpus": {"$key": {"float": {"kernel": "portable", "blocking": {"portable": {"MC": 12, "KC": 64, "NC": 64}}}, "double": {"kernel": "portable", "blocking": {"portable": {"MC": 12, "KC": 64, "NC": 64}}}}}}
J
HDDP_GEMM_WISDOM="$WORK/old.json" "$TUNE" --show >"$WORK/oldshow" 2>&1
grep -q "^choice: float portable 6x16 MC 12 KC 64 NC 64; .*from wisdom $WORK/old.json" "$WORK/oldshow" \
  && grep -q "^classes: float narrow 6x16 MC 144 KC 256 NC 4080" "$WORK/oldshow" \
  && pass "a wisdom file without the classes: its blocking, the built-in class tiles" || fail "old wisdom: $(cat "$WORK/oldshow")"
HDDP_GEMM_WISDOM="$WORK/w.json" HDDP_GEMM_KERNEL=portable "$TUNE" --show >"$WORK/show2" 2>&1
grep -q "^choice: float portable .*from HDDP_GEMM_KERNEL=portable, wisdom" "$WORK/show2" \
  && pass "HDDP_GEMM_KERNEL overrides the wisdom's set" || fail "forced: $(cat "$WORK/show2")"

# --dry-run writes nothing.
timeout 300 "$TUNE" --quick --rounds 1 --dry-run --out "$WORK/dry.json" >"$WORK/dry.log" 2>&1; rc=$?
[ $rc -eq 0 ] && [ ! -e "$WORK/dry.json" ] && grep -q 'not written' "$WORK/dry.log" && pass "--dry-run writes nothing" \
  || fail "--dry-run: rc $rc, $(tail -2 "$WORK/dry.log")"

# Bad files: corrupt JSON refused by the tuner and by the library; a place it cannot write.
echo '{"format": "hddp-gemm-wisdom-1", "cpus": {' >"$WORK/bad.json"
"$TUNE" --quick --rounds 1 --out "$WORK/bad.json" >"$WORK/bad.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q 'not JSON' "$WORK/bad.log" && grep -q 'bad.json' "$WORK/bad.log" \
  && pass "corrupt file not overwritten" || fail "corrupt file: rc $rc, $(tail -2 "$WORK/bad.log")"
grep -q '"cpus": {$' "$WORK/bad.json" && pass "corrupt file left as it was" || fail "corrupt file changed"
HDDP_GEMM_WISDOM="$WORK/bad.json" "$TUNE" --show >"$WORK/badshow" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "GEMM wisdom $WORK/bad.json: not JSON" "$WORK/badshow" && grep -q 'gemm_tune' "$WORK/badshow" \
  && pass "library refuses corrupt wisdom, says what to do" || fail "library on corrupt wisdom: rc $rc, $(cat "$WORK/badshow")"
touch "$WORK/file"
"$TUNE" --quick --rounds 1 --out "$WORK/file/w.json" >"$WORK/nodir.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q 'cannot' "$WORK/nodir.log" && pass "unwritable place refused" \
  || fail "unwritable: rc $rc, $(tail -2 "$WORK/nodir.log")"

echo "$failures failure(s)"
[ $failures -eq 0 ]
