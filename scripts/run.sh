#!/usr/bin/env bash
# Installs what is missing (setup-deps.sh's build group), builds poly_train alone, and runs the
# main job: the tutorial's polynomial fit on 3 local MPI ranks, writing errors.pdf, eval.csv and
# loss.csv into ./out (or $HDDP_OUT). build/ is the tree scripts/test.sh builds the rest into.
# Extra arguments go to poly_train (see build/drivers/poly_train --help). With HDDP_IMAGE set,
# the ranks run inside that Charliecloud image (slurm/container.sh).
#
# Stopping it: SIGTERM to this script becomes SIGUSR1 to mpiexec, which forwards it to the
# ranks at once: they finish the step, write the checkpoint (if --checkpoint was given) and
# exit 75. (SIGTERM to mpiexec itself would start Open MPI's kill sequence instead: the ranks
# get SIGTERM only odls_base_sigkill_timeout seconds later; slurm/README.md, "Signals".)
source "$(dirname "$0")/common.sh"
HDDP_TARGETS=poly_train hddp_build build   # the build group and the one program: nothing else
OUT="$(realpath -m "${HDDP_OUT:-$PWD/out}")"
mkdir -p "$OUT"
# 3 ranks share this machine's cores: one OpenMP thread each unless told otherwise
# (OMP_NUM_THREADS, or poly_train's --threads). Placement (scripts/placement.sh): each rank on
# its own cores when 3 x threads fit this machine; else (e.g. 2 cores) unbound, and mpiexec may
# start more ranks than cores (--oversubscribe; Open MPI then makes idle ranks yield their core).
source "$HDDP_ROOT/scripts/placement.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
threads="$OMP_NUM_THREADS" prev=""
for a in "$@"; do
  case "$a" in --threads=*) threads="${a#--threads=}" ;; *) [ "$prev" = --threads ] && threads="$a" ;; esac
  prev="$a"
done
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || threads="$OMP_NUM_THREADS"   # poly_train reports a bad value
hddp_place 3 "$threads" "$(hddp_cpus_here)" 0 || exit 2
[ "${HDDP_PLACE[1]}" = none ] && HDDP_PLACE+=(--oversubscribe)
echo "$HDDP_PLACE_WHY"
# HDDP_IMAGE: every rank inside that Charliecloud image (slurm/container.sh; the build tree's
# binaries bound at /opt/hddp/bin, $OUT at /mnt/out).
cmd=("$BUILD_DIR/drivers/poly_train" --out "$OUT")
if [ -n "${HDDP_IMAGE:-}" ]; then
  source "$HDDP_ROOT/scripts/charliecloud.sh"
  hddp_ch_check "$HDDP_IMAGE"
  hddp_ch_prefix "$HDDP_IMAGE" "$BUILD_DIR/drivers" "$OUT"
  cmd=("${HDDP_CH[@]}" /opt/hddp/bin/poly_train --out /mnt/out)
  echo "container: $HDDP_IMAGE (ch-run; $OUT is /mnt/out inside)"
fi
mpiexec -n 3 "${HDDP_PLACE[@]}" "${cmd[@]}" "$@" &
mpiexec_pid=$!
interrupted=0
trap 'interrupted=1; kill -USR1 "$mpiexec_pid" 2>/dev/null || true' TERM
# A trap interrupts wait (status > 128) while mpiexec runs on: wait again. (bash keeps a
# finished job's status, so waiting again after it ended returns that status.)
while :; do
  interrupted=0 rc=0
  wait "$mpiexec_pid" || rc=$?
  [ "$interrupted" -eq 1 ] && [ "$rc" -gt 128 ] && continue
  break
done
exit "$rc"
