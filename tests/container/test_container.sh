#!/usr/bin/env bash
# The job inside a Charliecloud image (slurm/container.sh, scripts/charliecloud.sh):
#   1. `slurm/container.sh build` builds the image into the build tree (or reuses it: a second
#      call says it is up to date);
#   2. host mpiexec, 3 ranks, each inside the image: eval.csv and loss.csv bitwise those of the
#      native run;
#   3. the unmodified slurm/run.sbatch with HDDP_IMAGE on the local 3-node Slurm: exit 0, ranks
#      on n1, n2, n3, a valid errors.pdf, CSVs bitwise the native run's;
#   4. bad input - no image, a directory that is not one, a stale one (another Open MPI), no
#      ch-run, no user namespaces, a job with an image path that is not an image - each ends
#      non-zero with a message saying what to do; nothing is left in /dev/shm, /tmp or running.
# (SIGUSR1 -> checkpoint -> requeue -> resume through the image: test_container_slurm_requeue,
# tests/faults/test_slurm_requeue.sh with HDDP_IMAGE.) Needs root (skipped with 77 otherwise).
# Usage: test_container.sh REPO BUILD_DIR POLY_TRAIN MPIEXEC
set -uo pipefail
REPO=$1 BUILD=$2 BIN=$3 MPIEXEC=$4
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (mmdebstrap builds the image in root mode; the Slurm part starts daemons)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
IMG="$BUILD/container/hddp"
WORK="$BUILD/tests/scratch-container"
export HDDP_SLURM_DIR="$WORK/slurm" HDDP_SLURM_PORT="${HDDP_SLURM_CONTAINER_PORT:-17300}"
slurm_local="$REPO/scripts/slurm-local.sh"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# What the container path could leave behind: ch-run's files in /dev/shm (--join, not used) and
# ch-checkns' /tmp/newroot (the checks use unshare instead). Compared before and after. (Open
# MPI's own files are every MPI test's business.)
leftovers() { { ls /dev/shm 2>/dev/null | grep '^ch-run'; ls -d /tmp/newroot 2>/dev/null; } | sort; }
before="$(leftovers)"
bash "$slurm_local" down >/dev/null 2>&1 || true
rm -rf "$WORK" && mkdir -p "$WORK"
cleanup() {
  bash "$slurm_local" down >/dev/null 2>&1 || echo "warning: slurm-local.sh down failed"
  [ "$failures" -eq 0 ] && rm -rf "$WORK"
}
trap cleanup EXIT

# ---- 1. the image ------------------------------------------------------------------------
t0=$SECONDS
HDDP_BUILD_DIR="$BUILD" bash "$REPO/slurm/container.sh" build "$IMG" || { fail "slurm/container.sh build failed"; exit 1; }
echo "image ready in $((SECONDS - t0)) s"
out="$(HDDP_BUILD_DIR="$BUILD" bash "$REPO/slurm/container.sh" build "$IMG" 2>&1)"
grep -q "is up to date" <<<"$out" && pass "a second build reuses the image: $out" || fail "a second build did not reuse the image: $out"

# ---- 2. host mpiexec through the image, bitwise the native run ----------------------------
MPI=("$MPIEXEC" --oversubscribe --bind-to none --timeout 120 -n 3)
mkdir -p "$WORK/native" "$WORK/ch"
"${MPI[@]}" "$BIN" --epochs 300 --no-plot --out "$WORK/native" >"$WORK/native/log" 2>&1 || fail "native run exited $?"
# shellcheck source=../../scripts/charliecloud.sh
source "$REPO/scripts/charliecloud.sh"
hddp_ch_prefix "$IMG" "$(dirname "$BIN")" "$WORK/ch"
if "${MPI[@]}" "${HDDP_CH[@]}" "/opt/hddp/bin/$(basename "$BIN")" --epochs 300 --no-plot --out /mnt/out >"$WORK/ch/log" 2>&1; then
  grep -q 'wrote /mnt/out/eval.csv' "$WORK/ch/log" || fail "the container run did not write through /mnt/out: $(tail -2 "$WORK/ch/log")"
  cmp -s "$WORK/native/eval.csv" "$WORK/ch/eval.csv" && cmp -s "$WORK/native/loss.csv" "$WORK/ch/loss.csv" \
    && pass "mpiexec -n 3 through ch-run: eval.csv and loss.csv bitwise the native run's" \
    || fail "the container run's CSVs differ from the native run's"
else
  fail "mpiexec through ch-run exited non-zero: $(tail -5 "$WORK/ch/log")"
fi

# ---- 3. the job file with HDDP_IMAGE on the local Slurm ----------------------------------
up_out="$(bash "$slurm_local" up 3)" || { fail "scripts/slurm-local.sh up 3 failed"; exit 1; }
unset SLURM_CONF
eval "$up_out"
mkdir -p "$WORK/job"
# --out as the host sees it: the job file hands the driver /mnt/out instead.
job="$(cd "$WORK/job" && HDDP_IMAGE="$IMG" HDDP_BIN="$BIN" sbatch --parsable "$REPO/slurm/run.sbatch" --epochs 300 --out "$WORK/job")"
job="${job%%;*}"
rc=0
bash "$slurm_local" wait "$job" 240 || rc=$?
log="$WORK/job/hddp-poly-$job.out"
if [ "$rc" -eq 0 ]; then
  nodes="$(grep -oE 'rank [0-9]+/3 on node [^ ]+' "$log" | awk '{print $5}' | sort -u | tr '\n' ' ')"
  [ "$nodes" = "n1 n2 n3 " ] || fail "job: expected ranks on n1 n2 n3, got '$nodes'"
  grep -q "^driver: ch-run .* $IMG -- /opt/hddp/bin/" "$log" || fail "job: the driver did not run through ch-run: $(grep '^driver' "$log")"
  [ "$(head -c 4 "$WORK/job/errors.pdf" 2>/dev/null)" = "%PDF" ] && pdfinfo "$WORK/job/errors.pdf" >/dev/null 2>&1 \
    || fail "job: errors.pdf missing or not a valid PDF"
  cmp -s "$WORK/native/eval.csv" "$WORK/job/eval.csv" && cmp -s "$WORK/native/loss.csv" "$WORK/job/loss.csv" \
    || fail "job: CSVs differ from the native run's"
  [ "$failures" -eq 0 ] && pass "HDDP_IMAGE=... sbatch slurm/run.sbatch: n1-n3, errors.pdf, CSVs bitwise the native run's"
else
  fail "job $job exited $rc: $(tail -5 "$log" 2>/dev/null)"
fi

# ---- 4. bad input --------------------------------------------------------------------------
# expect NAME WANT_REGEX CMD...: non-zero exit within 60 s, and a message matching WANT_REGEX
expect() {
  local name=$1 want=$2 rc=0; shift 2
  timeout 60 "$@" >"$WORK/$name.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then fail "$name: exit $rc (expected an error)"; return; fi
  grep -qE "$want" "$WORK/$name.log" && pass "$name: exit $rc, '$(grep -oE "$want" "$WORK/$name.log" | head -1)'" \
    || fail "$name: no message matching '$want': $(cat "$WORK/$name.log")"
}
run_cmd=(env HDDP_BUILD_DIR="$BUILD" HDDP_OUT="$WORK/bad-out" bash "$REPO/slurm/container.sh" run --epochs 10)
expect no-image "no image at '.*': build it with 'bash slurm/container.sh build" env HDDP_IMAGE="$WORK/missing" "${run_cmd[@]}"
mkdir -p "$WORK/plain-dir"
expect not-an-image "is not a Charliecloud directory image" env HDDP_IMAGE="$WORK/plain-dir" "${run_cmd[@]}"
mkdir -p "$WORK/stale/bin" "$WORK/stale/var/lib/dpkg"
cp /bin/sh "$WORK/stale/bin/sh"
cp "$IMG/$HDDP_CH_STAMP" "$WORK/stale/"
printf 'Package: libopenmpi3\nStatus: install ok installed\nVersion: 0.0-old\n\n' >"$WORK/stale/var/lib/dpkg/status"
expect stale "is stale: its libopenmpi3 is 0.0-old, the host's is .*; rebuild it" env HDDP_IMAGE="$WORK/stale" "${run_cmd[@]}"
mkdir -p "$WORK/nobin"
for t in bash dirname; do ln -s "$(command -v $t)" "$WORK/nobin/$t"; done
expect no-ch-run "ch-run is not installed: install Charliecloud" env PATH="$WORK/nobin" HDDP_IMAGE="$IMG" \
  HDDP_BUILD_DIR="$BUILD" HDDP_OUT="$WORK/bad-out" bash "$REPO/slurm/container.sh" run --epochs 10
mkdir -p "$WORK/nouserns"
printf '#!/bin/sh\nexit 1\n' >"$WORK/nouserns/unshare"
chmod +x "$WORK/nouserns/unshare"
expect no-userns "user namespaces are not available here .*; enable them" env PATH="$WORK/nouserns:$PATH" \
  HDDP_IMAGE="$IMG" "${run_cmd[@]}"
# bad_job NAME IMAGE WANT_RC MESSAGE [poly_train args]: run.sbatch with HDDP_IMAGE=IMAGE ends
# with WANT_RC ("nonzero": any but 0) and MESSAGE in its log.
bad_job() {
  local name=$1 image=$2 want=$3 msg=$4 job rc=0; shift 4
  job="$(cd "$WORK/job" && HDDP_IMAGE="$image" HDDP_BIN="$BIN" sbatch --parsable "$REPO/slurm/run.sbatch" --epochs 10 "$@")"
  job="${job%%;*}"
  bash "$slurm_local" wait "$job" 120 || rc=$?
  if { [ "$want" = nonzero ] && [ "$rc" -ne 0 ] || [ "$rc" = "$want" ]; } && grep -qF "$msg" "$WORK/job/hddp-poly-$job.out"; then
    pass "$name: exit $rc with the message"
  else
    fail "$name: exit $rc, log: $(cat "$WORK/job/hddp-poly-$job.out" 2>/dev/null)"
  fi
}
# An image path that is no directory, and no apptainer/singularity on PATH.
touch "$WORK/not-an-image.sif"
bad_job "job with a bad HDDP_IMAGE" "$WORK/not-an-image.sif" nonzero \
  "is not a directory (a Charliecloud image) and neither apptainer nor singularity is on PATH"
# A checkpoint outside the submit directory cannot be reached from the image: refused, exit 2.
bad_job "job with a checkpoint outside the submit directory" "$IMG" 2 \
  "run.sbatch: --checkpoint /var/tmp/elsewhere.ckpt: with a Charliecloud image the driver sees only the submit directory" \
  --checkpoint /var/tmp/elsewhere.ckpt

# ---- nothing left behind ------------------------------------------------------------------
new="$(comm -13 <(echo "$before") <(leftovers) | tr '\n' ' ')"
[ -z "$new" ] || fail "left behind in /dev/shm or /tmp: $new"
pgrep -f /opt/hddp/bin/ >/dev/null && fail "a rank of the container is still running: $(pgrep -af /opt/hddp/bin/)"
pgrep -f "poly_train .*$WORK" >/dev/null && fail "a rank of this test is still running: $(pgrep -af "poly_train .*$WORK")"
pgrep -f "mpiexec.*$WORK" >/dev/null && fail "an mpiexec of this test is still running"

[ "$failures" -eq 0 ] && echo PASS || echo "FAILED: $failures check(s)"
[ "$failures" -eq 0 ]
