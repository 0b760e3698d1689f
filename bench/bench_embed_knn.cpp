// Exact k-NN throughput: the first phase of t-SNE (k = 3 x perplexity = 90 neighbours of
// every point among N x D float32 Gaussian-cluster rows), timed alone and with the
// perplexity calibration + symmetrization that follow it. Prints GFLOP/s of the distance
// GEMM work (2 N^2 D flops counted once per ordered pair, as a one-sided search does).
// Usage: bench_embed_knn [N=50000] [D=50] [k=90] [reps=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "comm/comm.hpp"
#include "embed/affinity.hpp"
#include "embed/knn.hpp"

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

int main(int argc, char** argv) {
  sieve::MpiSession mpi(&argc, &argv);
  sieve::Comm world = sieve::Comm::world();
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 50000;
  const int64_t D = argc > 2 ? std::atoll(argv[2]) : 50;
  const int64_t k = argc > 3 ? std::atoll(argv[3]) : 90;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 3;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> g;
  std::vector<float> x(static_cast<size_t>(N * D));
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < D; ++j) x[i * D + j] = g(rng) + (j == i % 10 ? 6.f : 0.f);
  const sieve::Range own = sieve::block_range(N, world.rank(), world.size());
  std::vector<int32_t> idx(static_cast<size_t>(own.size() * k));
  std::vector<float> d2(idx.size());
  std::vector<double> knn_s, aff_s;
  for (int r = 0; r < reps; ++r) {
    world.barrier();
    auto t0 = std::chrono::steady_clock::now();
    sieve::embed::knn_exact(x.data(), N, D, k, own.begin, own.end, idx.data(), d2.data());
    world.barrier();
    knn_s.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    sieve::embed::SparseRows P =
        sieve::embed::build_affinities(world, x.data(), N, D, 30.0, own, nullptr, nullptr);
    world.barrier();
    aff_s.push_back(seconds_since(t0));
  }
  std::sort(knn_s.begin(), knn_s.end());
  std::sort(aff_s.begin(), aff_s.end());
  const double knn = knn_s[knn_s.size() / 2], aff = aff_s[aff_s.size() / 2];
  if (world.is_root())
    std::printf(
        "sieve_knn n=%lld d=%lld k=%lld ranks=%d knn_seconds=%.3f (%.1f GFLOP/s equiv) "
        "affinity_seconds=%.3f (median of %d)\n",
        (long long)N, (long long)D, (long long)k, world.size(), knn,
        2.0 * double(N) * double(N) * double(D) / knn * 1e-9, aff, reps);
  return 0;
}
