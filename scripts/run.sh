#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job: the tutorial's polynomial fit on 3
# local MPI ranks, writing errors.pdf, eval.csv and loss.csv into ./out (or $HDDP_OUT).
# Extra arguments go to poly_train (see build/drivers/poly_train --help).
source "$(dirname "$0")/common.sh"
hddp_build
OUT="${HDDP_OUT:-$PWD/out}"
mkdir -p "$OUT"
# 3 ranks share this machine's cores: one OpenMP thread each unless told otherwise.
OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" mpiexec -n 3 --oversubscribe --bind-to none \
  "$BUILD_DIR/drivers/poly_train" --out "$OUT" "$@"
