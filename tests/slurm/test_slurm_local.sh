#!/usr/bin/env bash
# The tutorial's Slurm job on a real local Slurm (scripts/slurm-local.sh, 3 emulated nodes):
#   1. the unmodified slurm/run.sbatch (threads reduced through the environment) exits 0, its
#      log shows ranks 0..2 of 3 on the distinct Slurm nodes n1, n2, n3, and errors.pdf is a
#      valid, non-empty PDF;
#      The job's affinity report (--report-affinity) has one line per rank with its CPU set, the
#      job file says how it placed the ranks (unbound: the emulated nodes share this host), and
#      no placement warning is printed. Its step time is printed beside plain mpiexec's (not
#      asserted: speed lives in bench/results/slurm.md);
#   2. two ranks on one node (sbatch -N 1 -n 2 -c 1): each on its own core - the two ranks
#      report different CPUs, no warning; two ranks on each of the 3 nodes run to the end;
#   3. a job asking for more nodes than exist is refused at submission with a clear message;
#   4. slurm/gpt.sbatch (gpt_train through run.sbatch) on the 3 nodes: exits 0, ranks 0..2 of
#      3, metrics.csv and the sample written, the checkpoint kept for a resume.
# Everything (Slurm state, job output) stays under BUILD_DIR/tests/slurm-local; Slurm is
# brought down on any exit.
#
# Usage: test_slurm_local.sh REPO_ROOT BUILD_DIR [POLY_TRAIN [GPT_TRAIN]]
#   POLY_TRAIN defaults to $HDDP_BIN, then BUILD_DIR/drivers/poly_train; GPT_TRAIN to
#   BUILD_DIR/drivers/gpt_train (part 4 is left out when it is not built). HDDP_SLURM_PORT
#   (default 17100) moves the cluster's ports.
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: $0 REPO_ROOT BUILD_DIR [POLY_TRAIN]" >&2; exit 2; }
repo="$(cd "$1" && pwd)"
build="$(cd "$2" && pwd)"
bin="${3:-${HDDP_BIN:-$build/drivers/poly_train}}"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
gpt_bin="${4:-$build/drivers/gpt_train}"
slurm_local="$repo/scripts/slurm-local.sh"

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (it starts munged, slurmctld and slurmd)"
  exit 77
fi
[ -x "$bin" ] || { echo "FAIL: $bin is missing" >&2; exit 1; }
if [ "$(env -u OMP_NUM_THREADS nproc)" -lt 2 ]; then
  echo "SKIP: needs 2 CPUs (case 2 gives two ranks a core each)"
  exit 77
fi

work="$build/tests/slurm-local"
export HDDP_SLURM_DIR="$work/slurm"
export HDDP_SLURM_PORT="${HDDP_SLURM_PORT:-17100}"   # not the demo's 17000
t_start=$SECONDS
log() { echo "[$((SECONDS - t_start))s] $*"; }

# A cluster left by an aborted run (e.g. killed at the ctest timeout) is stopped first.
bash "$slurm_local" down >/dev/null 2>&1 || true
rm -rf "$work"
mkdir -p "$work/out"

job_log=""
cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ -n "$job_log" ] && [ -f "$job_log" ]; then
    echo "---- $job_log"; cat "$job_log"
  fi
  if [ "$rc" -ne 0 ] && [ -d "$HDDP_SLURM_DIR/log" ]; then
    for f in "$HDDP_SLURM_DIR"/log/*.log; do echo "---- last lines of $f"; tail -n 15 "$f"; done
  fi
  bash "$slurm_local" down || rc=1
  log "done (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() { echo "FAIL: $*" >&2; exit 1; }

log "bringing up a local Slurm with 3 nodes in $HDDP_SLURM_DIR"
up_out="$(bash "$slurm_local" up 3)" || fail "scripts/slurm-local.sh up 3 failed"
unset SLURM_CONF
eval "$up_out"
[ -n "${SLURM_CONF:-}" ] || fail "slurm-local.sh up printed no SLURM_CONF line"
log "up: SLURM_CONF=$SLURM_CONF"

# ---- 1. the tutorial job, unmodified; threads reduced through the environment ----------
export OMP_NUM_THREADS=1 HDDP_BIN="$bin"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$work/out"
job="$(sbatch --parsable "$repo/slurm/run.sbatch" --epochs 200 --report-affinity)" || fail "sbatch refused slurm/run.sbatch"
job="${job%%;*}"
job_log="$work/out/hddp-poly-$job.out"
log "submitted job $job (log $job_log)"
rc=0
bash "$slurm_local" wait "$job" 180 || rc=$?
log "job $job finished with exit code $rc"
[ "$rc" -eq 0 ] || fail "job $job exited with $rc"
[ -f "$job_log" ] || fail "no job log $job_log"

# The driver's "rank r/s (hostname)" lines: ranks 0, 1 and 2 of 3.
ranks="$(grep -oE 'rank [0-9]+/3 \(' "$job_log" | grep -oE '[0-9]+/' | tr -d / | sort -un | tr '\n' ' ')"
[ "$ranks" = "0 1 2 " ] || fail "expected the driver's lines for ranks 0 1 2 of 3, got '${ranks}'"
# The job's per-rank Slurm node lines: three distinct nodes n1, n2, n3.
nodes="$(grep -oE 'rank [0-9]+/3 on node [^ ]+' "$job_log" | awk '{print $5}' | sort -u | tr '\n' ' ')"
[ "$nodes" = "n1 n2 n3 " ] || fail "expected the three ranks on nodes n1 n2 n3, got '${nodes}'"
log "ranks 0 1 2 on nodes $nodes"

# The affinity report: ranks 0-2 on n1-n3, each with its CPU set; the job file's placement line.
for r in 0 1 2; do
  grep -qE "^affinity: rank $r/3 on node n$((r + 1)) \(host [^)]*\): CPUs [0-9][0-9,-]* of [0-9]+; 1 OpenMP thread: t0 on CPU [0-9]+ \(may use [0-9,-]+\)$" "$job_log" \
    || fail "no affinity report line for rank $r on n$((r + 1)): $(grep '^affinity:' "$job_log")"
done
grep -q "^placement: the job's nodes share one host (emulated nodes): ranks are not bound" "$job_log" \
  || fail "the job file did not say how it placed the ranks: $(grep '^placement' "$job_log")"
! grep -q 'warning' "$job_log" || fail "unexpected warning: $(grep warning "$job_log")"
log "affinity report: $(grep -c '^affinity:' "$job_log") lines, placement unbound (emulated nodes share this host), no warning"

# The step time beside plain mpiexec's on this host (information, not a check).
step_us() { sed -n 's/^training: .*(\([0-9.]*\) us\/step).*/\1/p' "$1"; }
mkdir -p "$work/plain"
timeout 120 mpiexec -n 3 --oversubscribe --bind-to none "$bin" --epochs 200 --no-plot --out "$work/plain" \
  >"$work/plain/log" 2>&1 || fail "plain mpiexec -n 3 failed: $(tail -3 "$work/plain/log")"
timeout 120 mpiexec -n 3 --oversubscribe --bind-to none --mca btl self,tcp "$bin" --epochs 200 --no-plot \
  --out "$work/plain" >"$work/plain/tcp.log" 2>&1 || fail "plain mpiexec -n 3 over TCP failed: $(tail -3 "$work/plain/tcp.log")"
log "step time: Slurm job $(step_us "$job_log") us, plain mpiexec $(step_us "$work/plain/log") us," \
    "plain mpiexec over TCP $(step_us "$work/plain/tcp.log") us (200 epochs each; bench/results/slurm.md has the measurement)"

pdf="$work/out/errors.pdf"
[ -s "$pdf" ] || fail "$pdf is missing or empty"
[ "$(head -c 4 "$pdf")" = "%PDF" ] || fail "$pdf does not start with %PDF"
if command -v pdfinfo >/dev/null; then
  pdfinfo "$pdf" >/dev/null 2>&1 || fail "pdfinfo cannot read $pdf"
fi
log "errors.pdf ok ($(stat -c %s "$pdf") bytes)"

# run_job DIR SBATCH_ARGS... -- POLY_TRAIN_ARGS...: submits slurm/run.sbatch from DIR, waits,
# fails unless it exits 0; sets job_log.
run_job() {
  local dir=$1 sb=() rc=0; shift
  while [ "$1" != -- ]; do sb+=("$1"); shift; done
  shift
  mkdir -p "$dir"
  job="$(cd "$dir" && sbatch --parsable "${sb[@]}" "$repo/slurm/run.sbatch" "$@")" \
    || fail "sbatch ${sb[*]} refused slurm/run.sbatch"
  job="${job%%;*}"
  job_log="$dir/hddp-poly-$job.out"
  bash "$slurm_local" wait "$job" 180 || rc=$?
  [ "$rc" -eq 0 ] || fail "job $job (${sb[*]}) exited with $rc"
}

# ---- 2. two ranks on one node: each on its own core ---------------------------------------
run_job "$work/out2" -N 1 -n 2 -c 1 -- --epochs 200 --report-affinity --no-plot
may_use() { sed -n "s/^affinity: rank $1\/2 on node n1 .* t0 on CPU [0-9]* (may use \([0-9,-]*\))$/\1/p" "$job_log"; }
a="$(may_use 0)" b="$(may_use 1)"
[[ "$a" =~ ^[0-9]+$ && "$b" =~ ^[0-9]+$ && "$a" != "$b" ]] \
  || fail "-N 1 -n 2 -c 1: expected ranks 0 and 1 on node n1 on two different single CPUs, got '$a' and '$b'"
grep -q '^placement: each rank on its own 1 core(s)' "$job_log" || fail "-N 1 -n 2 -c 1: placement line: $(grep '^placement' "$job_log")"
! grep -q 'warning' "$job_log" || fail "-N 1 -n 2 -c 1: unexpected warning: $(grep warning "$job_log")"
log "-N 1 -n 2 -c 1: rank 0 on CPU $a, rank 1 on CPU $b, no warning"
job_log=""

# ---- 2b. two ranks on each of the 3 nodes: runs (the emulated nodes share /dev/shm, where
# Open MPI's shared-memory segment names would collide: the job file turns that transport off)
run_job "$work/out3" -N 3 -n 6 --ntasks-per-node=2 -c 1 -- --epochs 100 --report-affinity --no-plot
per_node="$(grep -oE '^affinity: rank [0-5]/6 on node n[1-3] ' "$job_log" | awk '{print $6}' | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')"
[ "$per_node" = "n1=2 n2=2 n3=2 " ] || fail "-N 3 -n 6 --ntasks-per-node=2 -c 1: expected two ranks on each of n1 n2 n3, got '$per_node'"
log "-N 3 -n 6 --ntasks-per-node=2 -c 1: $per_node"
job_log=""

cd "$work/out"
# ---- 3. more nodes than exist: refused at submission (EnforcePartLimits=ALL) -------------
# (-n 4 -c 1: with the file's -n 3, sbatch itself would shrink -N 4 to 3 nodes; with -c 16 the
# refusal would be about processors, not nodes.)
if out="$(sbatch --parsable -N 4 -n 4 -c 1 "$repo/slurm/run.sbatch" 2>&1)"; then
  fail "sbatch -N 4 -n 4 -c 1 on a 3-node cluster was accepted (job ${out}); it should be refused"
fi
echo "$out"
grep -qi 'error: .*node count' <<<"$out" || fail "sbatch -N 4 -n 4 -c 1 failed without a clear message: $out"
[ -z "$(squeue -h -o %A)" ] || fail "a job is queued after the refused submission"
log "sbatch -N 4 -n 4 -c 1 refused at submission"

# ---- 4. the GPT job file: gpt_train through run.sbatch on the 3 nodes ---------------------
if [ -x "$gpt_bin" ]; then
  mkdir -p "$work/gpt"
  cd "$work/gpt"
  job="$(HDDP_BIN="$gpt_bin" sbatch --parsable "$repo/slurm/gpt.sbatch" --layers 1 --heads 2 --dim 32 --context 32            --batch-size 4 --warmup 2 --steps 20 --eval-every 10 --sample-tokens 32 --no-plot)" || fail "sbatch refused slurm/gpt.sbatch"
  job="${job%%;*}"
  job_log="$work/gpt/hddp-gpt-$job.out"
  rc=0
  bash "$slurm_local" wait "$job" 180 || rc=$?
  [ "$rc" -eq 0 ] || fail "gpt job $job exited with $rc: $(tail -5 "$job_log" 2>/dev/null)"
  ranks="$(grep -oE 'rank [0-9]+/3 on node n[1-3]' "$job_log" | awk '{print $5}' | sort -u | tr '\n' ' ')"
  [ "$ranks" = "n1 n2 n3 " ] || fail "gpt job: expected ranks on n1 n2 n3, got '$ranks'"
  grep -q '^model: GPT, 1 layers' "$job_log" && grep -q '^--- end of sample' "$job_log" || fail "gpt job: no model or sample lines"
  [ -s metrics.csv ] && [ -s sample.txt ] && [ -s hddp-gpt.ckpt ] || fail "gpt job: metrics.csv, sample.txt or hddp-gpt.ckpt missing"
  log "gpt.sbatch: 3 ranks on n1 n2 n3, metrics.csv, sample.txt and hddp-gpt.ckpt written"
  cd "$work/out"
fi

echo "PASS"
