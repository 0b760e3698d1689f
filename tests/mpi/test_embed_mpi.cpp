// Under mpiexec -n 2 / -n 3: distributed PCA equals the serial answer computed on rank 0
// alone; distributed t-SNE separates clusters, is deterministic for a seed and rank
// count, and its quality figures agree across ranks; affinities from the HNSW k-NN are the
// same on every rank count (each rank builds the graph over all rows, queries its own).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "embed/affinity.hpp"
#include "embed/pca.hpp"
#include "embed/quality.hpp"
#include "embed/tsne.hpp"

using namespace sieve;
using namespace sieve::embed;

namespace {
std::vector<float> blobs(int64_t N, int64_t D, int clusters, std::vector<int>* label) {
  std::mt19937_64 rng(42);
  std::normal_distribution<float> g;
  std::vector<float> X(size_t(N * D));
  for (int64_t i = 0; i < N; ++i) {
    int c = int(i % clusters);
    if (label) label->push_back(c);
    for (int64_t j = 0; j < D; ++j)
      X[i * D + j] = g(rng) * (1.0f + 0.3f * j) + (j == c ? 25.f : 0.f) + 5.f;
  }
  return X;
}
}  // namespace

TEST(EmbedMpi, DistributedPcaMatchesSerial) {
  Comm world = Comm::world();
  const int64_t N = 1001, F = 16, k = 6;
  std::vector<float> X = blobs(N, F, 4, nullptr);
  Range r = block_range(N, world.rank(), world.size());
  PcaModel dist = pca_fit(world, X.data() + r.begin * F, r.size(), F, k, false);
  PcaModel ser = pca_fit(Comm(MPI_COMM_SELF), X.data(), N, F, k, false);
  EXPECT_EQ(dist.samples, N);
  for (int64_t c = 0; c < k; ++c) {
    EXPECT_NEAR(dist.variance[c], ser.variance[c], 1e-8 * ser.variance[0]);
    EXPECT_NEAR(dist.explained_ratio[c], ser.explained_ratio[c], 1e-10);
    for (int64_t j = 0; j < F; ++j)
      EXPECT_NEAR(dist.basis[c * F + j], ser.basis[c * F + j], 1e-7) << c << "," << j;
  }
  std::vector<float> a(size_t(r.size() * k)), b(size_t(N * k));
  pca_transform(dist, X.data() + r.begin * F, r.size(), a.data());
  pca_transform(ser, X.data(), N, b.data());
  for (int64_t t = 0; t < r.size() * k; ++t) EXPECT_NEAR(a[t], b[r.begin * k + t], 1e-4);
}

TEST(EmbedMpi, DistributedTsneSeparatesAndIsDeterministic) {
  Comm world = Comm::world();
  std::vector<int> label;
  const int64_t N = 180, D = 8;
  std::vector<float> X = blobs(N, D, 3, &label);
  for (RepulsionMethod m : {RepulsionMethod::BarnesHut, RepulsionMethod::Fft}) {
    TsneOptions opt;
    opt.perplexity = 12;
    opt.iterations = 300;
    opt.exaggeration_iterations = 100;
    opt.repulsion = m;
    opt.progress_every = 0;
    TsneResult a = tsne(world, X.data(), N, D, opt);
    TsneResult b = tsne(world, X.data(), N, D, opt);
    EXPECT_EQ(a.Y, b.Y) << repulsion_name(m);
    // Every rank holds the same embedding.
    double s = 0;
    for (double v : a.Y) s += v;
    EXPECT_EQ(world.allreduce_max(s), world.allreduce_min(s));
    // Nearest embedded neighbour of (all but at most one) point is in its cluster.
    int bad = 0;
    for (int64_t i = 0; i < N; ++i) {
      double best = 1e300;
      int64_t bj = -1;
      for (int64_t j = 0; j < N; ++j) {
        if (j == i) continue;
        double d = std::hypot(a.Y[2 * i] - a.Y[2 * j], a.Y[2 * i + 1] - a.Y[2 * j + 1]);
        if (d < best) best = d, bj = j;
      }
      bad += label[bj] != label[i];
    }
    EXPECT_LE(bad, 1) << repulsion_name(m);  // a single stray point is tolerated
    // Quality figures: distributed == serial on rank 0 for the same embedding.
    Quality qd = embedding_quality(world, X.data(), N, D, a.Y.data(), 2, 100);
    Quality qs = embedding_quality(Comm(MPI_COMM_SELF), X.data(), N, D, a.Y.data(), 2, 100);
    EXPECT_NEAR(qd.knn_preservation, qs.knn_preservation, 1e-12);
    EXPECT_NEAR(qd.trustworthiness, qs.trustworthiness, 1e-12);
    EXPECT_GT(qd.trustworthiness, 0.8);
  }
}

// The approximate searches: every rank builds the same index (one-thread graph; seeded
// k-means) and queries its own rows, so P is the one-rank P. ivf at 6,000 rows has 77
// cells, 64 probed (not a full scan).
TEST(EmbedMpi, ApproximateKnnAffinitiesAreTheOneRankAffinities) {
  Comm world = Comm::world();
  for (const auto& [method, N] :
       {std::pair{KnnMethod::Hnsw, int64_t(700)}, std::pair{KnnMethod::Ivf, int64_t(6000)}}) {
    SCOPED_TRACE(knn_method_name(method));
    const int64_t D = 8;
    std::vector<float> X = blobs(N, D, 3, nullptr);
    const Range own = block_range(N, world.rank(), world.size());
    std::vector<int32_t> dist_knn, one_knn;
    int64_t k = 0;
    KnnMethod used = KnnMethod::Auto;
    SparseRows dist =
        build_affinities(world, X.data(), N, D, 10.0, own, &dist_knn, &k, method, &used);
    EXPECT_EQ(used, method);
    SparseRows one = build_affinities(Comm(MPI_COMM_SELF), X.data(), N, D, 10.0, {0, N}, &one_knn,
                                      nullptr, method);
    ASSERT_EQ(int64_t(dist_knn.size()), own.size() * k);
    for (int64_t t = 0; t < own.size() * k; ++t)
      ASSERT_EQ(dist_knn[t], one_knn[own.begin * k + t]) << "entry " << t;
    for (int64_t r = 0; r < own.size(); ++r) {
      const int64_t g = own.begin + r;
      ASSERT_EQ(dist.ptr[r + 1] - dist.ptr[r], one.ptr[g + 1] - one.ptr[g]) << "row " << g;
      for (int64_t e = 0; e < dist.ptr[r + 1] - dist.ptr[r]; ++e) {
        EXPECT_EQ(dist.col[dist.ptr[r] + e], one.col[one.ptr[g] + e]);
        EXPECT_EQ(dist.val[dist.ptr[r] + e], one.val[one.ptr[g] + e]);
      }
    }
  }
}
