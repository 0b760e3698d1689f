// t-SNE (van der Maaten & Hinton 2008) with k-NN affinities (exact, or approximate for large N) and
// pluggable repulsion (exact / Barnes-Hut / FIt-SNE FFT interpolation), split over MPI ranks.
//
// Distribution: every rank holds all input rows X [N,D] (the PCA output is small) and all
// positions Y [N,d]; rank r owns the contiguous slice block_range(N, r, size) for the
// k-NN search, its rows of P, the attractive forces, its share of the repulsion, and the
// optimiser state (update, gains). After each step the owned positions are allgathered.
// Every cross-point sum is done in a fixed order, so a run is bitwise deterministic for a
// given seed and rank count (independent of the OpenMP thread count); the HNSW graph is
// built by one thread for the same reason (knn_approx.hpp).
//
// Schedule (the standard one): init = first d input columns (the leading PCA components)
// scaled to std 1e-4, or seeded Gaussian noise of std 1e-4; early exaggeration 12 for
// 250 iterations with momentum 0.5, then momentum 0.8; learning rate max(200, N/12)/4
// (FIt-SNE's step for a gradient that keeps the factor 4);
// per-coordinate gains (+0.2 when the gradient changes sign, x0.8 otherwise, min 0.01);
// the embedding is re-centred every iteration.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "embed/knn_approx.hpp"
#include "embed/repulsion.hpp"

namespace sieve::embed {

struct TsneOptions {
  int dims = 2;
  double perplexity = 30.0;
  int iterations = 750;
  double exaggeration = 12.0;
  int exaggeration_iterations = 250;
  // 0: per phase, max(200, N / that phase's exaggeration) / 4 (openTSNE's "auto" in our
  // gradient's units): N/48 while exaggerating, N/4 afterwards.
  double learning_rate = 0.0;
  double momentum = 0.5, final_momentum = 0.8;
  // Each point's step is clipped to this length (openTSNE's max_step_norm): the large
  // learning rate cannot throw points off (and the FFT grid with them). 0: no clipping.
  double max_step_norm = 5.0;
  RepulsionMethod repulsion = RepulsionMethod::Fft;
  KnnMethod knn = KnnMethod::Auto;  // input k-NN: exact, hnsw, ivf, or by N (knn_approx.hpp)
  double theta = 0.5;
  bool pca_init = true;  // false: Gaussian init from `seed`
  uint64_t seed = 1;
  int progress_every = 50;      // KL + rate + ETA lines (rank 0); 0: silent
  std::string label = "t-SNE";  // prefix of the progress lines
};

struct TsneResult {
  std::vector<double> Y;                           // [N,dims], on every rank
  double kl = 0.0;                                 // final KL(P || Q) (without exaggeration)
  std::vector<std::pair<int, double>> kl_history;  // (iteration, KL) at every progress point
  std::vector<int32_t> knn;  // the owned rows' input k-NN lists [own.size(), knn_k]
  int64_t knn_k = 0;
  KnnMethod knn_used = KnnMethod::Exact;  // the search that built them
  double seconds = 0.0;
  double seconds_knn = 0.0;  // the k-NN search alone (part of seconds_affinity)
  // Wall-time split of `seconds` (rank-local): k-NN + P, attractive forces (incl. the KL
  // terms), repulsion, gradient step + allgather + re-centring.
  double seconds_affinity = 0.0, seconds_attract = 0.0, seconds_repulse = 0.0, seconds_update = 0.0;
};

// Collective. X [N,D] row-major, identical on every rank. Needs N-1 >= 3 x perplexity.
TsneResult tsne(const Comm& comm, const float* X, int64_t N, int64_t D, const TsneOptions& opt);

// The learning rate the schedule uses for N points in a phase with `exaggeration`.
double tsne_learning_rate(const TsneOptions& opt, int64_t N, double exaggeration);

}  // namespace sieve::embed
