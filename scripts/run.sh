#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job.
# Until drivers/poly_train exists: a short GEMM benchmark, hddp vs OpenBLAS.
source "$(dirname "$0")/common.sh"
hddp_build
cd "$HDDP_ROOT"
OMP_NUM_THREADS="${OMP_NUM_THREADS:-$JOBS}" "$BUILD_DIR/bench/bench_gemm" \
  --benchmark_filter='/s/NN/(32x20x1|256x256x256|1024x1024x1024)$' --benchmark_min_time=0.2
