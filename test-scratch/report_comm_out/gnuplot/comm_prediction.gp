set terminal pngcairo size 1100,560 enhanced font 'sans,11' background rgb 'white'
set output 'figures/comm_prediction.png'
set datafile separator ','
set logscale xy 2
set grid
set key outside right top
set xlabel 'ranks p'
set ylabel 'non-compute time per step (s)'
set format y '%g'
set title 'Step time beyond compute per strategy: model (lines), this machine (points)'
plot 'data/comm_prediction.csv' skip 1 using 1:2 with l lw 2 lc 1 title 'buckets', '' skip 1 using 1:3 with l lw 2 lc 2 title 'fusion-queue', '' skip 1 using 1:4 with l lw 2 lc 3 title 'parameter-server', '' skip 1 using 1:5 with p pt 7 ps 1.5 lc 1 title 'buckets (measured)', '' skip 1 using 1:6 with p pt 5 ps 1.5 lc 2 title 'fusion-queue (measured)', '' skip 1 using 1:7 with p pt 9 ps 1.5 lc 3 title 'parameter-server (measured)'
