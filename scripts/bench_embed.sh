#!/usr/bin/env bash
# Benchmark of reduce_dims against openTSNE and scikit-learn (from PyPI, in the bench
# virtual environment: scripts/install_deps.sh --bench) on the same data in the same run.
#   1. t-SNE: N points x 50 dims (10 Gaussian clusters) to 2-D; sieve's reduce_dims (PCA 50
#      + FFT t-SNE, 750 iterations) vs openTSNE (FIt-SNE algorithm, its defaults: 250 + 500
#      iterations, n_jobs=2) and sklearn TSNE (Barnes-Hut, 750 iterations, PCA init,
#      learning_rate='auto', perplexity 30). Time and 10-NN preservation for all, the
#      preservation computed by the same python code for every embedding.
#   2. PCA: 50,000 x 512 -> 50: bench_embed_pca vs sklearn PCA (full SVD and randomized).
# sklearn's TSNE runs on all N points (about 6 minutes at 50k on 2 idle cores). For a quick
# look, SKLEARN_TSNE_N=10000 runs it on the first 10,000 points only and extrapolates its
# time as O(N log N) to N (printed as such) -- that underestimates it: at 50k the measured
# time was 371 s against 191 s extrapolated, and its 10-NN figure is then not comparable.
# SKLEARN_TSNE_N=0 skips it (at 1 M points it would take days).
# Above 100,000 points the 10-NN preservation is the mean over a fixed seeded sample of
# 10,000 points (their neighbours among all N, brute force in the input space): the exact
# all-points figure needs N^2 distances. The table says so. From 200,000 points
# reduce_dims's own k-NN is the approximate ivf search (embed.tsne.knn=auto; docs/embed.md).
# SIEVE_TSNE_KNN=exact|ivf|hnsw overrides that choice (embed.tsne.knn, default auto).
# Usage: scripts/bench_embed.sh [N=50000]   (env: SIEVE_BUILD_DIR, OMP_NUM_THREADS,
#        SKLEARN_TSNE_N, SIEVE_TSNE_KNN, SIEVE_BENCH_VENV)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/scripts/env.sh"
N="${1:-50000}"
SKN="${SKLEARN_TSNE_N:-$N}"
VENV="${SIEVE_BENCH_VENV:-$ROOT/.venv-bench}"
[ -x "$VENV/bin/python" ] || { echo "bench_embed: no bench environment at $VENV (run scripts/install_deps.sh --bench)" >&2; exit 1; }
PY="$VENV/bin/python"
PEER="$ROOT/scripts/bench_embed_sklearn.py"
WORK="$(mktemp -d /tmp/bench_embed.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"

$PY "$PEER" gen --out "$WORK/c.h5" --n "$N" --dims 50
t0=$(date +%s.%N)
"$SIEVE_BUILD_DIR/tools/reduce_dims" --input "$WORK/c.h5" --output "$WORK/e.h5" \
  --set run.dir="$WORK" --set embed.tsne.knn="${SIEVE_TSNE_KNN:-auto}" 2> "$WORK/sieve.log"
t1=$(date +%s.%N)
sieve_s=$(echo "$t1 - $t0" | bc)
# Where Sieve's time went (k-NN, affinities, iterations), from its own log.
grep -E "k-NN|t-SNE|wrote" "$WORK/sieve.log" | tail -4 | sed 's/^/  sieve: /' >&2
sieve_line=$($PY "$PEER" eval --input "$WORK/c.h5" --embedding "$WORK/e.h5")
sieve_q=$(echo "$sieve_line" | sed 's/.*knn10=//')
sampled=$(echo "$sieve_line" | sed -n 's/.*sampled=\([0-9]*\).*/\1/p')
ot_line=$($PY "$PEER" opentsne --input "$WORK/c.h5")
ot_s=$(echo "$ot_line" | sed 's/.*seconds=\([0-9.]*\).*/\1/')
ot_q=$(echo "$ot_line" | sed 's/.*knn10=//')
if [ "$SKN" != 0 ]; then
  sk_line=$($PY "$PEER" tsne --input "$WORK/c.h5" --subset "$SKN" --iterations 750)
  sk_s=$(echo "$sk_line" | sed 's/.*seconds=\([0-9.]*\).*/\1/')
  sk_q=$(echo "$sk_line" | sed 's/.*knn10=//')
  sk_extra=$($PY -c "import math;n,m,s=$N,$SKN,$sk_s;print(f'{s*n*math.log(n)/(m*math.log(m)):.1f}')")
fi

$PY "$PEER" gen --out "$WORK/p.h5" --n 50000 --dims 512
pca_sieve=$("$SIEVE_BUILD_DIR/bench/bench_embed_pca" 50000 512 50 | sed 's/.*seconds=\([0-9.]*\).*/\1/')
pca_sk=$($PY "$PEER" pca --input "$WORK/p.h5" --components 50)

echo
echo "t-SNE, $N x 50 (10 clusters) -> 2-D, 750 iterations, OMP_NUM_THREADS=$OMP_NUM_THREADS; $(lscpu | sed -n 's/^Model name: *//p'), load $(cut -d' ' -f1 /proc/loadavg)"
printf "%-34s %10s %14s\n" "method" "seconds" "10-NN kept"
printf "%-34s %10.1f %14s\n" "sieve reduce_dims (PCA+FFT t-SNE)" "$sieve_s" "$sieve_q"
printf "%-34s %10.1f %14s\n" "openTSNE (FIt-SNE, n_jobs=2)" "$ot_s" "$ot_q"
printf "%-34s %10s\n" "speed-up over openTSNE" "$(echo "scale=1; $ot_s / $sieve_s" | bc)x"
if [ "$SKN" = 0 ]; then
  printf "%-34s %10s\n" "sklearn TSNE" "skipped (SKLEARN_TSNE_N=0)"
else
  printf "%-34s %10.1f %14s\n" "sklearn TSNE on $SKN points" "$sk_s" "$sk_q"
  if [ "$SKN" = "$N" ]; then
    printf "%-34s %10s\n" "speed-up over sklearn" "$(echo "scale=1; $sk_s / $sieve_s" | bc)x"
  else
    printf "%-34s %10s %14s\n" "sklearn TSNE, extrapolated to $N" "$sk_extra" "-"
  fi
fi
if [ -n "$sampled" ]; then
  echo "10-NN kept: sampled, mean over $sampled fixed seeded query points (their neighbours among all $N)"
fi
echo
echo "PCA, 50000 x 512 -> 50"
echo "sieve pca_fit+transform: ${pca_sieve} s; $pca_sk"
grep -E "KL|quality" "$WORK/sieve.log" | tail -3
grep -E "k-NN \((hnsw|ivf)\): (index|queries): [0-9]+ points in|k-means cells" "$WORK/sieve.log" || true
