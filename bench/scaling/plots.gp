# The scaling study's PDF (bench/scaling/run.sh): speed-up and parallel efficiency against the
# cores used, one curve per workload (1 rank x T threads), and the drivers' steps at every layout.
#   gnuplot -e "csv='scaling.csv'; out='scaling.pdf'; cpu='AMD EPYC (family 26, model 2)'" plots.gp
set datafile separator ","
set terminal pdfcairo size 11in,4in font "Sans,10" noenhanced
set output out
set multiplot layout 1,3 title "hddp scaling on ".cpu
set grid
set key top left
set xlabel "cores (1 rank x T threads)"
set logscale x 2
workloads = "sgemm_1024 sgemm_thin adam_16Mi tanh_16Mi mlp_step_bench mlp_step mnist_step tutorial_step"
threads_only(w) = sprintf("< awk -F, '$1 == \"%s\" && $2 == 1' %s", w, csv)
set title "Speed-up over 1 thread"
set ylabel "speed-up"
plot for [w in workloads] threads_only(w) using 4:7 with linespoints lw 2 pt 7 title w, x with lines dt 2 lc "gray" title "linear"
set title "Parallel efficiency"
set ylabel "speed-up / cores"
set yrange [0:1.2]
plot for [w in workloads] threads_only(w) using 4:8 with linespoints lw 2 pt 7 title w
unset logscale x
set autoscale y
set title "The drivers' steps at every layout (ranks x threads)"
set ylabel "speed-up over 1 x 1"
set xlabel "layout"
set style data histograms
set style fill solid 0.7
set boxwidth 0.8
layouts(w) = sprintf("< awk -F, '$1 == \"%s\" && $4 == %s' %s", w, system(sprintf("awk -F, 'NR > 1 { if ($4 > m) m = $4 } END { print m }' %s", csv)), csv)
plot for [w in "mlp_step mnist_step tutorial_step"] layouts(w) using 7:xtic(sprintf("%dx%d", column(2), column(3))) title w
unset multiplot
