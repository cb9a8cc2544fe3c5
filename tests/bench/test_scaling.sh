#!/usr/bin/env bash
# bench/scaling end to end with the smallest sweep (threads 1..2, ranks 1..2, one round):
# every CSV has its header and the expected rows with sane numbers, every PDF is a PDF,
# --plot-only redraws them, bad input is refused; and poly_train's --bucket-mb auto.
# Usage: test_scaling.sh <scaling> <poly_train> <mpiexec> <scratch dir inside the build tree>
set -uo pipefail
BIN=$1 POLY=$2 MPIEXEC=$3 WORK=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Runs queue behind other benchmarks for at most 120 s each, then go on without the lock (a
# correctness test; its timings are not used).
LOCK=${HDDP_BENCH_LOCK-/tmp/hddp-bench.lock}
rm -rf "$WORK" && mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# 1. --help and bad input (exit 2, message names the problem).
"$BIN" --help >"$WORK/help" 2>&1 && grep -q -- '--studies' "$WORK/help" && grep -q -- '--max-threads' "$WORK/help" \
  && pass "--help" || fail "--help"
expect_usage() {  # expect_usage PATTERN ARGS...: exit code 2 and PATTERN in stderr
  local pat=$1; shift
  "$BIN" "$@" >"$WORK/usage.out" 2>"$WORK/usage.err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$pat" "$WORK/usage.err"; then pass "refused: $*"; else fail "'$*': rc $rc, $(cat "$WORK/usage.err")"; fi
}
expect_usage "unknown option '--bogus'" --bogus
expect_usage "unknown study 'gpu'" --studies gemm,gpu
expect_usage "--threads: expected an integer" --threads 1,x
expect_usage "--gemm-shapes: '12x3' is not" --gemm-shapes 12x3
expect_usage "needs --ranks 2 or more" --studies buckets --ranks 1 --out "$WORK/b1" --lock ''
"$BIN" --studies poly --poly-train "$WORK/nonexistent" --out "$WORK/np" --lock '' >"$WORK/np.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "no poly_train at '$WORK/nonexistent'" "$WORK/np.log" && pass "missing poly_train" \
  || fail "missing poly_train: rc $rc, $(tail -2 "$WORK/np.log")"

# 2. The smallest sweep of every study but placement.
OUT=$WORK/out
if timeout 800 "$BIN" --quick --threads 1,2 --ranks 2 --studies gemm,step,ranks,poly,buckets --out "$OUT" \
     --poly-train "$POLY" --mpiexec "$MPIEXEC" --lock "$LOCK" --lock-wait 120 --timeout 240 >"$WORK/log" 2>&1; then
  pass "scaling --quick ran"
else
  fail "scaling --quick exited non-zero: $(tail -20 "$WORK/log")"
fi
grep -q '^\[gemm\] wrote .*/gemm.csv (16 rows)' "$WORK/log" || fail "no gemm progress line"
grep -q 'gemm round 1/1, 2 thread(s)' "$WORK/log" || fail "no per-run progress line"

# check_csv FILE HEADER ROWS AWK-CONDITION DESCRIPTION: header exact, ROWS data rows, every row
# with as many fields as the header and satisfying the condition (awk, -F,).
check_csv() {
  local f=$OUT/$1 header=$2 rows=$3 cond=$4 what=$5
  if [ ! -s "$f" ]; then fail "$1 missing"; return; fi
  [ "$(head -1 "$f")" = "$header" ] || fail "$1 header: $(head -1 "$f")"
  [ "$(($(wc -l <"$f") - 1))" -eq "$rows" ] || fail "$1: expected $rows rows, got $(($(wc -l <"$f") - 1))"
  local nf; nf=$(head -1 "$f" | awk -F, '{print NF}')
  awk -F, -v nf="$nf" 'NR > 1 && NF != nf { exit 1 }' "$f" || fail "$1: a row has the wrong number of fields"
  awk -F, "NR > 1 && !($cond) { print \"bad row: \" \$0; bad = 1 } END { exit bad }" "$f" || fail "$1: $what"
  pass "$1 ($rows rows; $what)"
}
# gemm: 4 shapes x 2 backends x 2 thread counts; time > 0, GFLOP/s = 2MNK/time, efficiency 1 at 1 thread.
check_csv gemm.csv "shape,trans,M,N,K,backend,placement,threads,reps,time_s,time_min_s,time_max_s,gflops,speedup,efficiency,cpu_util,load" 16 \
  '$10 > 0 && ($13 - 2e-9 * $3 * $4 * $5 / $10) ^ 2 < (1e-3 * $13) ^ 2 && ($8 != 1 || $15 == 1) && ($8 == 1 || $8 == 2) && ($6 == "hddp" || $6 == "openblas") && $14 > 0' \
  "GFLOP/s consistent with the time, efficiency 1 at 1 thread"
for s in fwd dx dw sq2048; do
  [ "$(grep -c "^$s," "$OUT/gemm.csv")" -eq 4 ] || fail "gemm.csv: shape $s should have 4 rows"
done
awk -F, '$1 == "fwd" && !($3 == 256 && $4 == 1024 && $5 == 1024 && $2 == "NT") { exit 1 }' "$OUT/gemm.csv" || fail "fwd shape"
awk -F, '$1 == "dw" && !($3 == 1024 && $4 == 1024 && $5 == 256 && $2 == "TN") { exit 1 }' "$OUT/gemm.csv" || fail "dw shape"
# step: 2 backends x 2 thread counts; efficiency = speedup / threads.
check_csv step.csv "model,backend,placement,threads,reps,time_s,time_min_s,time_max_s,gflops,speedup,efficiency,cpu_util,load" 4 \
  '$6 > 0.001 && $6 < 10 && $9 > 0 && ($11 - $10 / $4) ^ 2 < 1e-6' "time in (1 ms, 10 s), efficiency = speedup / threads"
DDP_HEADER="model,ranks,threads,placement,progress,cap,cap_bytes,first_cap_bytes,buckets,reps,steps,step_s,step_min_s,step_max_s,compute_s,exposed_s,exposed_min_s,exposed_max_s,comm_s,forward_s,backward_s,optim_s,predicted_exposed_s,predicted_comm_s,alpha_s,beta_s_per_byte,caps_seen,load"
# ranks: 1 and 2 ranks; compute + exposed = step; 25 MiB cap: 2 buckets (the first holds 1 MiB).
check_csv ranks.csv "$DDP_HEADER" 2 \
  '$2 == NR - 1 && $12 > 0 && $16 >= 0 && ($15 + $16 - $12) ^ 2 < 1e-10 && $7 == 26214400 && $9 == 2 && $11 == 2' \
  "ranks 1..2, compute + exposed = step, 2 buckets"
# buckets: 2 ranks x caps auto, 1, 25; auto's cap is one the model predicts for, fixed caps exact.
check_csv buckets.csv "$DDP_HEADER" 3 \
  '$2 == 2 && ($6 == "auto" || ($6 == 1 && $7 == 1048576) || ($6 == 25 && $7 == 26214400)) && $7 > 0 && $23 >= 0 && $25 >= 0 && $26 > 0 && $12 > 0' \
  "2 ranks, caps auto/1/25 with predictions and the alpha-beta fit"
[ "$(cut -d, -f6 "$OUT/buckets.csv" | tail -n +2 | tr '\n' ' ')" = "auto 1 25 " ] || fail "buckets.csv caps order"
# poly: threads 1, 2 at 1 rank, then 2 ranks x 1 thread; per-epoch times.
check_csv poly.csv "ranks,threads,placement,reps,epochs,step_s,step_min_s,step_max_s,compute_s,exposed_s,comm_s,forward_s,backward_s,optim_s,speedup,efficiency,load" 3 \
  '$5 == 3 && $6 > 0 && $9 > 0 && $10 >= 0 && (($1 == 1 && $15 > 0) || ($1 == 2 && $15 == ""))' \
  "3 epochs each, speedup only for the 1-rank thread sweep"
[ "$(cut -d, -f1,2 "$OUT/poly.csv" | tail -n +2 | tr '\n' ' ')" = "1,1 1,2 2,1 " ] || fail "poly.csv runs"
grep -q '^machine: ' "$OUT/machine.txt" || fail "machine.txt"

# 3. PDFs: valid, and redrawn by --plot-only.
for p in gemm step ranks poly buckets; do
  [ "$(head -c 4 "$OUT/$p.pdf" 2>/dev/null)" = "%PDF" ] || fail "$p.pdf is not a PDF"
done
[ ! -e "$OUT/placement.pdf" ] || fail "placement.pdf drawn although not measured"
rm -f "$OUT"/*.pdf
"$BIN" --plot-only --out "$OUT" >"$WORK/replot.log" 2>&1 || fail "--plot-only: $(tail -5 "$WORK/replot.log")"
n=0
for p in gemm step ranks poly buckets; do [ "$(head -c 4 "$OUT/$p.pdf" 2>/dev/null)" = "%PDF" ] && n=$((n + 1)); done
[ $n -eq 5 ] && pass "5 PDFs, redrawn by --plot-only" || fail "--plot-only drew $n of 5 PDFs"

# 4. poly_train --bucket-mb auto --first-bucket-mb auto at 2 ranks: rank 0 prints the caps,
# training runs, every rank agrees (the test would hang or fail otherwise).
d=$WORK/auto; mkdir -p "$d"
if timeout 120 "$MPIEXEC" -n 2 --oversubscribe --bind-to none "$POLY" --hidden 256,256 --batch-size 64 --epochs 30 \
     --bucket-mb auto --first-bucket-mb auto --stats --no-plot --out "$d" >"$d/log" 2>&1; then
  if grep -Eq '^bucket caps: auto -> [0-9.]+ [KM]?i?B( \(first bucket [0-9.]+ [KM]?i?B\))?, [0-9]+ buckets' "$d/log" \
     && [ "$(grep -c '^bucket caps: auto' "$d/log")" -eq 1 ] && grep -q '^buckets: [0-9]' "$d/log"; then
    pass "poly_train --bucket-mb auto"
  else
    fail "poly_train --bucket-mb auto: no (single) 'bucket caps: auto -> ...' line: $(grep -i bucket "$d/log")"
  fi
else
  fail "poly_train --bucket-mb auto exited non-zero: $(tail -5 "$d/log")"
fi
"$POLY" --bucket-mb autox --out "$d" >"$d/bad" 2>&1
[ $? -eq 2 ] && grep -q -- "--bucket-mb: expected a number or auto" "$d/bad" && pass "--bucket-mb autox refused" \
  || fail "--bucket-mb autox: $(cat "$d/bad")"

# 5. The progress thread on the core OpenMP leaves free (ReducerOptions::progress_cpu from
# spare_progress_cpu): 1 rank on 2 cores, OpenMP on 1 - exactly one thread (the progress
# thread) runs on the second core, every other one (main, Open MPI's) on the first.
if [ "$(nproc)" -ge 2 ]; then
  d=$WORK/pcore; mkdir -p "$d"
  if OMP_PLACES=cores OMP_PROC_BIND=close OMP_NUM_THREADS=1 timeout 120 "$MPIEXEC" -n 1 --bind-to none \
       "$BIN" --worker ddp --caps 25 --steps 1 --warmup 0 --batch 8 --reduce-mode thread --progress-core 1 \
       --show-affinity 1 >"$d/log" 2>&1; then
    # Threads per CPU list: two lists, one of them held by exactly one thread.
    counts=$(grep '^@row kind=affinity' "$d/log" | sed 's/.*cpus=//' | sort | uniq -c | awk '{print $1}' | sort -n | tr '\n' ' ')
    total=$(grep -c '^@row kind=affinity' "$d/log")
    if [ "$counts" = "1 $((total - 1)) " ] && [ "$total" -ge 3 ]; then
      pass "progress thread pinned to the spare core ($total threads)"
    else
      fail "progress thread placement: $(grep '^@row kind=affinity' "$d/log")"
    fi
  else
    fail "ddp worker with --progress-core: $(tail -5 "$d/log")"
  fi
else
  echo "skip: progress-core check needs 2 cores"
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
