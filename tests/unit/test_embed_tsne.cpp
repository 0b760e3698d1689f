// t-SNE pieces against independent references: brute-force k-NN, perplexity calibration,
// Barnes-Hut and FFT repulsion vs the exact O(N^2) sums, cluster separation, KL descent,
// determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "embed/affinity.hpp"
#include "embed/knn.hpp"
#include "embed/repulsion.hpp"
#include "embed/tsne.hpp"

using namespace sieve;
using namespace sieve::embed;

namespace {

// n points per cluster, `clusters` Gaussian clusters (std 1) with centres 30 apart per axis.
std::vector<float> clusters_data(int64_t n, int clusters, int64_t D, uint64_t seed,
                                 std::vector<int>* label) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> X;
  for (int c = 0; c < clusters; ++c)
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < D; ++j) X.push_back(g(rng) + (j == c % D ? 30.f * (1 + c / D) : 0.f));
      if (label) label->push_back(c);
    }
  return X;
}

double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    num += (a[t] - b[t]) * (a[t] - b[t]);
    den += b[t] * b[t];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST(EmbedKnn, MatchesBruteForce) {
  for (int64_t D : {3, 17}) {
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    const int64_t N = 700, k = 7;
    std::vector<float> X(size_t(N * D));
    for (auto& v : X) v = u(rng);
    std::vector<int32_t> idx(size_t(N * k));
    std::vector<float> d2(size_t(N * k));
    knn_exact(X.data(), N, D, k, 0, N, idx.data(), d2.data());
    for (int64_t i = 0; i < N; i += 37) {
      std::vector<std::pair<double, int>> all;
      for (int64_t j = 0; j < N; ++j) {
        if (j == i) continue;
        double s = 0;
        for (int64_t c = 0; c < D; ++c) s += double(X[i * D + c] - X[j * D + c]) * (X[i * D + c] - X[j * D + c]);
        all.emplace_back(s, int(j));
      }
      std::sort(all.begin(), all.end());
      for (int64_t t = 0; t < k; ++t) {
        EXPECT_EQ(idx[i * k + t], all[t].second) << "D=" << D << " i=" << i << " t=" << t;
        EXPECT_NEAR(d2[i * k + t], all[t].first, 1e-4);
      }
    }
  }
}

// Several reference blocks (1024 rows each), query blocks that end mid-way, a query range
// that does not start at 0, and exact ties (duplicated rows): the k nearest by (distance,
// index), as a brute-force search over all rows finds them.
TEST(EmbedKnn, MatchesBruteForceAcrossBlocksAndTies) {
  const int64_t N = 2600, D = 9, k = 30;
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> u(0, 3);  // a small lattice: many exactly equal distances
  std::vector<float> X(size_t(N * D));
  for (auto& v : X) v = float(u(rng));
  const int64_t q0 = 1000, q1 = 2190;
  std::vector<int32_t> idx(size_t((q1 - q0) * k));
  std::vector<float> d2(idx.size());
  knn_exact(X.data(), N, D, k, q0, q1, idx.data(), d2.data());
  for (int64_t i = q0; i < q1; i += 23) {
    std::vector<std::pair<float, int>> all;
    for (int64_t j = 0; j < N; ++j) {
      if (j == i) continue;
      float s = 0;
      for (int64_t c = 0; c < D; ++c) s += (X[i * D + c] - X[j * D + c]) * (X[i * D + c] - X[j * D + c]);
      all.emplace_back(s, int(j));
    }
    std::sort(all.begin(), all.end());
    for (int64_t t = 0; t < k; ++t) {
      EXPECT_EQ(idx[(i - q0) * k + t], all[t].second) << "i=" << i << " t=" << t;
      EXPECT_EQ(d2[(i - q0) * k + t], all[t].first) << "i=" << i << " t=" << t;
    }
  }
}

TEST(EmbedAffinity, CalibrationHitsPerplexityAndPIsSymmetric) {
  std::vector<float> d2 = {0.1f, 0.5f, 0.7f, 1.0f, 1.3f, 2.0f, 2.2f, 3.5f, 4.0f, 6.0f};
  std::vector<double> p(d2.size());
  calibrate_row(d2.data(), int64_t(d2.size()), 4.0, p.data());
  double H = 0, s = 0;
  for (double v : p) {
    s += v;
    H -= v > 0 ? v * std::log(v) : 0;
  }
  EXPECT_NEAR(s, 1.0, 1e-12);
  EXPECT_NEAR(std::exp(H), 4.0, 1e-3);

  std::vector<float> X = clusters_data(40, 3, 5, 2, nullptr);
  const int64_t N = 120;
  Comm self(MPI_COMM_SELF);
  SparseRows P = build_affinities(self, X.data(), N, 5, 5.0, {0, N});
  double total = 0;
  std::vector<double> dense(size_t(N * N), 0.0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t e = P.ptr[i]; e < P.ptr[i + 1]; ++e) {
      dense[i * N + P.col[e]] = P.val[e];
      total += P.val[e];
      if (e > P.ptr[i]) {
        EXPECT_LT(P.col[e - 1], P.col[e]);
      }
    }
  EXPECT_NEAR(total, 1.0, 1e-6);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j) EXPECT_NEAR(dense[i * N + j], dense[j * N + i], 1e-9);
}

// Relative error bounds (stated in docs/embed.md): Barnes-Hut theta=0.5 within 2e-2 of the
// exact repulsive term and 1e-2 of Z; FFT interpolation (p=3, ~1 box per unit length, the
// FIt-SNE default) within 3e-2 and 3e-3 (measured: 2e-2 / 1.3e-3 on the coarse case where
// clumps span 60 units, 1e-4 / 2e-6 on the compact one).
TEST(EmbedRepulsion, BarnesHutAndFftAgreeWithExact) {
  Comm self(MPI_COMM_SELF);
  for (double spread : {2.0, 15.0}) {
    std::mt19937_64 rng(3);
    std::normal_distribution<double> g;
    const int64_t N = 800;
    std::vector<double> Y(size_t(N * 2));
    for (int64_t i = 0; i < N; ++i) {
      double cx = (i % 4) * spread, cy = (i % 3) * spread;  // a few clumps
      Y[2 * i] = cx + g(rng);
      Y[2 * i + 1] = cy + g(rng);
    }
    auto run = [&](RepulsionMethod m, std::vector<double>& force) {
      Repulsion r(m, 2, 0.5);
      std::vector<double> rep(size_t(N * 2));
      double z = r.compute(self, Y.data(), N, {0, N}, rep.data());
      force.resize(rep.size());
      for (size_t t = 0; t < rep.size(); ++t) force[t] = rep[t] / z;
      return z;
    };
    std::vector<double> fe, fb, ff;
    double ze = run(RepulsionMethod::Exact, fe);
    double zb = run(RepulsionMethod::BarnesHut, fb);
    double zf = run(RepulsionMethod::Fft, ff);
    EXPECT_LT(std::abs(zb - ze) / ze, 1e-2) << "spread " << spread;
    EXPECT_LT(std::abs(zf - ze) / ze, 3e-3) << "spread " << spread;
    EXPECT_LT(rel_err(fb, fe), 2e-2) << "spread " << spread;
    EXPECT_LT(rel_err(ff, fe), 3e-2) << "spread " << spread;
    std::printf("spread %g: Z rel err BH %.2e FFT %.2e; force rel err BH %.2e FFT %.2e\n", spread,
                std::abs(zb - ze) / ze, std::abs(zf - ze) / ze, rel_err(fb, fe), rel_err(ff, fe));
  }
}

TEST(EmbedRepulsion, BarnesHut3dAgreesWithExact) {
  Comm self(MPI_COMM_SELF);
  std::mt19937_64 rng(9);
  std::normal_distribution<double> g;
  const int64_t N = 500;
  std::vector<double> Y(size_t(N * 3));
  for (auto& v : Y) v = 4.0 * g(rng);
  std::vector<double> re(size_t(N * 3)), rb(size_t(N * 3));
  double ze = Repulsion(RepulsionMethod::Exact, 3).compute(self, Y.data(), N, {0, N}, re.data());
  double zb = Repulsion(RepulsionMethod::BarnesHut, 3, 0.5).compute(self, Y.data(), N, {0, N}, rb.data());
  EXPECT_LT(std::abs(zb - ze) / ze, 1e-2);
  EXPECT_LT(rel_err(rb, re), 3e-2);
}

class EmbedTsneMethods : public ::testing::TestWithParam<RepulsionMethod> {};

TEST_P(EmbedTsneMethods, SeparatesClustersAndKlDecreases) {
  std::vector<int> label;
  std::vector<float> X = clusters_data(75, 4, 10, 21, &label);
  const int64_t N = int64_t(label.size());
  TsneOptions opt;
  opt.perplexity = 15;
  opt.iterations = 300;
  opt.exaggeration_iterations = 100;
  opt.repulsion = GetParam();
  opt.progress_every = 25;
  Comm self(MPI_COMM_SELF);
  TsneResult r = tsne(self, X.data(), N, 10, opt);
  // Every point's 5 nearest embedded neighbours are in its own cluster.
  int64_t bad = 0;
  for (int64_t i = 0; i < N; ++i) {
    std::vector<std::pair<double, int64_t>> d;
    for (int64_t j = 0; j < N; ++j)
      if (j != i)
        d.emplace_back(std::hypot(r.Y[2 * i] - r.Y[2 * j], r.Y[2 * i + 1] - r.Y[2 * j + 1]), j);
    std::partial_sort(d.begin(), d.begin() + 5, d.end());
    for (int t = 0; t < 5; ++t) bad += label[d[t].second] != label[i];
  }
  EXPECT_EQ(bad, 0);
  // KL falls overall and never rises (beyond noise) after early exaggeration.
  ASSERT_GE(r.kl_history.size(), 10u);
  EXPECT_LT(r.kl_history.back().second, 0.5 * r.kl_history.front().second);
  for (size_t t = 1; t < r.kl_history.size(); ++t)
    if (r.kl_history[t - 1].first > opt.exaggeration_iterations + 25) {
      EXPECT_LE(r.kl_history[t].second, r.kl_history[t - 1].second + 1e-3)
          << "iteration " << r.kl_history[t].first;
    }
  EXPECT_NEAR(r.kl, r.kl_history.back().second, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(All, EmbedTsneMethods,
                         ::testing::Values(RepulsionMethod::Exact, RepulsionMethod::BarnesHut,
                                           RepulsionMethod::Fft));

TEST(EmbedTsne, DeterministicForASeed) {
  std::vector<float> X = clusters_data(50, 3, 6, 4, nullptr);
  const int64_t N = 150;
  TsneOptions opt;
  opt.perplexity = 10;
  opt.iterations = 60;
  opt.exaggeration_iterations = 30;
  opt.pca_init = false;
  opt.progress_every = 0;
  Comm self(MPI_COMM_SELF);
  for (RepulsionMethod m : {RepulsionMethod::Fft, RepulsionMethod::BarnesHut}) {
    opt.repulsion = m;
    opt.seed = 17;
    TsneResult a = tsne(self, X.data(), N, 6, opt);
    TsneResult b = tsne(self, X.data(), N, 6, opt);
    EXPECT_EQ(a.Y, b.Y) << repulsion_name(m);
    opt.seed = 18;
    TsneResult c = tsne(self, X.data(), N, 6, opt);
    EXPECT_NE(a.Y, c.Y) << repulsion_name(m);
  }
}
