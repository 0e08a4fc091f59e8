#!/usr/bin/env bash
# Draws bench/run.sh's figures as SVG charts for docs/benchmarks.md, with Debian's gnuplot
# (gnuplot-nox): calls per second by generator (section 1, the tight loop), and rows per second
# and primary-key bytes per row by clients (section 2, bulk inserts).
#   bash bench/charts.sh [CSV] [OUTDIR]   (default: bench/results/latest.csv, docs/img)
# bench/run.sh calls it at its end; the charts say which CSV and when they were drawn from.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
csv="${1:-$root/bench/results/latest.csv}"
out="${2:-$root/docs/img}"
if ! command -v gnuplot >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        # (scripts/lib.sh's install waits for dpkg's lock, and tries a failure once more)
        # shellcheck source=SCRIPTDIR/../scripts/lib.sh
        source "$root/scripts/lib.sh"
        apt_install_missing gnuplot-nox
    else
        echo "bench/charts.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1
    fi
fi
mkdir -p "$out"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
stamp="from $(basename "$(dirname "$csv")")/$(basename "$csv")"

# 1. calls/s by generator: one bar each, in the CSV's order
awk -F, '$1 == "tight" && $3 == "calls_per_s" { gsub(/"/, "", $2); printf "\"%s\" %s\n", $2, $4 }' "$csv" > "$tmp/calls.dat"
# 2. and 3. by clients: one row per client count, one column per generator (serial, cosid, uuid)
for metric in rows_per_s pk_bytes_per_row; do
    awk -F, -v m="$metric" '$1 == "bulk" && $3 == m {
            split($2, a, " c="); g = a[1]; sub(/^b_/, "", g); c = a[2]
            v[c, g] = $4; if (!(c in seen)) { seen[c] = 1; order[++n] = c } }
         END { for (i = 1; i <= n; i++) { c = order[i]; print c, v[c, "serial"], v[c, "cosid"], v[c, "uuid"] } }' \
        "$csv" > "$tmp/$metric.dat"
done
for f in calls rows_per_s pk_bytes_per_row; do
    [ -s "$tmp/$f.dat" ] || { echo "bench/charts.sh: no figures for $f in $csv" >&2; exit 1; }
done

gnuplot <<EOF
set terminal svg size 760,420 dynamic font "sans,12" background "white"
set style fill solid 0.85 border -1
set grid ytics lc rgb "#dddddd"
set key top left noenhanced
set yrange [0:*]
set format y "%.1s%c"

set output "$out/bench-calls.svg"
set title "Ids per second in one backend, by generator (higher is better)\n{/*0.8 $stamp}"
set ylabel "calls/s"
set style data histograms
set boxwidth 0.7
set xtics rotate by -20 noenhanced
plot "$tmp/calls.dat" using 2:xtic(1) notitle lc rgb "#4477aa"

set output "$out/bench-rows.svg"
set title "Rows per second, bulk INSERT with an id default, by concurrent clients (higher is better)\n{/*0.8 $stamp}"
set ylabel "rows/s"
set xlabel "clients"
set style histogram clustered gap 1
set xtics norotate
plot "$tmp/rows_per_s.dat" using 2:xtic(1) title "bigserial" lc rgb "#999999", \
     "" using 3 title "cosid_next()" lc rgb "#4477aa", \
     "" using 4 title "gen_random_uuid()" lc rgb "#cc6677"

set output "$out/bench-pk-bytes.svg"
set title "Primary-key index bytes per row, by concurrent clients (lower is better)\n{/*0.8 $stamp}"
set ylabel "bytes per row"
set format y "%g"
plot "$tmp/pk_bytes_per_row.dat" using 2:xtic(1) title "bigserial" lc rgb "#999999", \
     "" using 3 title "cosid_next()" lc rgb "#4477aa", \
     "" using 4 title "gen_random_uuid()" lc rgb "#cc6677"
EOF
echo "charts: $out/bench-calls.svg, $out/bench-rows.svg, $out/bench-pk-bytes.svg (from $csv)"
