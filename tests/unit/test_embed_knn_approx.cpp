// HNSW k-NN (knn_approx) against the exact search: recall at the t-SNE k = 90 on clustered
// 50-D data, the knn_exact layout (self excluded, sorted by (distance, index), distances of
// the returned rows), reproducibility across runs, thread counts and query splits, and the
// embed.tsne.knn key.
#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/sections.hpp"
#include "embed/knn.hpp"
#include "embed/knn_approx.hpp"
#include "util/error.hpp"

using namespace sieve;
using namespace sieve::embed;

namespace {

// The benchmark's data (scripts/bench_embed_sklearn.py gen): `clusters` centres N(0, 2^2)
// per axis, unit Gaussian noise around them. Inside a cluster the points fill all D
// dimensions, the hard case for a graph search.
std::vector<float> gaussian_clusters(int64_t N, int64_t D, int clusters, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> centres(size_t(clusters * D));
  for (auto& c : centres) c = 2.f * g(rng);
  std::uniform_int_distribution<int> pick(0, clusters - 1);
  std::vector<float> X(size_t(N * D));
  for (int64_t i = 0; i < N; ++i) {
    const int c = pick(rng);
    for (int64_t j = 0; j < D; ++j) X[i * D + j] = centres[c * D + j] + g(rng);
  }
  return X;
}

double dist2(const float* a, const float* b, int64_t D) {
  double s = 0;
  for (int64_t c = 0; c < D; ++c) s += (double(a[c]) - b[c]) * (double(a[c]) - b[c]);
  return s;
}

}  // namespace

TEST(EmbedKnnHnsw, RecallAgainstExactAndSameLayout) {
  const int64_t N = 20000, D = 50, k = 90, q0 = 6000, q1 = 9000;
  const std::vector<float> X = gaussian_clusters(N, D, 10, 3);
  const int64_t nq = q1 - q0;
  std::vector<int32_t> ei(size_t(nq * k)), hi(ei.size());
  std::vector<float> ed(ei.size()), hd(ei.size());
  knn_exact(X.data(), N, D, k, q0, q1, ei.data(), ed.data());
  knn_hnsw(X.data(), N, D, k, q0, q1, hi.data(), hd.data());
  int64_t hits = 0;
  for (int64_t q = 0; q < nq; ++q) {
    const int64_t i = q0 + q;
    const int32_t* row = hi.data() + q * k;
    const float* drow = hd.data() + q * k;
    std::set<int32_t> seen;
    for (int64_t t = 0; t < k; ++t) {
      ASSERT_GE(row[t], 0);
      ASSERT_LT(row[t], N);
      ASSERT_NE(row[t], i) << "row " << i << " lists itself";
      ASSERT_TRUE(seen.insert(row[t]).second) << "row " << i << " lists " << row[t] << " twice";
      ASSERT_NEAR(drow[t], dist2(X.data() + i * D, X.data() + row[t] * D, D), 1e-4 * drow[t]);
      if (t > 0) {
        ASSERT_TRUE(drow[t - 1] < drow[t] || (drow[t - 1] == drow[t] && row[t - 1] < row[t]))
            << "row " << i << " not sorted at " << t;
      }
    }
    // The exact list's first entry can be no farther than the approximate one's.
    EXPECT_LE(ed[q * k], drow[0] * (1 + 1e-5f));
    for (int64_t t = 0; t < k; ++t) hits += seen.count(ei[q * k + t]);
  }
  const double recall = double(hits) / double(nq * k);
  std::printf("hnsw recall at k=%lld on %lld x %lld clusters: %.4f\n", (long long)k, (long long)N,
              (long long)D, recall);
  EXPECT_GE(recall, 0.98);
}

// Same graph, same answers: two runs, one thread against two, the whole range against two
// halves (the rows of two ranks).
TEST(EmbedKnnHnsw, ReproducibleAcrossRunsThreadsAndQuerySplits) {
  const int64_t N = 5000, D = 50, k = 90, half = 2400;
  const std::vector<float> X = gaussian_clusters(N, D, 10, 8);
  const size_t len = size_t(N * k);
  std::vector<int32_t> a(len), b(len), c(len);
  std::vector<float> ad(len), bd(len), cd(len);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  knn_hnsw(X.data(), N, D, k, 0, N, a.data(), ad.data());
  omp_set_num_threads(2);
  knn_hnsw(X.data(), N, D, k, 0, N, b.data(), bd.data());
  knn_hnsw(X.data(), N, D, k, 0, half, c.data(), cd.data());
  knn_hnsw(X.data(), N, D, k, half, N, c.data() + half * k, cd.data() + half * k);
  omp_set_num_threads(threads);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ad, bd);
  EXPECT_EQ(a, c);
  EXPECT_EQ(ad, cd);
}

// k = N-1: every other row, in the exact order.
TEST(EmbedKnnHnsw, AllOtherRowsWhenKIsNMinusOne) {
  const int64_t N = 120, D = 7, k = N - 1;
  const std::vector<float> X = gaussian_clusters(N, D, 3, 4);
  std::vector<int32_t> ei(size_t(N * k)), hi(ei.size());
  std::vector<float> ed(ei.size()), hd(ei.size());
  knn_exact(X.data(), N, D, k, 0, N, ei.data(), ed.data());
  knn_hnsw(X.data(), N, D, k, 0, N, hi.data(), hd.data());
  EXPECT_EQ(ei, hi);
  for (size_t t = 0; t < ed.size(); ++t) ASSERT_NEAR(ed[t], hd[t], 1e-4 * (1 + ed[t]));
}

TEST(EmbedKnnHnsw, ConfigKeyParsedAndBadValuesRefused) {
  const ConfigSchema& schema = pipeline_schema();
  EXPECT_EQ(Config::load(schema, "", {}).get_string("embed.tsne.knn"), "auto");
  Config cfg = Config::load(schema, "", {"embed.tsne.knn=hnsw"});
  EXPECT_EQ(parse_knn_method(cfg.get_string("embed.tsne.knn")), KnnMethod::Hnsw);
  EXPECT_EQ(parse_knn_method("exact"), KnnMethod::Exact);
  EXPECT_THROW(parse_knn_method("annoy"), UsageError);
  std::string err;
  try {
    Config::load(schema, "", {"embed.tsne.knn=annoy"});
  } catch (const UsageError& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("embed.tsne.knn"), std::string::npos) << err;
  EXPECT_NE(err.find("auto, exact, hnsw"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  const std::string help = schema.describe();
  const size_t at = help.find("embed.tsne.knn");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(help.find("hnsw", at), std::string::npos);
  // auto: exact below the threshold, hnsw from it on.
  EXPECT_EQ(resolve_knn_method(KnnMethod::Auto, kHnswMinPoints - 1), KnnMethod::Exact);
  EXPECT_EQ(resolve_knn_method(KnnMethod::Auto, kHnswMinPoints), KnnMethod::Hnsw);
  EXPECT_EQ(resolve_knn_method(KnnMethod::Hnsw, 100), KnnMethod::Hnsw);
  EXPECT_EQ(resolve_knn_method(KnnMethod::Exact, kHnswMinPoints * 10), KnnMethod::Exact);
}
