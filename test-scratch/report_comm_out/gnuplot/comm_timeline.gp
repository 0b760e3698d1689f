set terminal pngcairo size 900,520 enhanced font 'sans,11' background rgb 'white'
set output 'figures/comm_timeline.png'
set datafile separator ','
set style data histogram
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set grid y
set key outside right top
set xtics rotate by -30
set ylabel 'ms per step (mean over ranks)'
set title 'Where a step goes, per strategy and rank count (from --trace)'
plot 'data/comm_timeline.csv' skip 1 using 5:xtic(1) title 'compute', '' skip 1 using ($6-$7) title 'exposed comm', '' skip 1 using 7 title 'negotiation', '' skip 1 using 8 title 'data wait', '' skip 1 using 9 title 'optimizer', '' skip 1 using 10 title 'other'
