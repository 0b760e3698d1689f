// PCA against an independently known eigendecomposition: data built so that its sample
// covariance is exactly Q diag(lambda) Q^T for a random orthogonal Q and chosen lambda.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "embed/pca.hpp"

using namespace sieve;
using namespace sieve::embed;

namespace {

// Orthonormalise the columns of A [n,m] (row-major) in place (modified Gram-Schmidt).
void orthonormalise_columns(std::vector<double>& A, int64_t n, int64_t m) {
  for (int64_t c = 0; c < m; ++c) {
    for (int64_t p = 0; p < c; ++p) {
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += A[i * m + c] * A[i * m + p];
      for (int64_t i = 0; i < n; ++i) A[i * m + c] -= dot * A[i * m + p];
    }
    double nrm = 0;
    for (int64_t i = 0; i < n; ++i) nrm += A[i * m + c] * A[i * m + c];
    nrm = std::sqrt(nrm);
    for (int64_t i = 0; i < n; ++i) A[i * m + c] /= nrm;
  }
}

struct Known {
  int64_t n, F;
  std::vector<double> Q, lambda, mean;  // Q [F,F] columns = eigenvectors
  std::vector<float> X;                 // [n,F]
};

Known make_known(int64_t n, int64_t F, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  Known k{n, F, std::vector<double>(size_t(F * F)), {}, {}, {}};
  for (auto& v : k.Q) v = g(rng);
  orthonormalise_columns(k.Q, F, F);
  for (int64_t c = 0; c < F; ++c) k.lambda.push_back(20.0 / double(1 + c * c));  // distinct
  for (int64_t c = 0; c < F; ++c) k.mean.push_back(3.0 * g(rng));
  // Z [n,F]: centred, orthonormal columns scaled by sqrt(n-1) -> Z^T Z/(n-1) = I exactly.
  std::vector<double> Z(size_t(n * F));
  for (auto& v : Z) v = g(rng);
  for (int64_t c = 0; c < F; ++c) {
    double m = 0;
    for (int64_t i = 0; i < n; ++i) m += Z[i * F + c];
    for (int64_t i = 0; i < n; ++i) Z[i * F + c] -= m / double(n);
  }
  orthonormalise_columns(Z, n, F);
  k.X.resize(size_t(n * F));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < F; ++j) {
      double s = k.mean[j];
      for (int64_t c = 0; c < F; ++c)
        s += Z[i * F + c] * std::sqrt(double(n - 1)) * std::sqrt(k.lambda[c]) * k.Q[j * F + c];
      k.X[i * F + j] = float(s);
    }
  return k;
}

}  // namespace

TEST(EmbedPca, MatchesKnownEigendecomposition) {
  Known K = make_known(500, 12, 7);
  Comm self(MPI_COMM_SELF);
  const int64_t k = 5;
  PcaModel m = pca_fit(self, K.X.data(), K.n, K.F, k, false);
  ASSERT_EQ(m.components, k);
  double total = 0;
  for (double l : K.lambda) total += l;
  for (int64_t c = 0; c < k; ++c) {
    EXPECT_NEAR(m.variance[c], K.lambda[c], 1e-4 * K.lambda[0]) << "component " << c;
    EXPECT_NEAR(m.explained_ratio[c], K.lambda[c] / total, 1e-5);
    double dot = 0;  // |<pca component, true eigenvector>| == 1 up to sign
    for (int64_t j = 0; j < K.F; ++j) dot += m.basis[c * K.F + j] * K.Q[j * K.F + c];
    EXPECT_NEAR(std::abs(dot), 1.0, 1e-5) << "component " << c;
  }
  for (int64_t j = 0; j < K.F; ++j) EXPECT_NEAR(m.mean[j], K.mean[j], 1e-4);
}

TEST(EmbedPca, ProjectionAndWhitening) {
  Known K = make_known(400, 8, 11);
  Comm self(MPI_COMM_SELF);
  PcaModel m = pca_fit(self, K.X.data(), K.n, K.F, 3, true);
  std::vector<float> out(size_t(K.n * 3));
  pca_transform(m, K.X.data(), K.n, out.data());
  for (int c = 0; c < 3; ++c) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < K.n; ++i) {
      s += out[i * 3 + c];
      s2 += double(out[i * 3 + c]) * out[i * 3 + c];
    }
    EXPECT_NEAR(s / double(K.n), 0.0, 1e-3);
    EXPECT_NEAR(s2 / double(K.n - 1), 1.0, 1e-3) << "whitened component " << c;
  }
  // Unwhitened projection of row 0 equals (x - mean) . basis, computed by hand.
  PcaModel u = pca_fit(self, K.X.data(), K.n, K.F, 3, false);
  pca_transform(u, K.X.data(), K.n, out.data());
  for (int c = 0; c < 3; ++c) {
    double ref = 0;
    for (int64_t j = 0; j < K.F; ++j) ref += (K.X[j] - u.mean[j]) * u.basis[c * K.F + j];
    EXPECT_NEAR(out[c], ref, 1e-3 * std::sqrt(K.lambda[0]));
  }
}

TEST(EmbedPca, ComponentsClippedToFeatureCount) {
  Known K = make_known(50, 4, 3);
  Comm self(MPI_COMM_SELF);
  PcaModel m = pca_fit(self, K.X.data(), K.n, K.F, 10, false);
  EXPECT_EQ(m.components, 4);
  double sum = 0;
  for (double r : m.explained_ratio) sum += r;
  EXPECT_NEAR(sum, 1.0, 1e-9);
}
