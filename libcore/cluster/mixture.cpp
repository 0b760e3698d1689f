#include "cluster/mixture.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>

#include "util/error.hpp"

namespace sieve::cluster {

namespace {

double d2(const float* a, const double* c, int d) {
  double s = 0;
  for (int k = 0; k < d; ++k) {
    double t = double(a[k]) - c[k];
    s += t * t;
  }
  return s;
}

// k-means++: first centre uniform, each next one drawn with probability ~ D(x)^2.
std::vector<double> kmeanspp(const float* x, int64_t n, int d, int k, std::mt19937_64& rng) {
  std::vector<double> c(size_t(k) * d);
  std::vector<double> best(n, std::numeric_limits<double>::infinity());
  int64_t first = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
  for (int j = 0; j < d; ++j) c[j] = x[first * d + j];
  for (int m = 1; m < k; ++m) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      best[i] = std::min(best[i], d2(x + i * d, c.data() + (m - 1) * d, d));
      total += best[i];
    }
    int64_t pick = 0;
    if (total > 0) {
      double r = std::uniform_real_distribution<double>(0, total)(rng), acc = 0;
      for (pick = 0; pick < n - 1; ++pick) {
        acc += best[pick];
        if (acc >= r) break;
      }
    } else {
      pick = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
    }
    for (int j = 0; j < d; ++j) c[m * d + j] = x[pick * d + j];
  }
  return c;
}

// Assign every point to its nearest centre (m.assign, m.dist); returns the inertia.
double assign_nearest(const float* x, int64_t n, int d, const std::vector<double>& centers, int k,
                      KmeansModel& m) {
  double inertia = 0;
#pragma omp parallel for schedule(static) reduction(+ : inertia) if (n > 20000)
  for (int64_t i = 0; i < n; ++i) {
    double bd = std::numeric_limits<double>::infinity();
    int32_t bj = 0;
    for (int j = 0; j < k; ++j) {
      double v = d2(x + i * d, centers.data() + j * d, d);
      if (v < bd) bd = v, bj = j;
    }
    m.assign[i] = bj;
    m.dist[i] = bd;
    inertia += bd;
  }
  return inertia;
}

KmeansModel lloyd(const float* x, int64_t n, int d, std::vector<double> centers, int k,
                  const KmeansParams& p, double scale2) {
  KmeansModel m;
  m.k = k;
  m.d = d;
  m.assign.assign(n, 0);
  m.dist.assign(n, 0);
  for (int it = 0; it < p.max_iter; ++it) {
    m.iterations = it + 1;
    assign_nearest(x, n, d, centers, k, m);
    std::vector<double> sum(size_t(k) * d, 0), cnt(k, 0);
    for (int64_t i = 0; i < n; ++i) {
      cnt[m.assign[i]] += 1;
      for (int j = 0; j < d; ++j) sum[m.assign[i] * d + j] += x[i * d + j];
    }
    double shift = 0;
    for (int j = 0; j < k; ++j) {
      if (cnt[j] == 0) continue;  // an empty cluster keeps its centre
      for (int t = 0; t < d; ++t) {
        double v = sum[j * d + t] / cnt[j];
        shift += (v - centers[j * d + t]) * (v - centers[j * d + t]);
        centers[j * d + t] = v;
      }
    }
    if (shift <= p.tol * p.tol * scale2) break;
  }
  m.inertia = assign_nearest(x, n, d, centers, k, m);
  for (auto& v : m.dist) v = std::sqrt(v);
  m.centers = std::move(centers);
  return m;
}

double data_scale2(const float* x, int64_t n, int d) {
  double s = 0;
  for (int j = 0; j < d; ++j) {
    double mu = 0, v = 0;
    for (int64_t i = 0; i < n; ++i) mu += x[i * d + j];
    mu /= double(n);
    for (int64_t i = 0; i < n; ++i) v += (x[i * d + j] - mu) * (x[i * d + j] - mu);
    s += v / double(n);
  }
  return s > 0 ? s : 1;
}

// In-place Cholesky of the SPD matrix a [d, d] (lower triangle); false if not SPD.
bool cholesky(std::vector<double>& a, int d) {
  for (int j = 0; j < d; ++j) {
    double s = a[j * d + j];
    for (int t = 0; t < j; ++t) s -= a[j * d + t] * a[j * d + t];
    if (!(s > 0)) return false;
    a[j * d + j] = std::sqrt(s);
    for (int i = j + 1; i < d; ++i) {
      double v = a[i * d + j];
      for (int t = 0; t < j; ++t) v -= a[i * d + t] * a[j * d + t];
      a[i * d + j] = v / a[j * d + j];
    }
  }
  return true;
}

// log(w_j) + log N(x | mu_j, Sigma_j) for every point and component: out [n, k].
void log_joint(const GmmModel& m, const float* x, int64_t n, std::vector<double>& out) {
  const int k = m.k, d = m.d;
  std::vector<std::vector<double>> L(k);
  std::vector<double> logdet(k);
  for (int j = 0; j < k; ++j) {
    L[j].assign(m.cov.begin() + size_t(j) * d * d, m.cov.begin() + size_t(j + 1) * d * d);
    SIEVE_CHECK(cholesky(L[j], d), "GMM: covariance of component ", j,
                " is not positive definite (raise filter.gmm.reg_covar)");
    logdet[j] = 0;
    for (int t = 0; t < d; ++t) logdet[j] += 2 * std::log(L[j][t * d + t]);
  }
  out.resize(size_t(n) * k);
  const double c0 = d * std::log(2 * std::numbers::pi);
#pragma omp parallel for schedule(static) if (n > 20000)
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> z(d);
    for (int j = 0; j < k; ++j) {
      double q = 0;
      for (int t = 0; t < d; ++t) {  // forward solve L z = x - mu
        double v = double(x[i * d + t]) - m.mean[j * d + t];
        for (int s = 0; s < t; ++s) v -= L[j][t * d + s] * z[s];
        z[t] = v / L[j][t * d + t];
        q += z[t] * z[t];
      }
      out[i * k + j] = std::log(m.weight[j]) - 0.5 * (c0 + logdet[j] + q);
    }
  }
}

// M-step from responsibilities r [n, k].
void m_step(GmmModel& m, const float* x, int64_t n, const std::vector<double>& r, double reg) {
  const int k = m.k, d = m.d;
  for (int j = 0; j < k; ++j) {
    double nk = 10 * std::numeric_limits<double>::epsilon();
    std::vector<double> mu(d, 0), cv(size_t(d) * d, 0);
    for (int64_t i = 0; i < n; ++i) {
      nk += r[i * k + j];
      for (int t = 0; t < d; ++t) mu[t] += r[i * k + j] * x[i * d + t];
    }
    for (int t = 0; t < d; ++t) mu[t] /= nk;
    for (int64_t i = 0; i < n; ++i) {
      double w = r[i * k + j];
      if (w == 0) continue;
      for (int a = 0; a < d; ++a)
        for (int b = 0; b <= a; ++b)
          cv[a * d + b] += w * (x[i * d + a] - mu[a]) * (x[i * d + b] - mu[b]);
    }
    for (int a = 0; a < d; ++a)
      for (int b = 0; b <= a; ++b) {
        double v = cv[a * d + b] / nk + (a == b ? reg : 0);
        m.cov[size_t(j) * d * d + a * d + b] = m.cov[size_t(j) * d * d + b * d + a] = v;
      }
    m.weight[j] = nk / double(n);
    std::copy(mu.begin(), mu.end(), m.mean.begin() + j * d);
  }
}

// E-step: responsibilities in place of the log joint; returns the mean log-likelihood.
double e_step(std::vector<double>& lj, int64_t n, int k, std::vector<double>* logp) {
  double total = 0;
  if (logp) logp->resize(n);
#pragma omp parallel for schedule(static) reduction(+ : total) if (n > 20000)
  for (int64_t i = 0; i < n; ++i) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < k; ++j) mx = std::max(mx, lj[i * k + j]);
    double s = 0;
    for (int j = 0; j < k; ++j) s += std::exp(lj[i * k + j] - mx);
    double lse = mx + std::log(s);
    for (int j = 0; j < k; ++j) lj[i * k + j] = std::exp(lj[i * k + j] - lse);
    if (logp) (*logp)[i] = lse;
    total += lse;
  }
  return total / double(n);
}

}  // namespace

double quantile(std::vector<double> v, double q) {
  SIEVE_ASSERT(!v.empty());
  std::sort(v.begin(), v.end());
  double pos = std::clamp(q, 0.0, 1.0) * double(v.size() - 1);
  size_t lo = size_t(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

KmeansModel fit_kmeans(const float* x, int64_t n, int d, const KmeansParams& p) {
  SIEVE_CHECK(p.k >= 1 && n >= p.k, "k-means: need at least k = ", p.k, " points, got ", n);
  const double scale2 = data_scale2(x, n, d);
  KmeansModel best;
  for (int r = 0; r < std::max(1, p.n_init); ++r) {
    std::mt19937_64 rng(p.seed * 1000003 + r);
    KmeansModel m = lloyd(x, n, d, kmeanspp(x, n, d, p.k, rng), p.k, p, scale2);
    if (r == 0 || m.inertia < best.inertia) best = std::move(m);
  }
  return best;
}

GmmModel fit_gmm(const float* x, int64_t n, int d, const GmmParams& p) {
  SIEVE_CHECK(p.k >= 1 && n >= p.k, "GMM: need at least k = ", p.k, " points, got ", n);
  GmmModel best;
  for (int r = 0; r < std::max(1, p.n_init); ++r) {
    KmeansParams kp;
    kp.k = p.k;
    kp.n_init = 1;
    kp.seed = p.seed * 7919 + r;
    KmeansModel km = fit_kmeans(x, n, d, kp);
    GmmModel m;
    m.k = p.k;
    m.d = d;
    m.weight.assign(p.k, 0);
    m.mean.assign(size_t(p.k) * d, 0);
    m.cov.assign(size_t(p.k) * d * d, 0);
    std::vector<double> resp(size_t(n) * p.k, 0);
    for (int64_t i = 0; i < n; ++i) resp[i * p.k + km.assign[i]] = 1;
    m_step(m, x, n, resp, p.reg_covar);
    double prev = -std::numeric_limits<double>::infinity();
    for (int it = 0; it < p.max_iter; ++it) {
      log_joint(m, x, n, resp);
      double ll = e_step(resp, n, p.k, nullptr);
      m.iterations = it + 1;
      m.log_likelihood = ll;
      if (std::abs(ll - prev) < p.tol) {
        m.converged = true;
        break;
      }
      prev = ll;
      m_step(m, x, n, resp, p.reg_covar);
    }
    if (r == 0 || m.log_likelihood > best.log_likelihood) best = std::move(m);
  }
  return best;
}

void gmm_score(const GmmModel& m, const float* x, int64_t n, std::vector<double>* logp,
               std::vector<int32_t>* comp) {
  std::vector<double> lj;
  log_joint(m, x, n, lj);
  e_step(lj, n, m.k, logp);
  if (comp) {
    comp->resize(n);
    for (int64_t i = 0; i < n; ++i)
      (*comp)[i] = int32_t(std::max_element(lj.begin() + i * m.k, lj.begin() + (i + 1) * m.k) -
                           (lj.begin() + i * m.k));
  }
}

}  // namespace sieve::cluster
