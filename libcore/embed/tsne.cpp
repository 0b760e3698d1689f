#include "embed/tsne.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>

#include "embed/affinity.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace sieve::embed {

double tsne_learning_rate(const TsneOptions& opt, int64_t N) {
  // FIt-SNE / openTSNE use max(200, N / exaggeration) (Belkina et al. 2019) with a gradient
  // that omits the factor 4 of dC/dy; ours includes it, so the same step is a quarter of
  // that (sklearn's 'auto' likewise). The unscaled N/12 overshoots: the exaggerated
  // embedding spreads to hundreds of units, the FFT grid with it, and the 10-NN
  // neighbourhoods are torn apart.
  const double exag = std::max(1.0, opt.exaggeration);
  return opt.learning_rate > 0 ? opt.learning_rate : std::max(200.0, double(N) / exag) / 4.0;
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<double> initial_positions(const float* X, int64_t N, int64_t D,
                                      const TsneOptions& opt) {
  const int d = opt.dims;
  std::vector<double> Y(size_t(N * d));
  if (opt.pca_init && D >= d) {
    for (int64_t i = 0; i < N; ++i)
      for (int c = 0; c < d; ++c) Y[i * d + c] = X[i * D + c];
  } else {
    std::mt19937_64 rng(opt.seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (auto& v : Y) v = normal(rng);
  }
  // Centre, then scale so that the first coordinate has std 1e-4.
  double var = 0.0;
  for (int c = 0; c < d; ++c) {
    double m = 0.0;
    for (int64_t i = 0; i < N; ++i) m += Y[i * d + c];
    m /= double(N);
    for (int64_t i = 0; i < N; ++i) Y[i * d + c] -= m;
  }
  for (int64_t i = 0; i < N; ++i) var += Y[i * d] * Y[i * d];
  double sd = std::sqrt(var / double(N));
  double s = sd > 0 ? 1e-4 / sd : 1e-4;
  for (auto& v : Y) v *= s;
  return Y;
}

// Attractive forces over the owned CSR rows: attr[r] = sum_e p_e w_e (y_i - y_j);
// logw[r] = sum_e p_e log w_e when `report` (for the KL). d is a template parameter so the
// per-edge work is straight-line code.
template <int d>
void attract(const double* Y, int64_t row0, int64_t n, const int64_t* ptr, const int32_t* col,
             const float* pval, bool report, double* attr, double* logw) {
#pragma omp parallel for schedule(dynamic, 256)
  for (int64_t r = 0; r < n; ++r) {
    const double* yi = Y + (row0 + r) * d;
    double f[d] = {}, lw = 0.0;
    for (int64_t e = ptr[r]; e < ptr[r + 1]; ++e) {
      const double* yj = Y + int64_t(col[e]) * d;
      double diff[d], d2 = 0.0;
      for (int c = 0; c < d; ++c) {
        diff[c] = yi[c] - yj[c];
        d2 += diff[c] * diff[c];
      }
      const double w = 1.0 / (1.0 + d2);
      const double pw = double(pval[e]) * w;
      for (int c = 0; c < d; ++c) f[c] += pw * diff[c];
      if (report) lw += double(pval[e]) * std::log(w);
    }
    for (int c = 0; c < d; ++c) attr[r * d + c] = f[c];
    logw[r] = lw;
  }
}

}  // namespace

TsneResult tsne(const Comm& comm, const float* X, int64_t N, int64_t D, const TsneOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  const int d = opt.dims;
  SIEVE_CHECK(double(N - 1) >= 3.0 * opt.perplexity, "t-SNE: perplexity ", opt.perplexity,
              " needs at least ", int64_t(std::ceil(3.0 * opt.perplexity)) + 1,
              " points (N-1 >= 3 x perplexity), found ", N);
  const Range own = block_range(N, comm.rank(), comm.size());
  const int64_t n = own.size();
  TsneResult res;
  SparseRows P = build_affinities(comm, X, N, D, opt.perplexity, own, &res.knn, &res.knn_k);
  res.seconds_affinity = since(t0);
  // P's values as float for the attractive loop: it streams every edge each iteration
  // (~120 per point), so its bytes per edge are the cost.
  const std::vector<float> pval(P.val.begin(), P.val.end());
  // Constant part of the KL: sum p log p over all entries.
  double plogp = 0.0;
  for (double p : P.val) plogp += p > 0 ? p * std::log(p) : 0.0;
  plogp = comm.allreduce_sum(plogp);

  res.Y = initial_positions(X, N, D, opt);
  std::vector<double>& Y = res.Y;
  std::vector<double> update(size_t(n * d), 0.0), gains(size_t(n * d), 1.0);
  std::vector<double> attr(size_t(n * d)), rep(size_t(n * d)), logw(static_cast<size_t>(n));
  std::vector<int> counts, displs;
  for (int r = 0; r < comm.size(); ++r) {
    Range rr = block_range(N, r, comm.size());
    counts.push_back(int(rr.size() * d));
    displs.push_back(int(rr.begin * d));
  }
  Repulsion repulsion(opt.repulsion, d, opt.theta);
  const double lr = tsne_learning_rate(opt, N);
  auto loop_start = std::chrono::steady_clock::now();
  for (int it = 0; it < opt.iterations; ++it) {
    const bool early = it < opt.exaggeration_iterations;
    const double exag = early ? opt.exaggeration : 1.0;
    const double mom = early ? opt.momentum : opt.final_momentum;
    const bool print = opt.progress_every > 0 &&
                       ((it + 1) % opt.progress_every == 0 || it + 1 == opt.iterations);
    const bool report = print || it + 1 == opt.iterations;  // the final KL is always kept
    auto t_it = Clock::now();
    // Attractive forces over the owned CSR rows; sum p log w for the KL when reporting.
    if (d == 2)
      attract<2>(Y.data(), own.begin, n, P.ptr.data(), P.col.data(), pval.data(), report,
                 attr.data(), logw.data());
    else
      attract<3>(Y.data(), own.begin, n, P.ptr.data(), P.col.data(), pval.data(), report,
                 attr.data(), logw.data());
    auto t_rep = Clock::now();
    res.seconds_attract += std::chrono::duration<double>(t_rep - t_it).count();
    double z = repulsion.compute(comm, Y.data(), N, own, rep.data());  // global Z
    res.seconds_repulse += since(t_rep);
    z = std::max(z, 1e-300);
    if (report) {
      double s = 0.0;
      for (double v : logw) s += v;
      s = comm.allreduce_sum(s);
      double kl = plogp - s + std::log(z);  // sum p log(p / (w/Z)) with sum p = 1
      res.kl = kl;
      res.kl_history.emplace_back(it + 1, kl);
      double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
      double rate = (it + 1) / std::max(el, 1e-9);
      if (print)
        log::infof(opt.label, ": iteration ", it + 1, "/", opt.iterations, ", KL ", kl, ", ",
                 int(rate), " it/s, ETA ", log::format_duration((opt.iterations - it - 1) / rate),
                 early ? " (early exaggeration)" : "",
                 repulsion.last_grid_boxes() > 0
                     ? ", FFT boxes " + std::to_string(repulsion.last_grid_boxes())
                     : std::string());
    }
    auto t_upd = Clock::now();
    // Gradient step with momentum and gains on the owned rows.
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < n * d; ++t) {
      const double grad = 4.0 * (exag * attr[t] - rep[t] / z);
      double& g = gains[t];
      g = (update[t] * grad < 0.0) ? g + 0.2 : std::max(0.01, g * 0.8);
      update[t] = mom * update[t] - lr * g * grad;
      Y[own.begin * d + t] += update[t];
    }
    if (comm.size() > 1)
      SIEVE_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, Y.data(), counts.data(),
                                     displs.data(), MPI_DOUBLE, comm.raw()));
    // Re-centre (same arithmetic on every rank: Y is identical everywhere).
    for (int c = 0; c < d; ++c) {
      double m = 0.0;
      for (int64_t i = 0; i < N; ++i) m += Y[i * d + c];
      m /= double(N);
      for (int64_t i = 0; i < N; ++i) Y[i * d + c] -= m;
    }
    res.seconds_update += since(t_upd);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace sieve::embed
