#!/usr/bin/env bash
# DBSCAN: Sieve's exact grid DBSCAN vs scikit-learn and the `dbscan` package (Wang, Gu &
# Shun, SIGMOD 2020; parallel exact, from the bench virtual environment when there is one:
# scripts/install_deps.sh --bench) on the same 2-D blobs, same run.
#
#   scripts/bench_cluster.sh [BUILD_DIR] [SIZES...]
#   env: THREADS (default 2), SKLEARN_MEM_GB (address-space limit for sklearn, default 8),
#        SKLEARN_TIMEOUT_S (default 600), SKLEARN_MAX_N (skip sklearn above, default 10000000),
#        DBSCAN_PKG_MAX_N (skip the dbscan package above; default: never skip. It needs
#        ~0.4 KB a point: 4.1 GB at 10 M, killed at 23 GB on 100 M)
#
# Peak memory: each DBSCAN process runs under /usr/bin/time; sieve_rss is the peak resident
# set of bench_cluster_dbscan (points generated in the process + the clustering), the dbscan
# package's the peak of its Python process (numpy points + the package's structures).
#
# Data and eps: see bench/bench_cluster_dbscan.cpp (eps = 0.5 * sqrt(50000 / N), min_samples
# 10). scikit-learn runs under `prlimit --as` so that its neighbourhood lists fail with
# "out of memory" instead of taking the shared machine down. The noise and cluster counts
# of both must agree (DBSCAN's noise set and core partition are unique).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(50000 1000000 10000000)
threads="${THREADS:-2}"
# Idle OpenMP threads sleep instead of spinning: on a shared, oversubscribed machine
# spinning burns the CPU the working threads need (and inflates CPU time).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
mem_gb="${SKLEARN_MEM_GB:-8}"
timeout_s="${SKLEARN_TIMEOUT_S:-600}"
max_n="${SKLEARN_MAX_N:-10000000}"
pkg_max_n="${DBSCAN_PKG_MAX_N:-}"
bin="$build/bench/bench_cluster_dbscan"
[ -x "$bin" ] || { echo "missing $bin (make bench_cluster_dbscan)" >&2; exit 1; }
venv="${SIEVE_BENCH_VENV:-$here/../.venv-bench}"
py=/usr/bin/python3
[ -x "$venv/bin/python" ] && py="$venv/bin/python"
has_dbscan=0
"$py" -c "import dbscan" 2>/dev/null && has_dbscan=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Wall times on a shared machine are noisy; CPU times (all threads) are the robust measure.
printf "%-9s %-8s %-4s %-9s %-9s %-9s %-8s %-8s %-30s %-10s %-8s %-8s\n" N eps thr sieve_s sieve_cpu \
  sieve_rss clusters noise sklearn_s sklearn_cpu x_wall x_cpu
for n in "${sizes[@]}"; do
  OMP_NUM_THREADS="$threads" /usr/bin/time -f "%M" -o "$tmp/rss" \
    "$bin" "$n" --write "$tmp/points.bin" >"$tmp/sieve.out"
  read -r _ eps ms thr wall cpu clusters noise <"$tmp/sieve.out"
  rss="$(awk '{ printf "%.0fMB", $1 / 1024 }' "$tmp/rss")"
  sk="skipped (N > $max_n)"
  skcpu="-"
  speed="-"
  speedc="-"
  if [ "$n" -le "$max_n" ]; then
    set +e
    out="$(OMP_NUM_THREADS="$threads" timeout "$timeout_s" prlimit --as=$((mem_gb << 30)) \
      "$py" "$here/bench_cluster_sklearn.py" "$tmp/points.bin" "$eps" "$ms" "$threads" 2>&1)"
    rc=$?
    set -e
    if [ $rc -eq 124 ]; then
      sk="timeout (> ${timeout_s} s)"
    elif [ $rc -ne 0 ] || echo "$out" | grep -qiE "out-of-memory|MemoryError|Unable to allocate|bad_alloc"; then
      sk="out of memory (${mem_gb} GiB)"
    else
      read -r skwall skcpu skclusters sknoise <<<"$(echo "$out" | tail -1)"
      sk="$skwall"
      speed="$(awk -v a="$skwall" -v b="$wall" 'BEGIN { printf "%.1fx", a / b }')"
      speedc="$(awk -v a="$skcpu" -v b="$cpu" 'BEGIN { printf "%.1fx", a / b }')"
      if [ "$skclusters" != "$clusters" ] || [ "$sknoise" != "$noise" ]; then
        sk="$sk (MISMATCH: $skclusters clusters, $sknoise noise)"
      fi
    fi
  fi
  printf "%-9s %-8.4g %-4s %-9s %-9s %-9s %-8s %-8s %-30s %-10s %-8s %-8s\n" "$n" "$eps" "$thr" "$wall" \
    "$cpu" "$rss" "$clusters" "$noise" "$sk" "$skcpu" "$speed" "$speedc"
  if [ $has_dbscan -eq 1 ] && [ -n "$pkg_max_n" ] && [ "$n" -gt "$pkg_max_n" ]; then
    echo "  dbscan package: skipped (N > DBSCAN_PKG_MAX_N = $pkg_max_n)"
  elif [ $has_dbscan -eq 1 ]; then
    set +e
    out="$(OMP_NUM_THREADS="$threads" PARLAY_NUM_THREADS="$threads" timeout "$timeout_s" \
      /usr/bin/time -f "%M" -o "$tmp/rss" \
      "$py" "$here/bench_cluster_sklearn.py" "$tmp/points.bin" "$eps" "$ms" "$threads" dbscan 2>&1)"
    rc=$?
    set -e
    if [ $rc -ne 0 ]; then
      echo "  dbscan package: failed or timed out (exit $rc)"
    else
      read -r dwall dcpu dclusters dnoise <<<"$(echo "$out" | tail -1)"
      same="same clusters and noise"
      { [ "$dclusters" = "$clusters" ] && [ "$dnoise" = "$noise" ]; } || same="MISMATCH: $dclusters clusters, $dnoise noise"
      drss="$(awk '{ printf "%.0fMB", $1 / 1024 }' "$tmp/rss")"
      printf "  dbscan package: %s s wall, %s s CPU, peak RSS %s; sieve %s wall, %s CPU (%s)\n" \
        "$dwall" "$dcpu" "$drss" \
        "$(awk -v a="$dwall" -v b="$wall" 'BEGIN { printf "%.1fx", a / b }')" \
        "$(awk -v a="$dcpu" -v b="$cpu" 'BEGIN { printf "%.1fx", a / b }')" "$same"
    fi
  fi
done
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
