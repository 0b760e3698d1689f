// The alternatives to DBSCAN for noise filtering: k-means and a Gaussian mixture by EM.
//
// k-means: k-means++ seeding (D^2 sampling), Lloyd iterations, best of n_init runs by
// inertia. Points far from their centroid are the noise candidates.
// GMM: full covariances, each initialisation seeded by a k-means++ / k-means run with its
// own seed (as scikit-learn's init_params="kmeans"), EM until the mean log-likelihood
// improves by less than tol; reg_covar is added to every covariance diagonal (sklearn's
// default 1e-6) so that a collapsing component stays invertible. Best of n_init by final
// log-likelihood. Points of low density log p(x) are the noise candidates.
// Inputs are row-major float [n, d]; work is in double; assignment loops use OpenMP.
#pragma once
#include <cstdint>
#include <vector>

namespace sieve::cluster {

struct KmeansParams {
  int k = 8;
  int n_init = 3;
  int max_iter = 300;
  double tol = 1e-6;  // stop when the centres move less than tol (relative to data scale)
  uint64_t seed = 0;
};

struct KmeansModel {
  int k = 0, d = 0;
  std::vector<double> centers;  // [k, d]
  std::vector<int32_t> assign;  // [n] nearest centre
  std::vector<double> dist;     // [n] Euclidean distance to that centre
  double inertia = 0;           // sum of squared distances
  int iterations = 0;
};

KmeansModel fit_kmeans(const float* x, int64_t n, int d, const KmeansParams& p);

struct GmmParams {
  int k = 3;
  int n_init = 3;
  int max_iter = 200;
  double tol = 1e-4;  // on the mean log-likelihood per sample
  double reg_covar = 1e-6;
  uint64_t seed = 0;
};

struct GmmModel {
  int k = 0, d = 0;
  std::vector<double> weight;  // [k]
  std::vector<double> mean;    // [k, d]
  std::vector<double> cov;     // [k, d, d]
  double log_likelihood = 0;   // mean log p(x) over the fitted points
  int iterations = 0;
  bool converged = false;
};

GmmModel fit_gmm(const float* x, int64_t n, int d, const GmmParams& p);

// Per-point log density (logp [n]) and most responsible component (comp [n]); either
// output may be null.
void gmm_score(const GmmModel& m, const float* x, int64_t n, std::vector<double>* logp,
               std::vector<int32_t>* comp);

// Value below which a fraction q of `v` lies (linear interpolation, as numpy's default).
double quantile(std::vector<double> v, double q);

}  // namespace sieve::cluster
