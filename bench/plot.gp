# SPDX-License-Identifier: MIT
# bench/run.sh's results as bars: per row, amber's and CRIU's dump and restore
# times, relative to CRIU's (CRIU = 1; lower is faster).  Variables: dat, png, title.
set terminal pngcairo size 1100,520 font ",10"
set output png
set title title
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set ylabel "time relative to CRIU's (CRIU = 1)"
set yrange [0:*]
set grid ytics
set xtics rotate by -30 scale 0
# above the bars: a row near CRIU (1) would be hidden behind the key inside
set key outside top center horizontal
set datafile missing "-"
ratio(a, c) = (valid(a) && valid(c) && column(c) > 0) ? column(a) / column(c) : NaN
plot dat using (ratio(2, 4)):xtic(1) title "amber dump / CRIU dump", \
     '' using (ratio(3, 5)) title "amber restore / CRIU restore", \
     1 with lines lw 2 lc rgb "black" title "CRIU", \
     0.5 with lines dt 2 lc rgb "red" title "goal (0.5)"
