#!/usr/bin/env bash
# End-to-end checks of drivers/poly_train: outputs, accuracy, ranks, sharding, bad input.
# Usage: test_poly_train.sh <poly_train> <mpiexec> <scratch dir inside the build tree>
set -uo pipefail
BIN=$1 MPIEXEC=$2 WORK=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=("$MPIEXEC" --oversubscribe --bind-to none --timeout 120)
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# expect_outputs DIR EPOCHS RANKS: the three files, well-formed.
expect_outputs() {
  local d=$1 epochs=$2 ranks=$3
  [ "$(head -c 4 "$d/errors.pdf" 2>/dev/null)" = "%PDF" ] || fail "$d/errors.pdf is not a PDF"
  [ "$(wc -l <"$d/eval.csv")" -eq 33 ] || fail "$d/eval.csv should have a header and 32 rows"
  [ "$(head -1 "$d/eval.csv")" = "x,f,g,abs_err" ] || fail "eval.csv header"
  [ "$(wc -l <"$d/loss.csv")" -eq $((epochs * ranks + 1)) ] || fail "$d/loss.csv should have $((epochs * ranks)) rows"
}

# 1 rank, defaults (the tutorial): loss <= 0.01 at epoch 900, mean |f - g| <= 1.7.
d=$WORK/one; mkdir -p "$d"
if "$BIN" --out "$d" >"$d/log" 2>&1; then
  expect_outputs "$d" 1000 1
  grep -q '^Running DDP on rank 0/1\.$' "$d/log" || fail "missing 'Running DDP' line"
  [ "$(grep -c '^epoch [0-9]*, loss = .*, rank 0/1 (.*)\.$' "$d/log")" -eq 10 ] || fail "expected 10 loss lines"
  awk '/^epoch 900,/ { gsub(",", "", $5); if ($5 + 0 > 0.01) bad = 1; seen = 1 } END { exit !(seen && !bad) }' "$d/log" \
    || fail "1 rank: loss at epoch 900 above 0.01"
  awk -F, 'NR > 1 { s += $4; n++ } END { exit !(n == 32 && s / n <= 1.7) }' "$d/eval.csv" || fail "mean |f-g| above 1.7"
  grep -q 'plot evaluation result to .*errors.pdf' "$d/log" || fail "no plot line"
  pass "1 rank"
else
  fail "1 rank run exited non-zero: $(tail -3 "$d/log")"
fi

# 3 ranks: every rank logs, every rank's loss <= 0.01 at epoch 900.
d=$WORK/three; mkdir -p "$d"
if "${MPI[@]}" -n 3 "$BIN" --out "$d" >"$d/log" 2>&1; then
  expect_outputs "$d" 1000 3
  for r in 0 1 2; do
    grep -q "^Running DDP on rank $r/3\.$" "$d/log" || fail "rank $r did not start"
    awk -v r="$r/3" '/^epoch 900,/ && $7 == r { gsub(",", "", $5); if ($5 + 0 <= 0.01) ok = 1 } END { exit !ok }' "$d/log" \
      || fail "rank $r: loss at epoch 900 above 0.01"
  done
  pass "3 ranks"
else
  fail "3 rank run exited non-zero: $(tail -3 "$d/log")"
fi

# Sharded sampling: one global batch of batch-size x P drawn from the seed, split over the
# ranks, so 1 rank x 36 and 3 ranks x 12 train on the same data and agree (up to the order
# of the float sums: 4e-7 here). With SGD: Adam divides a gradient scale out, so with it a
# reducer that summed instead of averaging would pass; with SGD that is the learning rate x 3
# (3e-2 apart).
for pb in "1 36" "3 12"; do
  set -- $pb
  mkdir -p "$WORK/sh$1"
  "${MPI[@]}" -n "$1" "$BIN" --sampling sharded --batch-size "$2" --epochs 300 --optimizer sgd --lr 0.05 --no-plot --out "$WORK/sh$1" \
    >"$WORK/sh$1/log" 2>&1 || fail "sharded P=$1 exited non-zero"
done
# 32 rows in each (a file holding only its header would compare as equal).
if [ "$(wc -l <"$WORK/sh1/eval.csv")" -eq 33 ] && [ "$(wc -l <"$WORK/sh3/eval.csv")" -eq 33 ] &&
   paste -d, "$WORK/sh1/eval.csv" "$WORK/sh3/eval.csv" | awk -F, 'NR > 1 { d = $3 - $7; if (d < 0) d = -d; if (d > 1e-3 * (1 + ($3 < 0 ? -$3 : $3))) bad = 1 } END { exit bad }'; then
  pass "sharded sampling does not depend on P"
else
  fail "sharded: P=1 and P=3 predictions differ (or eval.csv is short)"
fi

# Every reducer mode: identical results.
for mode in "" "--reduce-mode blocking" "--reduce-mode thread"; do
  tag=$(echo "m$mode" | tr -d ' -'); mkdir -p "$WORK/$tag"
  # shellcheck disable=SC2086
  "${MPI[@]}" -n 2 "$BIN" --epochs 200 --no-plot $mode --out "$WORK/$tag" >"$WORK/$tag/log" 2>&1 || fail "mode '$mode' failed"
done
same=1
for tag in mreducemodeblocking mreducemodethread; do
  cmp -s "$WORK/m/eval.csv" "$WORK/$tag/eval.csv" || { same=0; fail "reducer mode $tag differs from the default"; }
done
[ $same -eq 1 ] && pass "reducer modes agree"

# --stats-json on 2 ranks: JSON lines, a progress object per loss line of rank 0, then the
# summary with both ranks' timings and the mode; the same figures --stats prints.
d=$WORK/statsjson; mkdir -p "$d"
if "${MPI[@]}" -n 2 "$BIN" --epochs 300 --log-every 100 --no-plot --reduce-mode thread --stats --stats-json "$d/s.jsonl" \
    --out "$d" >"$d/log" 2>&1; then
  if python3 - "$d/s.jsonl" "$d/log" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert all(l["schema"] == "hddp.poly_train.stats/1" for l in lines), "a line without the schema"
progress, summary = lines[:-1], lines[-1]
assert [p["type"] for p in progress] == ["progress"] * 3 and [p["epoch"] for p in progress] == [0, 100, 200], progress
assert summary["type"] == "summary" and summary["ranks"] == 2 and summary["epochs"] == 300, summary
assert summary["reducer"]["mode"] == "thread" and summary["reducer"]["buckets"] >= 1, summary["reducer"]
assert [r["rank"] for r in summary["per_rank"]] == [0, 1], summary["per_rank"]
assert all(r["total_s"] > 0 and r["comm_s"] >= r["exposed_s"] >= 0 for r in summary["per_rank"]), summary["per_rank"]
assert len(summary["placement"]) == 2 and summary["evaluation"]["points"] == 32, summary
# rank 0's total_s as --stats prints it (6 decimals)
row0 = next(l.split() for l in open(sys.argv[2]) if l.startswith("0 "))
assert abs(float(row0[4]) - summary["per_rank"][0]["total_s"]) < 1e-6, (row0, summary["per_rank"][0])
print(f"stats-json: {len(lines)} lines")
PY
  then pass "--stats-json: progress lines and the summary"
  else fail "--stats-json: $(head -c 400 "$d/s.jsonl")"
  fi
else
  fail "--stats-json run exited non-zero: $(tail -3 "$d/log")"
fi

# --trace on 3 ranks: one valid JSON document (chrome://tracing and Perfetto refuse anything
# else), every rank's forward/backward/optimizer once per epoch, and every bucket's allreduce
# once per epoch on every rank (a wider model and small buckets give several).
d=$WORK/trace; mkdir -p "$d"
if "${MPI[@]}" -n 3 "$BIN" --epochs 20 --hidden 64,64 --bucket-mb 0.004 --first-bucket-mb 0.004 --no-plot --trace "$d/trace.json" \
    --out "$d" >"$d/log" 2>&1; then
  if python3 - "$d/trace.json" 20 3 <<'PY'
import collections, json, sys
path, epochs, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
events = json.load(open(path))["traceEvents"]
count = collections.Counter((e["pid"], e["name"]) for e in events)
assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events), "an event that is not complete"
buckets = {n for (_, n) in count if n.startswith("allreduce bucket ")}
assert len(buckets) >= 2, f"expected several buckets, got {sorted(buckets)}"
for r in range(ranks):
    for n in ["forward", "backward", "optimizer", *sorted(buckets)]:
        assert count[(r, n)] == epochs, f"rank {r}: {count[(r, n)]} '{n}' events, expected {epochs}"
print(f"trace: {len(events)} events, {len(buckets)} buckets, {ranks} ranks")
PY
  then pass "--trace on 3 ranks is valid JSON with every rank's events"
  else fail "--trace on 3 ranks: $(head -c 300 "$d/trace.json")"
  fi
else
  fail "--trace run exited non-zero: $(tail -3 "$d/log")"
fi

# --help lists every option and exits 0.
if out=$("$BIN" --help); then
  for f in --epochs --batch-size --lr --optimizer --function --hidden --seed --sampling --log-every --out \
           --plot --no-plot --bucket-mb --first-bucket-mb --reduce-mode --threads --trace --stats \
           --stats-json; do
    grep -q -- "$f" <<<"$out" || fail "--help does not mention $f"
  done
  pass "--help"
else
  fail "--help exited non-zero"
fi

# Bad input: exit code 2 with a message naming the flag, before training. Every case on 1 rank
# (a singleton: MPI without mpiexec); on 2 ranks one case of each path a usage error takes (the
# parse, agreed over the ranks; the checks after MPI starts: --out, a file option's directory),
# since the rank count is not what the other cases are about.
bad_cases=(
  "--epochs 0|--epochs" "--epochs -5|--epochs" "--epochs ten|--epochs" "--batch-size 0|--batch-size"
  "--lr 0|--lr" "--lr -1|--lr" "--lr abc|--lr" "--hidden ,|--hidden" "--hidden 20,,3|--hidden"
  "--hidden 0|--hidden" "--optimizer rmsprop|--optimizer" "--function sin|--function" "--sampling x|--sampling"
  "--bogus|unknown option" "--epochs|missing value" "--out /proc/hddp-no-such-dir|--out"
  "--log-every 0|--log-every" "--bucket-mb 0|--bucket-mb" "--threads -1|--threads"
  "--reduce-mode overlap|--reduce-mode" "--gemm fast|--gemm" "--timeout 0.5|--timeout" "--momentum 1|--momentum"
  "--no-overlap|write --reduce-mode blocking" "--progress thread|removed; write --reduce-mode"
  "--trace /proc/hddp-no-such-dir/t.json|--trace" "--stats-json /proc/hddp-no-such-dir/s.jsonl|--stats-json"
  "--checkpoint-every 5|--checkpoint-every: needs --checkpoint" "--resume|--resume: needs --checkpoint"
)
two_ranks=("--lr abc" "--out /proc/hddp-no-such-dir" "--trace /proc/hddp-no-such-dir/t.json")
for c in "${bad_cases[@]}"; do
  args=${c%%|*} want=${c##*|}
  launches=("timeout 120 $BIN")
  for t in "${two_ranks[@]}"; do [ "$t" = "$args" ] && launches+=("${MPI[*]} -n 2 $BIN"); done
  for launch in "${launches[@]}"; do
    # shellcheck disable=SC2086
    out=$($launch --out "$WORK" $args 2>&1); rc=$?
    [ $rc -eq 2 ] || fail "'$args' ($launch): exit code $rc, expected 2"
    grep -q -- "$want" <<<"$out" || fail "'$args' ($launch): message does not name '$want': $out"
    grep -q "^epoch" <<<"$out" && fail "'$args': training started"
  done
done
pass "bad input"

# The ranks parse their own command line and --config file: one that differs between ranks,
# or a file one rank cannot read, stops every rank with exit 2 (it used to leave the others
# waiting in their first collective). MPMD launches give the ranks different arguments.
d=$WORK/agree; mkdir -p "$d"; echo "epochs = 5" >"$d/c.toml"
out=$("$MPIEXEC" --oversubscribe --bind-to none --timeout 120 -n 1 "$BIN" --out "$d" --epochs 5 : \
      -n 1 "$BIN" --out "$d" --epochs 6 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "differs between ranks" <<<"$out" && pass "different command lines: exit 2" \
  || fail "different command lines: exit $rc: $out"
out=$("$MPIEXEC" --oversubscribe --bind-to none --timeout 120 -n 1 "$BIN" --out "$d" --config "$d/c.toml" : \
      -n 1 "$BIN" --out "$d" --config "$d/missing.toml" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "could not be parsed on every rank" <<<"$out" && pass "a --config one rank cannot read: exit 2" \
  || fail "a --config one rank cannot read: exit $rc: $out"
[ -e "$d/eval.csv" ] && fail "trained although the ranks disagreed"

# No gnuplot (HDDP_GNUPLOT names the program, here one that does not exist): a warning, the
# CSVs, exit 0.
d=$WORK/nognuplot; mkdir -p "$d"
if HDDP_GNUPLOT="$d/no-such-gnuplot" "$BIN" --epochs 50 --out "$d" >"$d/log" 2>&1; then
  grep -q "gnuplot not found" "$d/log" || fail "no warning without gnuplot"
  [ -s "$d/eval.csv" ] && [ -s "$d/loss.csv" ] || fail "CSVs missing without gnuplot"
  [ -e "$d/errors.pdf" ] && fail "errors.pdf written without gnuplot?"
  pass "without gnuplot"
else
  fail "run without gnuplot exited non-zero: $(tail -3 "$d/log")"
fi

echo "$((failures == 0 ? 1 : 0)) passed, $failures failed"
[ $failures -eq 0 ]
