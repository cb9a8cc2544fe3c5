#!/usr/bin/env bash
# Installs what is missing, builds, and tunes hddp's GEMM for this CPU: build/tune/gemm_tune
# measures the fastest micro-kernel set and MC/KC/NC blocking and writes them to the wisdom file
# the library reads from then on (~/.config/hddp/gemm_wisdom.json; kernels/gemm/gemm_config.h).
# A few minutes. Threads: OMP_NUM_THREADS, else all cores here (tune with the count your jobs
# use: on a 16-core node under `sbatch -c 16`, 16). Extra arguments go to gemm_tune
# (--out FILE, --dry-run, --show; see gemm_tune --help).
source "$(dirname "$0")/common.sh"
HDDP_TARGETS=gemm_tune hddp_build build
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-$(nproc)}}"
exec "$BUILD_DIR/tune/gemm_tune" "$@"
