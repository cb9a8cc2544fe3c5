#!/usr/bin/env bash
# End-to-end checks of drivers/gpt_train: a short run on Debian's fortunes on 2 ranks with every
# output, 1 rank x batch 8 equal to 2 ranks x batch 4, the bitwise resume (after a checkpoint and
# after SIGTERM), bf16 products and bf16 gradient buckets, a token file equal to its text, NaN
# stopping every rank, and bad input (damaged token files, a text shorter than one window, bad
# options) stopping every rank with exit 2 and a message.
# Usage: test_gpt_train.sh <gpt_train> <mpiexec> <scratch dir inside the build tree>
set -uo pipefail
BIN=$1 MPIEXEC=$2 WORK=$3
TEXT=/usr/share/games/fortunes
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI=("$MPIEXEC" --oversubscribe --bind-to none --timeout 240)
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/../common/signals.sh"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
[ -e "$TEXT/fortunes" ] || { echo "FAIL: $TEXT missing: scripts/setup-deps.sh installs fortunes"; exit 1; }
SMALL=(--layers 2 --heads 2 --dim 32 --context 32 --batch-size 4 --warmup 5 --no-plot)
val_losses() { awk -F, 'NR > 1 { printf "%s ", $3 }' "$1"; }

# 2 ranks on the fortunes, 60 steps, a validation every 20: every output, learning happened.
d=$WORK/two; mkdir -p "$d"
if "${MPI[@]}" -n 2 "$BIN" "${SMALL[@]}" --plot --steps 60 --eval-every 20 --log-every 10 --sample-tokens 64 \
     --out "$d" --stats-json "$d/stats.json" --export "$d/w.safetensors" >"$d/log" 2>&1; then
  [ "$(wc -l <"$d/metrics.csv")" -eq 4 ] || fail "metrics.csv should have a header and 3 rows"
  awk -F, 'NR == 2 { first = $3 } NR == 4 { exit !($3 < first && $3 < 4.5) }' "$d/metrics.csv" ||
    fail "the validation loss did not fall below 4.5 nats: $(val_losses "$d/metrics.csv")"
  grep -q "^data: [0-9]* training and [0-9]* validation tokens (vocabulary 256) from 43 file(s) of text in $TEXT" "$d/log" ||
    grep -q "^data: .*(vocabulary 256) from [0-9]* file(s) of text in $TEXT" "$d/log" || fail "no data line: $(head -2 "$d/log")"
  [ "$(grep -c '^step [0-9]*/60: train loss' "$d/log")" -eq 3 ] || fail "expected 3 validation lines"
  grep -q '^step 10/60: loss' "$d/log" || fail "no progress line at step 10"
  grep -q '^sample (64 tokens, temperature 0.8, top-k 40, seed 1337):' "$d/log" && grep -q '^--- end of sample' "$d/log" ||
    fail "no sample printed"
  [ "$(wc -c <"$d/sample.txt")" -eq 65 ] || fail "sample.txt should hold the 1-byte prompt and 64 bytes: $(wc -c <"$d/sample.txt")"
  [ "$(head -c 4 "$d/loss.pdf" 2>/dev/null)" = "%PDF" ] || fail "loss.pdf is not a PDF"
  python3 - "$d/stats.json" <<'PY' || fail "stats.json"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l["step"] for l in lines if l["type"] == "eval"] == [20, 40, 60], lines
s = lines[-1]
assert s["type"] == "summary" and s["ranks"] == 2 and s["steps"] == 60 and s["peak_rss_mb"] > 0, s
PY
  grep -q '"0.wte"' "$d/w.safetensors" && grep -q '"1.1.weight"' "$d/w.safetensors" && ! grep -q '"6.weight"' "$d/w.safetensors" ||
    fail "safetensors names (wte once: the head is tied to it)"
  pass "2 ranks: outputs, the loss falls, a sample"
else
  fail "2 rank run exited non-zero: $(tail -3 "$d/log")"
fi

# The rank count: window g of a step is the same for any rank count, so 1 rank x 8 windows and
# 2 ranks x 4 agree up to the order of the float sums.
for pb in "1 8" "2 4"; do
  set -- $pb
  mkdir -p "$WORK/p$1"
  "${MPI[@]}" -n "$1" "$BIN" "${SMALL[@]}" --batch-size "$2" --steps 20 --eval-every 10 --sample-tokens 0 \
    --out "$WORK/p$1" >"$WORK/p$1/log" 2>&1 || fail "P=$1 exited non-zero: $(tail -3 "$WORK/p$1/log")"
done
if [ "$(wc -l <"$WORK/p1/metrics.csv")" -eq 3 ] && [ "$(wc -l <"$WORK/p2/metrics.csv")" -eq 3 ] &&
   paste -d, "$WORK/p1/metrics.csv" "$WORK/p2/metrics.csv" |
   awk -F, 'NR > 1 { for (c = 2; c <= 3; c++) { d = $c - $(c + 5); if (d < 0) d = -d; if (d > 1e-4 * $c) bad = 1 } } END { exit bad }'; then
  pass "1 x 8 and 2 x 4 agree: $(val_losses "$WORK/p1/metrics.csv")/ $(val_losses "$WORK/p2/metrics.csv")"
else
  fail "1 x 8 and 2 x 4 differ: $(paste -d' ' "$WORK/p1/metrics.csv" "$WORK/p2/metrics.csv")"
fi

# Checkpoint and resume: 20 steps with --checkpoint, then --resume to 40, equal to 40 in one go,
# bitwise (weights byte for byte, every column of metrics.csv but the seconds).
C=(--steps 40 --eval-every 10 --sample-tokens 0)
mkdir -p "$WORK/whole" "$WORK/parts"
"${MPI[@]}" -n 2 "$BIN" "${SMALL[@]}" "${C[@]}" --out "$WORK/whole" --export "$WORK/whole/w.st" >"$WORK/whole/log" 2>&1 ||
  fail "whole run: $(tail -3 "$WORK/whole/log")"
"${MPI[@]}" -n 2 "$BIN" "${SMALL[@]}" --steps 40 --eval-every 10 --sample-tokens 0 --out "$WORK/parts" \
  --checkpoint "$WORK/run.ckpt" --debug-stop-after 20 >"$WORK/parts/log1" 2>&1
rc=$?
[ $rc -eq 75 ] || fail "--debug-stop-after 20: exit $rc, expected 75: $(tail -3 "$WORK/parts/log1")"
"${MPI[@]}" -n 2 "$BIN" "${SMALL[@]}" "${C[@]}" --out "$WORK/parts" --checkpoint "$WORK/run.ckpt" --resume \
  --export "$WORK/parts/w.st" >"$WORK/parts/log2" 2>&1 || fail "resumed part: $(tail -3 "$WORK/parts/log2")"
grep -q "resumed from '$WORK/run.ckpt'" "$WORK/parts/log2" || fail "no 'resumed' line: $(head -3 "$WORK/parts/log2")"
if [ "$(cut -d, -f1-4 "$WORK/whole/metrics.csv")" = "$(cut -d, -f1-4 "$WORK/parts/metrics.csv")" ] &&
  [ "$(wc -l <"$WORK/parts/metrics.csv")" -eq 5 ] && cmp -s "$WORK/whole/w.st" "$WORK/parts/w.st"; then
  pass "resume: bitwise the run that never stopped"
else
  fail "resume differs (weights: $(cmp "$WORK/whole/w.st" "$WORK/parts/w.st" 2>&1)): $(paste -d' ' "$WORK/whole/metrics.csv" "$WORK/parts/metrics.csv")"
fi

# SIGTERM to the ranks: every rank finishes its step, rank 0 writes the checkpoint, all exit 75;
# --resume ends bitwise where the run that never stopped ends. Frozen at a state (the handler
# installed, before training can end: signals.sh).
S=("${SMALL[@]}" --steps 400 --eval-every 200 --sample-tokens 0 --check-every 1)
mkdir -p "$WORK/sig-whole" "$WORK/sig"
"${MPI[@]}" -n 2 "$BIN" "${S[@]}" --out "$WORK/sig-whole" --export "$WORK/sig-whole/w.st" >"$WORK/sig-whole/log" 2>&1 ||
  fail "signal reference run: $(tail -3 "$WORK/sig-whole/log")"
"${MPI[@]}" -n 2 "$BIN" "${S[@]}" --out "$WORK/sig" --checkpoint "$WORK/sig/ck" --export "$WORK/sig/w.st" >"$WORK/sig/log" 2>&1 &
pid=$!
signal_ranks "$pid" gpt_train 2 TERM
caught=$CAUGHT
wait "$pid"; rc=$?
if [ "$caught" -eq 1 ] && [ "$rc" -eq 75 ]; then
  grep -q "^gpt_train: SIGTERM: all ranks stopped after .*checkpoint '$WORK/sig/ck' written" "$WORK/sig/log" ||
    fail "no stop message: $(grep gpt_train: "$WORK/sig/log")"
  "${MPI[@]}" -n 2 "$BIN" "${S[@]}" --out "$WORK/sig" --checkpoint "$WORK/sig/ck" --resume --export "$WORK/sig/w.st" \
    >>"$WORK/sig/log" 2>&1 || fail "resume after SIGTERM: $(tail -3 "$WORK/sig/log")"
  [ "$(cut -d, -f1-4 "$WORK/sig-whole/metrics.csv")" = "$(cut -d, -f1-4 "$WORK/sig/metrics.csv")" ] &&
    cmp -s "$WORK/sig-whole/w.st" "$WORK/sig/w.st" && pass "SIGTERM -> checkpoint -> 75 -> resume: bitwise" ||
    fail "after SIGTERM and resume the run differs: $(paste -d' ' "$WORK/sig-whole/metrics.csv" "$WORK/sig/metrics.csv")"
else
  fail "SIGTERM: caught $caught, exit $rc (expected 75): $(tail -3 "$WORK/sig/log")"
fi

# bf16 products (a model whose products a bf16 unit takes) and bf16 gradient buckets: resumes
# bitwise, the weights are not the float run's where a unit exists (float's where none does),
# half the allreduce bytes.
B16=(--layers 1 --heads 2 --dim 64 --context 64 --batch-size 4 --warmup 2 --no-plot --steps 8 --eval-every 4 --sample-tokens 0 --eval-windows 16)
mkdir -p "$WORK/b16" "$WORK/b16parts" "$WORK/f32"
"${MPI[@]}" -n 2 "$BIN" "${B16[@]}" --precision bf16 --grad-dtype bf16 --out "$WORK/b16" --export "$WORK/b16/w.st" \
  --stats-json "$WORK/b16/stats.json" >"$WORK/b16/log" 2>&1 || fail "bf16 run: $(tail -3 "$WORK/b16/log")"
"${MPI[@]}" -n 2 "$BIN" "${B16[@]}" --precision bf16 --grad-dtype bf16 --out "$WORK/b16parts" --checkpoint "$WORK/b16.ckpt" \
  --debug-stop-after 4 >"$WORK/b16parts/log1" 2>&1
"${MPI[@]}" -n 2 "$BIN" "${B16[@]}" --precision bf16 --grad-dtype bf16 --out "$WORK/b16parts" --checkpoint "$WORK/b16.ckpt" \
  --resume --export "$WORK/b16parts/w.st" >"$WORK/b16parts/log2" 2>&1 || fail "bf16 resume: $(tail -3 "$WORK/b16parts/log2")"
"${MPI[@]}" -n 2 "$BIN" "${B16[@]}" --out "$WORK/f32" --export "$WORK/f32/w.st" --stats-json "$WORK/f32/stats.json" \
  >"$WORK/f32/log" 2>&1 || fail "float run: $(tail -3 "$WORK/f32/log")"
cmp -s "$WORK/b16/w.st" "$WORK/b16parts/w.st" && pass "bf16: resume bitwise" || fail "bf16: the resumed run differs"
unit=$(grep -o '"bf16_unit":"[a-z0-9]*"' "$WORK/b16/stats.json" | cut -d'"' -f4)
if [ "$unit" = float ]; then
  grep -q '"grad_dtype":"bf16"' "$WORK/b16/stats.json" || fail "bf16 grads not recorded"
elif cmp -s "$WORK/b16/w.st" "$WORK/f32/w.st"; then
  fail "bf16 on $unit: the weights equal the float run's: nothing rounded"
fi
grep -q "^precision: bf16 products on $unit" "$WORK/b16/log" && pass "bf16: products on $unit" || fail "bf16: no unit line"
b=$(grep -o '"allreduce_bytes_per_step":[0-9]*' "$WORK/b16/stats.json" | cut -d: -f2)
f=$(grep -o '"allreduce_bytes_per_step":[0-9]*' "$WORK/f32/stats.json" | cut -d: -f2)
[ -n "$b" ] && [ -n "$f" ] && [ $((2 * b)) -eq "$f" ] && pass "--grad-dtype bf16: half the bytes ($b of $f)" ||
  fail "--grad-dtype bf16 bytes: '$b' against '$f'"

# A token file of the text trains exactly as the text does.
mkdir -p "$WORK/tok" "$WORK/txt"
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 40) >"$WORK/fox.txt"
timeout 120 "$BIN" --text "$WORK/fox.txt" --write-tokens "$WORK/fox.tok" --out "$WORK/tok" >"$WORK/tok/log0" 2>&1 ||
  fail "--write-tokens: $(tail -3 "$WORK/tok/log0")"
[ "$(head -c 8 "$WORK/fox.tok")" = HDDPTOK1 ] && [ "$(wc -c <"$WORK/fox.tok")" -eq $((32 + 2 * 1800)) ] ||
  fail "the token file: $(wc -c <"$WORK/fox.tok") bytes"
F=("${SMALL[@]}" --context 16 --steps 10 --eval-every 5 --sample-tokens 8 --val-fraction 0.2)
"${MPI[@]}" -n 2 "$BIN" "${F[@]}" --tokens "$WORK/fox.tok" --prompt 84,104 --out "$WORK/tok" --export "$WORK/tok/w.st" \
  >"$WORK/tok/log" 2>&1 || fail "--tokens run: $(tail -3 "$WORK/tok/log")"
"${MPI[@]}" -n 2 "$BIN" "${F[@]}" --text "$WORK/fox.txt" --prompt Th --out "$WORK/txt" --export "$WORK/txt/w.st" \
  >"$WORK/txt/log" 2>&1 || fail "--text run: $(tail -3 "$WORK/txt/log")"
cmp -s "$WORK/tok/w.st" "$WORK/txt/w.st" && grep -q '^\[84\]\[104\]' "$WORK/tok/sample.txt" &&
  pass "a token file trains as its text does" || fail "token file and text differ"

# NaN in one rank's step: every rank stops before the update, exit 3.
mkdir -p "$WORK/nan"
"${MPI[@]}" -n 2 "$BIN" "${SMALL[@]}" --steps 20 --eval-every 10 --debug-inject-nan 5:1 --out "$WORK/nan" >"$WORK/nan/log" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -qi "nan" "$WORK/nan/log" && pass "NaN on rank 1: exit 3" || fail "NaN: exit $rc: $(tail -3 "$WORK/nan/log")"

# expect_usage NAME RANKS WANT ARGS...: exit 2, WANT in the output, nothing trained.
expect_usage() {
  local name=$1 ranks=$2 want=$3
  shift 3
  local o=$WORK/bad-$name; mkdir -p "$o"
  if [ "$ranks" -eq 1 ]; then
    timeout 120 "$BIN" --out "$o" --no-plot "$@" >"$o/log" 2>&1
  else
    "${MPI[@]}" -n "$ranks" "$BIN" --out "$o" --no-plot "$@" >"$o/log" 2>&1
  fi
  local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$want" "$o/log" && ! grep -q '^step' "$o/log" && [ ! -e "$o/metrics.csv" ]; then
    pass "$name: exit 2"
  else
    fail "$name: want exit 2 and '$want', got $rc: $(tail -3 "$o/log")"
  fi
}
python3 - "$WORK" <<'PY'
import struct, sys, zlib
w = sys.argv[1]
def tok(tokens, vocab=256, magic=b"HDDPTOK1", version=1, count=None, crc=None):
    body = b"".join(struct.pack("<H", t) for t in tokens)
    n = len(tokens) if count is None else count
    c = zlib.crc32(body) if crc is None else crc
    return magic + struct.pack("<IIQII", version, vocab, n, c, 0) + body
good = list(range(40)) * 10
files = {"good": tok(good), "magic": tok(good, magic=b"HDDPTOK2"), "version": tok(good, version=2),
         "trunc": tok(good)[:-3], "count": tok(good, count=1 << 40), "crc": tok(good, crc=7),
         "range": tok(good[:-1] + [300]), "vocab": tok(good, vocab=0), "short": tok(list(range(20))), "empty": b""}
for k, v in files.items():
    open(f"{w}/{k}.tok", "wb").write(v)
open(f"{w}/short.txt", "w").write("too short\n")
PY
expect_usage tok-magic 2 "not a token file (the magic is not HDDPTOK1)" --tokens "$WORK/magic.tok"
expect_usage tok-version 2 "token file version 2" --tokens "$WORK/version.tok"
expect_usage tok-truncated 2 "truncated or trailing data" --tokens "$WORK/trunc.tok"
expect_usage tok-count 2 "the header announces 1099511627776 tokens" --tokens "$WORK/count.tok"
expect_usage tok-crc 2 "CRC-32 does not match" --tokens "$WORK/crc.tok"
expect_usage tok-range 2 "token 399 is 300, outside the vocabulary of 256" --tokens "$WORK/range.tok"
expect_usage tok-vocab 2 "vocabulary size 0" --tokens "$WORK/vocab.tok"
expect_usage tok-empty 2 "shorter than the 32-byte header" --tokens "$WORK/empty.tok"
expect_usage tok-missing 2 "cannot open" --tokens "$WORK/nowhere.tok"
expect_usage tok-short 2 "fewer than one window of 33" --tokens "$WORK/short.tok" --context 32
expect_usage text-short 2 "fewer than one window of 65" --text "$WORK/short.txt"
expect_usage text-missing 2 "no such file or folder" --text "$WORK/nowhere/"
expect_usage prompt 2 "--prompt: 'x' is not a token id" --tokens "$WORK/good.tok" --context 8 --prompt 1,x
expect_usage steps 1 "not a multiple of --eval-every" --steps 30 --eval-every 20
expect_usage heads 1 "dim must be a positive multiple of heads" --dim 30 --heads 4
expect_usage auto 1 "--bucket-mb auto" --bucket-mb auto
expect_usage both 1 "excludes" --tokens "$WORK/good.tok" --text "$WORK/short.txt"
expect_usage warmup 1 "--warmup" --warmup 3000
expect_usage precision 1 "--precision" --precision fp8
expect_usage ckpt-other 2 "in the checkpoint" "${SMALL[@]}" --steps 40 --eval-every 10 --lr 0.002 --checkpoint "$WORK/run.ckpt" --resume
if "$BIN" --help >"$WORK/help" 2>&1 && grep -q -- '--tokens' "$WORK/help" && grep -q -- '--eval-every' "$WORK/help" &&
   grep -q -- '--precision' "$WORK/help"; then
  pass "--help"
else
  fail "--help: $(head -3 "$WORK/help")"
fi

echo "$((failures == 0 ? 1 : 0)) passed, $failures failed"
[ $failures -eq 0 ]
