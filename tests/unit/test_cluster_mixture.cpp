// GMM (EM, full covariance) and k-means on Iris and on synthetic blobs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "cluster/mixture.hpp"
#include "support/test_util.hpp"

using namespace sieve;
using namespace sieve::cluster;

namespace {

struct Iris {
  std::vector<float> x;  // [150, 4]
  std::vector<int> species;
};

Iris read_iris() {
  Iris d;
  std::ifstream in(test::shared_data("iris.csv"));
  EXPECT_TRUE(in.good()) << test::shared_data("iris.csv");
  std::string line;
  std::getline(in, line);  // header
  std::map<std::string, int> names;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::stringstream ss(line);
    std::string f;
    for (int k = 0; k < 4; ++k) {
      std::getline(ss, f, ',');
      d.x.push_back(std::stof(f));
    }
    std::getline(ss, f);
    auto it = names.emplace(f, int(names.size())).first;
    d.species.push_back(it->second);
  }
  return d;
}

double choose2(double v) {
  return v * (v - 1) / 2;
}

// Adjusted Rand index (Hubert & Arabie), from the contingency table.
double adjusted_rand(const std::vector<int>& a, const std::vector<int>& b) {
  std::map<std::pair<int, int>, double> nij;
  std::map<int, double> ai, bj;
  for (size_t i = 0; i < a.size(); ++i) {
    nij[{a[i], b[i]}] += 1;
    ai[a[i]] += 1;
    bj[b[i]] += 1;
  }
  double sij = 0, sa = 0, sb = 0;
  for (auto& [k, v] : nij) sij += choose2(v);
  for (auto& [k, v] : ai) sa += choose2(v);
  for (auto& [k, v] : bj) sb += choose2(v);
  double expected = sa * sb / choose2(double(a.size()));
  return (sij - expected) / (0.5 * (sa + sb) - expected);
}

}  // namespace

TEST(Gmm, IrisPetalLengthTwoComponentsSeparateSetosa) {
  Iris iris = read_iris();
  ASSERT_EQ(iris.species.size(), 150u);
  std::vector<float> petal;
  for (int i = 0; i < 150; ++i) petal.push_back(iris.x[i * 4 + 2]);
  GmmParams p;
  p.k = 2;
  p.seed = 3;
  GmmModel m = fit_gmm(petal.data(), 150, 1, p);
  std::vector<int32_t> comp;
  gmm_score(m, petal.data(), 150, nullptr, &comp);
  // Setosa (species 0, the first 50 rows) is one component, the other 100 the other.
  int setosa_comp = comp[0];
  int errors = 0;
  for (int i = 0; i < 150; ++i) errors += (comp[i] == setosa_comp) != (iris.species[i] == 0);
  EXPECT_EQ(errors, 0);
  EXPECT_NEAR(m.weight[setosa_comp], 1.0 / 3, 0.02);
  EXPECT_TRUE(std::isfinite(m.log_likelihood));
}

TEST(Gmm, IrisThreeComponentsAgreeWithSpecies) {
  Iris iris = read_iris();
  // Without the file, fail here rather than fit (and read past) an empty array.
  ASSERT_EQ(iris.species.size(), 150u);
  GmmParams p;
  p.k = 3;
  p.n_init = 5;
  p.seed = 1;
  GmmModel m = fit_gmm(iris.x.data(), 150, 4, p);
  std::vector<int32_t> comp;
  std::vector<double> logp;
  gmm_score(m, iris.x.data(), 150, &logp, &comp);
  double ari = adjusted_rand(std::vector<int>(comp.begin(), comp.end()), iris.species);
  EXPECT_GT(ari, 0.8) << "adjusted Rand index of GMM components vs species";
  double mean_logp = 0;
  for (double v : logp) mean_logp += v / 150;
  EXPECT_NEAR(mean_logp, m.log_likelihood, 1e-2);
  // More components never fit worse in log-likelihood (same data, best of inits).
  GmmParams p1 = p;
  p1.k = 1;
  EXPECT_GT(m.log_likelihood, fit_gmm(iris.x.data(), 150, 4, p1).log_likelihood);
}

TEST(Kmeans, SeparatedBlobsAndFarPoints) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> N(0, 0.5f);
  std::vector<float> x;
  std::vector<int> truth;
  for (int i = 0; i < 900; ++i) {
    int b = i % 3;
    x.push_back(10.0f * b + N(rng));
    x.push_back(-5.0f * b + N(rng));
    truth.push_back(b);
  }
  KmeansParams p;
  p.k = 3;
  p.seed = 11;
  KmeansModel m = fit_kmeans(x.data(), 900, 2, p);
  EXPECT_NEAR(adjusted_rand(std::vector<int>(m.assign.begin(), m.assign.end()), truth), 1.0, 1e-9);
  double inertia = 0;
  for (double dd : m.dist) inertia += dd * dd;
  EXPECT_NEAR(inertia, m.inertia, 1e-6 * m.inertia);
  EXPECT_NEAR(quantile({1, 2, 3, 4}, 0.5), 2.5, 1e-12);
  EXPECT_NEAR(quantile({1, 2, 3, 4}, 1.0), 4.0, 1e-12);
}
