#!/usr/bin/env bash
# The sanitizer build catches faults, and its suppressions hide only Open MPI's leaks:
# tests/sanitizers/canary.cpp run in each mode, as a plain process (an MPI singleton).
# Usage: test_canary.sh <canary>
canary=$1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect MODE RC REGEX: exit status (0, or "nonzero") and a line of the report
expect() {
  local mode=$1 want=$2 re=$3 out rc=0
  out=$(timeout 60 "$canary" "$mode" 2>&1) || rc=$?
  if [ "$want" = 0 ] && [ "$rc" -ne 0 ]; then fail "$mode: exit $rc, expected 0: $(tail -20 <<<"$out")"; return; fi
  if [ "$want" = nonzero ] && [ "$rc" -eq 0 ]; then fail "$mode: exit 0, the sanitizer did not stop it"; return; fi
  [ "$rc" -ne 124 ] || { fail "$mode: timed out"; return; }
  grep -Eq -- "$re" <<<"$out" || { fail "$mode: no '$re' in: $(tail -20 <<<"$out")"; return; }
  echo "ok: $mode (exit $rc)"
}
expect clean 0 "canary clean: done"
expect overflow nonzero "AddressSanitizer: heap-buffer-overflow"
expect leak nonzero "LeakSanitizer: detected memory leaks"
expect ubsan nonzero "runtime error: signed integer overflow"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
