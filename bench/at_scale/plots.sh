#!/usr/bin/env bash
# bench/at_scale's PDFs from OUT/replay.csv (bench/at_scale/run.sh writes both):
#   at_scale_step.pdf        per model: step time (blocking, overlapped, best cap) and exposed
#                            communication (overlapped) vs nodes
#   at_scale_efficiency.pdf  weak-scaling efficiency vs nodes, every model, both modes
#   at_scale_best_cap.pdf    the best bucket cap vs nodes, every model
# Usage: plots.sh OUT
set -euo pipefail
OUT=$1
CSV="$OUT/replay.csv"
[ -s "$CSV" ] || { echo "plots: no $CSV (run the replay part first)" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plots: gnuplot missing (apt-get install gnuplot-nox)" >&2; exit 2; }
DAT="$OUT/plot-data"
mkdir -p "$DAT"
rm -f "$DAT"/*.dat
# One file per model and mode: ranks step_ms exposed_ms efficiency cap_MiB
awk -F, 'NR > 1 { printf "%s %s %s %s %.4f\n", $2, $13, $12, $14, $4 / 1048576 >> (dir "/" $1 "-" $3 ".dat") }' \
  dir="$DAT" "$CSV"
models=$(tail -n +2 "$CSV" | cut -d, -f1 | awk '!seen[$0]++')
{
  echo "set terminal pdfcairo size 10in,7in font 'Sans,9'"
  echo "set logscale x 2; set grid; set key top left; set xlabel 'nodes (one rank each)'"
  echo "set output '$OUT/at_scale_step.pdf'"
  echo "set multiplot layout 2,2 title 'One training step at P nodes (replay; SMPI allreduce tables)'"
  for m in $models; do
    echo "set title '$m'; set ylabel 'step (ms)'; set y2label 'exposed (ms)'; set ytics nomirror; set y2tics"
    echo "set yrange [0:*]; set y2range [0:*]"
    echo "plot '$DAT/$m-blocking.dat' u 1:2 w lp t 'blocking step', '$DAT/$m-overlapped.dat' u 1:2 w lp t 'overlapped step', \
'$DAT/$m-overlapped_best.dat' u 1:2 w lp t 'overlapped, best cap', '$DAT/$m-overlapped.dat' u 1:3 axes x1y2 w lp dt 2 t 'exposed, overlapped (right axis)'"
  done
  echo "unset multiplot"
  echo "unset y2label; unset y2tics; set ytics mirror"
  echo "set terminal pdfcairo size 9in,4.5in font 'Sans,10'"
  echo "set output '$OUT/at_scale_efficiency.pdf'"
  echo "set title 'Weak-scaling efficiency: compute / step (replay)'; set ylabel 'efficiency'; set yrange [0:1.05]; set key outside right"
  plot="plot"
  for m in $models; do
    plot="$plot '$DAT/$m-overlapped_best.dat' u 1:4 w lp lw 2 t '$m overlapped (best cap)', '$DAT/$m-blocking.dat' u 1:4 w l dt 2 t '$m blocking',"
  done
  echo "${plot%,}"
  echo "set output '$OUT/at_scale_best_cap.pdf'"
  echo "set title 'Best bucket cap (shortest overlapped step)'; set ylabel 'MiB'; set logscale y; set autoscale y; set key outside right"
  plot="plot"
  for m in $models; do plot="$plot '$DAT/$m-overlapped_best.dat' u 1:5 w lp t '$m',"; done
  echo "${plot%,}"
} >"$DAT/plots.gp"
gnuplot "$DAT/plots.gp"
echo "plots: $OUT/at_scale_step.pdf $OUT/at_scale_efficiency.pdf $OUT/at_scale_best_cap.pdf" >&2
