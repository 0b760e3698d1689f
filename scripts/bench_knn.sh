#!/usr/bin/env bash
# The knn noise detector alone at ImageNet size: N x 512 synthetic features of C classes
# (scripts/make_filter_inputs.py: unit class directions, noise of norm SPREAD, 10 % of the
# labels flipped; the features file cluster_filter reads), read row-distributed and searched
# as cluster_filter does (bench/bench_cluster_knn.cpp), with the flags checked against the
# exact search on CHECK evenly spaced rows (one rank only; the check is not in detect_s).
#
#   scripts/bench_knn.sh [BUILD_DIR] [N=1280000] [C=1000]
#   env: RANKS (default 1), THREADS (OpenMP threads a rank, default 2), SEARCH (auto, exact,
#        ivf; default auto: exact below 200,000 rows), PROBES (default: the detector's),
#        CHECK (default 2000), SPREAD (default 0.8), DATA_DIR (default BUILD_DIR/bench-knn;
#        the file is made once per N, C and SPREAD and reused)
#
# Memory: the features are 4 N x 512 bytes (2.6 GB at 1.28 M), held once over the ranks;
# writing them takes a few minutes and that much disk (no class probabilities are written).
# Wants an otherwise idle machine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:-$here/../build}" && pwd)"
n="${2:-1280000}"
classes="${3:-1000}"
ranks="${RANKS:-1}"
threads="${THREADS:-2}"
search="${SEARCH:-auto}"
check="${CHECK:-2000}"
spread="${SPREAD:-0.8}"
data="${DATA_DIR:-$build/bench-knn}/n${n}_c${classes}_s${spread}"
cd "$here/.."
. scripts/env.sh
# Idle OpenMP threads sleep instead of spinning (a shared machine's other work needs them).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
cmake --build "$build" --target bench_cluster_knn -j"$(nproc)" >/dev/null
if [ ! -f "$data/features.h5" ]; then
  /usr/bin/python3 scripts/make_filter_inputs.py "$data.tmp" --n "$n" --features 512 \
    --classes "$classes" --flip 0.1 --spread "$spread" --no-probs
  mv "$data.tmp" "$data"
fi
echo "machine: $(nproc) vCPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- libcore bench || echo ' (modified)')"
probes=()
[ -z "${PROBES:-}" ] || probes=(10 0.7 "$PROBES")
OMP_NUM_THREADS="$threads" mpirun -n "$ranks" "$build/bench/bench_cluster_knn" \
  "$data/features.h5" "$search" "$check" "${probes[@]}" 2> >(grep -v '^WARNING clustering' >&2)
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
