#!/usr/bin/env bash
# The tutorial's step under the local Slurm (scripts/slurm-local.sh, 3 emulated nodes on this
# host) beside plain mpiexec on the same host, in one run (bench/results/slurm.md).
# Every case runs the unmodified slurm/run.sbatch or mpiexec with
# OMP_NUM_THREADS=1 and EPOCHS epochs; ROUNDS rounds, the cases interleaved in each round; the
# table has the median us/step (poly_train's "training: ... us/step" line) and the range.
#   sudo bash bench/slurm_placement.sh [build dir]     (default: build; ROUNDS=3 EPOCHS=400)
# Needs root (the local Slurm). Uses ports 17500+ and a temporary state directory; brings the
# cluster down on exit. Run on a quiet machine.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
ROUNDS=${ROUNDS:-3}
EPOCHS=${EPOCHS:-400}
BIN=$BUILD/drivers/poly_train
[ -x "$BIN" ] || { echo "slurm_placement.sh: $BIN is missing; build first (bash scripts/run.sh)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "slurm_placement.sh: needs root (it starts a local Slurm)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 HDDP_BIN="$BIN"
unset OMP_PLACES OMP_PROC_BIND OMPI_MCA_mpi_yield_when_idle
tmp=$(mktemp -d)
chmod 0755 "$tmp"   # the munge user must reach the Slurm state directory inside
export HDDP_SLURM_DIR="$tmp/slurm" HDDP_SLURM_PORT=${HDDP_SLURM_PORT:-17500}
trap 'bash "$ROOT/scripts/slurm-local.sh" down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
up_out="$(bash "$ROOT/scripts/slurm-local.sh" up 3)" || { echo "slurm_placement.sh: scripts/slurm-local.sh up 3 failed" >&2; exit 1; }
eval "$up_out"
[ -n "${SLURM_CONF:-}" ] || { echo "slurm_placement.sh: no SLURM_CONF from slurm-local.sh up" >&2; exit 1; }

step_us() { sed -n 's/^training: .*(\([0-9.]*\) us\/step).*/\1/p' "$1" | tail -1; }
# mpi_case NAME MPIEXEC_ARGS...: plain mpiexec on this host
mpi_case() {
  local name=$1; shift
  mkdir -p "$tmp/$name"
  timeout 300 mpiexec "$@" "$BIN" --epochs "$EPOCHS" --no-plot --out "$tmp/$name" >"$tmp/$name/log" 2>&1
  step_us "$tmp/$name/log"
}
# job_case NAME [ENV=VALUE...] -- SBATCH_ARGS...: slurm/run.sbatch on the local Slurm
job_case() {
  local name=$1 envs=() job; shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  mkdir -p "$tmp/$name"
  rm -f "$tmp/$name"/hddp-poly.ckpt
  job=$(cd "$tmp/$name" && env "${envs[@]}" sbatch --parsable "$@" "$ROOT/slurm/run.sbatch" --epochs "$EPOCHS" --no-plot)
  bash "$ROOT/scripts/slurm-local.sh" wait "${job%%;*}" 300 >/dev/null 2>&1 || true
  step_us "$tmp/$name/hddp-poly-${job%%;*}.out"
}

# name | how | runner
cases=(
  "mpi3|\`mpiexec -n 3 --oversubscribe\` on the host (scripts/run.sh's way), shared memory|mpi_case mpi3 -n 3 --oversubscribe --bind-to none"
  "mpi3tcp|same, TCP between ranks (\`--mca btl self,tcp\`)|mpi_case mpi3tcp -n 3 --oversubscribe --bind-to none --mca btl self,tcp"
  "job3|**\`sbatch slurm/run.sbatch\`**: 3 nodes x 1 rank (\`-N 3 -n 3 -c 16\`)|job_case job3 --"
  "job3nockpt|same, checkpoint at the end only (\`HDDP_CHECKPOINT_EVERY=0\`; the job file writes one every 100 epochs)|job_case job3nockpt HDDP_CHECKPOINT_EVERY=0 --"
  "job3noyield|same, without the emulated cluster's yield (\`OMPI_MCA_mpi_yield_when_idle=0\`)|job_case job3noyield OMPI_MCA_mpi_yield_when_idle=0 --"
  "mpi2|\`mpiexec -n 2\` on the host, each rank on its own core (\`--map-by slot:PE=1 --bind-to core\`)|mpi_case mpi2 -n 2 --map-by slot:PE=1 --bind-to core -x OMP_PLACES=cores -x OMP_PROC_BIND=close"
  "mpi2bad|\`mpiexec -n 2 --bind-to none\` with \`OMP_PLACES=cores OMP_PROC_BIND=close\` (the old job file's placement)|mpi_case mpi2bad -n 2 --bind-to none -x OMP_PLACES=cores -x OMP_PROC_BIND=close"
  "job12|**\`sbatch -N 1 -n 2 -c 1 slurm/run.sbatch\`**: 1 node x 2 ranks|job_case job12 -- -N 1 -n 2 -c 1"
  "mpi6tcp|\`mpiexec -n 6 --oversubscribe\` over TCP|mpi_case mpi6tcp -n 6 --oversubscribe --bind-to none --mca btl self,tcp"
  "job32|\`sbatch -N 3 -n 6 --ntasks-per-node=2 -c 8 slurm/run.sbatch\`: 3 nodes x 2 ranks|job_case job32 -- -N 3 -n 6 --ntasks-per-node=2 -c 8"
  "mpi9tcp|\`mpiexec -n 9 --oversubscribe\` over TCP|mpi_case mpi9tcp -n 9 --oversubscribe --bind-to none --mca btl self,tcp"
  "job33|\`sbatch -N 3 -n 9 --ntasks-per-node=3 -c 4 slurm/run.sbatch\`: 3 nodes x 3 ranks|job_case job33 -- -N 3 -n 9 --ntasks-per-node=3 -c 4"
)
declare -A got
for r in $(seq 1 "$ROUNDS"); do
  for c in "${cases[@]}"; do
    IFS='|' read -r name how runner <<<"$c"
    v=$($runner || true)
    got[$name]+="${v:-nan} "
    echo "round $r: $name ${v:-failed} us/step" >&2
  done
done

med() { tr ' ' '\n' | grep -v '^$' | grep -v nan | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) CPUs; $(lscpu | grep -o 'avx512f\|avx2' | sort -u | tr '\n' ' ')"
echo "$EPOCHS epochs of the tutorial, OMP_NUM_THREADS=1, median of $ROUNDS interleaved rounds"
echo
echo "| launch | per step (median) | range |"
echo "|---|---|---|"
for c in "${cases[@]}"; do
  IFS='|' read -r name how runner <<<"$c"
  vals=${got[$name]}
  ok=$(tr ' ' '\n' <<<"$vals" | grep -v '^$' | grep -v nan | sort -g || true)
  failed=$(tr ' ' '\n' <<<"$vals" | grep -c nan || true)
  if [ -z "$ok" ]; then printf '| %s | failed | %s of %s rounds failed |\n' "$how" "$failed" "$ROUNDS"; continue; fi
  printf '| %s | %s µs | %s-%s%s |\n' "$how" "$(med <<<"$vals")" "$(head -1 <<<"$ok")" "$(tail -1 <<<"$ok")" \
    "$([ "$failed" -gt 0 ] && echo " ($failed of $ROUNDS rounds failed)")"
done
