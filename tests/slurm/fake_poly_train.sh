#!/usr/bin/env bash
# Stand-in for drivers/poly_train while developing the Slurm test (HDDP_BIN=this file):
# accepts --epochs N --out DIR, prints one "rank r/s (hostname)" line per MPI rank, and rank 0
# writes errors.csv and errors.pdf (gnuplot, pdfcairo) into DIR. Not used by the registered test.
set -euo pipefail
epochs=100 out=.
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs="$2"; shift 2 ;;
    --epochs=*) epochs="${1#*=}"; shift ;;
    --out) out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    *) shift ;;
  esac
done
rank="${OMPI_COMM_WORLD_RANK:-0}" size="${OMPI_COMM_WORLD_SIZE:-1}"
echo "fake_poly_train: rank $rank/$size ($(hostname)) threads=${OMP_NUM_THREADS:-?} epochs=$epochs"
if [ "$rank" -eq 0 ]; then
  mkdir -p "$out"
  { echo "epoch,train,test"; for e in $(seq 0 10 "$epochs"); do echo "$e,$((1000 / (e + 1))),$((1100 / (e + 1)))"; done; } >"$out/errors.csv"
  gnuplot -e "set terminal pdfcairo; set output '$out/errors.pdf'; set datafile separator ','; \
              set key autotitle columnhead; plot '$out/errors.csv' using 1:2 with lines, '' using 1:3 with lines"
  echo "fake_poly_train: wrote $out/errors.pdf"
fi
