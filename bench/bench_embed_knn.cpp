// k-NN throughput: the first phase of t-SNE (k = 3 x perplexity = 90 neighbours of every
// point among N x D float32 rows), timed alone and, for the exact search, with the
// perplexity calibration + symmetrization that follow it. The rows are the t-SNE
// benchmark's distribution (scripts/bench_embed_sklearn.py gen): 10 centres N(0, 2^2) per
// axis, unit Gaussian noise around them. For the exact search it prints GFLOP/s of the
// distance GEMM work (2 N^2 D flops); for the approximate ones (hnsw, ivf) the recall of
// their lists against the exact ones on 500 evenly spaced query rows.
// Usage: bench_embed_knn [N=50000] [D=50] [k=90] [reps=3] [method=exact|hnsw|ivf]
//                        [ivf lists (0 = auto) | hnsw ef_search] [ivf probes]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "embed/affinity.hpp"
#include "embed/knn.hpp"
#include "embed/knn_approx.hpp"

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Fraction of the exact k lists' rows found by the approximate lists, over `samples`
// evenly spaced query rows of [q0, q1).
double recall(const float* X, int64_t N, int64_t D, int64_t k, int64_t q0, int64_t q1,
              const std::vector<int32_t>& idx, int64_t samples) {
  const int64_t nq = q1 - q0;
  samples = std::min(samples, nq);
  if (samples == 0) return 1.0;
  std::vector<int64_t> rows;
  for (int64_t s = 0; s < samples; ++s) rows.push_back(q0 + s * nq / samples);
  std::vector<int32_t> ei(size_t(samples * k));
  std::vector<float> ed(ei.size());
  sieve::embed::knn_queries(X, N, D, k, rows.data(), samples, ei.data(), ed.data());
  int64_t hits = 0;
  for (int64_t s = 0; s < samples; ++s) {
    const int32_t* a = idx.data() + (rows[s] - q0) * k;
    std::set<int32_t> got(a, a + k);
    for (int64_t t = 0; t < k; ++t) hits += got.count(ei[s * k + t]);
  }
  return double(hits) / double(samples * k);
}
}  // namespace

int main(int argc, char** argv) {
  sieve::MpiSession mpi(&argc, &argv);
  sieve::Comm world = sieve::Comm::world();
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 50000;
  const int64_t D = argc > 2 ? std::atoll(argv[2]) : 50;
  const int64_t k = argc > 3 ? std::atoll(argv[3]) : 90;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 3;
  const std::string method = argc > 5 ? argv[5] : "exact";
  const int64_t p1 = argc > 6 ? std::atoll(argv[6]) : 0;
  const int64_t p2 = argc > 7 ? std::atoll(argv[7]) : 0;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> g;
  std::vector<float> centres(size_t(10 * D));
  for (auto& c : centres) c = 2.f * g(rng);
  std::uniform_int_distribution<int> pick(0, 9);
  std::vector<float> x(static_cast<size_t>(N * D));
  for (int64_t i = 0; i < N; ++i) {
    const int c = pick(rng);
    for (int64_t j = 0; j < D; ++j) x[i * D + j] = centres[size_t(c * D + j)] + g(rng);
  }
  const sieve::Range own = sieve::block_range(N, world.rank(), world.size());
  std::vector<int32_t> idx(static_cast<size_t>(own.size() * k));
  std::vector<float> d2(idx.size());
  std::vector<double> knn_s, aff_s;
  for (int r = 0; r < reps; ++r) {
    world.barrier();
    auto t0 = std::chrono::steady_clock::now();
    if (method == "exact") {
      sieve::embed::knn_exact(x.data(), N, D, k, own.begin, own.end, idx.data(), d2.data());
    } else if (method == "hnsw") {
      sieve::embed::HnswParams hp;
      if (p1 > 0) hp.ef_search = p1;
      sieve::embed::knn_hnsw(x.data(), N, D, k, own.begin, own.end, idx.data(), d2.data(), hp);
    } else if (method == "ivf") {
      sieve::embed::IvfParams ip;
      ip.lists = p1;
      ip.probes = p2;
      sieve::embed::knn_ivf(x.data(), N, D, k, own.begin, own.end, idx.data(), d2.data(), ip);
    } else {
      std::fprintf(stderr, "bench_embed_knn: method must be exact, hnsw or ivf, not '%s'\n",
                   method.c_str());
      return 2;
    }
    world.barrier();
    knn_s.push_back(seconds_since(t0));
    if (method != "exact") continue;
    t0 = std::chrono::steady_clock::now();
    sieve::embed::SparseRows P =
        sieve::embed::build_affinities(world, x.data(), N, D, 30.0, own, nullptr, nullptr);
    world.barrier();
    aff_s.push_back(seconds_since(t0));
  }
  std::sort(knn_s.begin(), knn_s.end());
  const double knn = knn_s[knn_s.size() / 2];
  if (method == "exact") {
    std::sort(aff_s.begin(), aff_s.end());
    if (world.is_root())
      std::printf(
          "sieve_knn n=%lld d=%lld k=%lld ranks=%d knn_seconds=%.3f (%.1f GFLOP/s equiv) "
          "affinity_seconds=%.3f (median of %d)\n",
          (long long)N, (long long)D, (long long)k, world.size(), knn,
          2.0 * double(N) * double(N) * double(D) / knn * 1e-9, aff_s[aff_s.size() / 2], reps);
    return 0;
  }
  const double rec = recall(x.data(), N, D, k, own.begin, own.end, idx, 500);
  if (world.is_root())
    std::printf(
        "sieve_knn method=%s n=%lld d=%lld k=%lld ranks=%d p1=%lld p2=%lld "
        "knn_seconds=%.3f (median of %d) recall=%.4f (rank 0, 500 rows)\n",
        method.c_str(), (long long)N, (long long)D, (long long)k, world.size(), (long long)p1,
        (long long)p2, knn, reps, rec);
  return 0;
}
