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

double tsne_learning_rate(const TsneOptions& opt, int64_t N, double exaggeration) {
  // openTSNE uses max(200, N / exaggeration) (Belkina et al. 2019) for each phase, so the
  // step grows 12-fold when the exaggeration ends, with a gradient that omits the factor 4
  // of dC/dy; ours includes it, so the same step is a quarter of that. Measured on the
  // bench's 20k x 50 clusters: one rate of N/48 for both phases kept 10-NN preservation at
  // 0.107 against openTSNE's 0.135 (docs/embed.md).
  const double exag = std::max(1.0, exaggeration);
  return opt.learning_rate > 0 ? opt.learning_rate : std::max(200.0, double(N) / exag) / 4.0;
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

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

// Attractive forces over the owned CSR rows: attr[r] = sum_e p_e w_e (y_i - y_j) with
// w = 1 / (1 + |y_i - y_j|^2). This loop streams every edge of P each iteration (~130 per
// point), so it runs in float on a float copy of Y, vectorised over the edges of a row
// (gathers of y_j; the reduction order is fixed, so results are reproducible): ~3x faster
// than the scalar double loop. The forces only steer the optimiser; the KL divergence it
// reports is computed in double (attract_logw).
template <int d>
void attract(const float* Yf, int64_t row0, int64_t n, const int64_t* ptr, const int32_t* col,
             const float* pval, double* attr) {
  static_assert(d == 2 || d == 3);
#pragma omp parallel for schedule(dynamic, 256) if (n >= kMinPointsForThreads)
  for (int64_t r = 0; r < n; ++r) {
    const float* yi = Yf + (row0 + r) * d;
    const float x0 = yi[0], x1 = yi[1], x2 = d == 3 ? yi[2] : 0.f;
    float f0 = 0.f, f1 = 0.f, f2 = 0.f;
    const int64_t e0 = ptr[r], e1 = ptr[r + 1];
#pragma omp simd reduction(+ : f0, f1, f2)
    for (int64_t e = e0; e < e1; ++e) {
      const float* yj = Yf + int64_t(col[e]) * d;
      const float a = x0 - yj[0], b = x1 - yj[1], c = d == 3 ? x2 - yj[d - 1] : 0.f;
      const float pw = pval[e] / (1.f + a * a + b * b + c * c);
      f0 += pw * a;
      f1 += pw * b;
      f2 += pw * c;
    }
    attr[r * d] = f0;
    attr[r * d + 1] = f1;
    if (d == 3) attr[r * d + d - 1] = f2;
  }
}

// sum over the owned edges of p_e log w_e, in double (for the KL divergence). Per-row sums
// added in row order: the same figure whatever the thread count.
double attract_logw(const double* Y, int d, int64_t row0, int64_t n, const int64_t* ptr,
                    const int32_t* col, const double* pval, std::vector<double>& row_sums) {
  row_sums.resize(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n >= kMinPointsForThreads)
  for (int64_t r = 0; r < n; ++r) {
    const double* yi = Y + (row0 + r) * d;
    double lw = 0.0;
    for (int64_t e = ptr[r]; e < ptr[r + 1]; ++e) {
      const double* yj = Y + int64_t(col[e]) * d;
      double d2 = 0.0;
      for (int c = 0; c < d; ++c) d2 += (yi[c] - yj[c]) * (yi[c] - yj[c]);
      lw -= pval[e] * std::log1p(d2);
    }
    row_sums[r] = lw;
  }
  double total = 0.0;
  for (double v : row_sums) total += v;
  return total;
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
  SparseRows P = build_affinities(comm, X, N, D, opt.perplexity, own, &res.knn, &res.knn_k, opt.knn,
                                  &res.knn_used, &res.seconds_knn);
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
  std::vector<double> attr(size_t(n * d)), rep(size_t(n * d));
  std::vector<float> Yf(size_t(N * d));  // float copy of Y for the attractive loop
  std::vector<double> logw;              // [n] per-row sum p log w (KL iterations only)
  std::vector<int> counts, displs;
  for (int r = 0; r < comm.size(); ++r) {
    Range rr = block_range(N, r, comm.size());
    counts.push_back(int(rr.size() * d));
    displs.push_back(int(rr.begin * d));
  }
  Repulsion repulsion(opt.repulsion, d, opt.theta);
  auto loop_start = std::chrono::steady_clock::now();
  for (int it = 0; it < opt.iterations; ++it) {
    const bool early = it < opt.exaggeration_iterations;
    const double exag = early ? opt.exaggeration : 1.0;
    const double mom = early ? opt.momentum : opt.final_momentum;
    const double lr = tsne_learning_rate(opt, N, exag);
    const bool print =
        opt.progress_every > 0 && ((it + 1) % opt.progress_every == 0 || it + 1 == opt.iterations);
    const bool report = print || it + 1 == opt.iterations;  // the final KL is always kept
    auto t_it = Clock::now();
    for (int64_t t = 0; t < N * d; ++t) Yf[t] = float(Y[t]);
    if (d == 2)
      attract<2>(Yf.data(), own.begin, n, P.ptr.data(), P.col.data(), pval.data(), attr.data());
    else
      attract<3>(Yf.data(), own.begin, n, P.ptr.data(), P.col.data(), pval.data(), attr.data());
    auto t_rep = Clock::now();
    res.seconds_attract += std::chrono::duration<double>(t_rep - t_it).count();
    double z = repulsion.compute(comm, Y.data(), N, own, rep.data());  // global Z
    res.seconds_repulse += since(t_rep);
    z = std::max(z, 1e-300);
    if (report) {
      double s = comm.allreduce_sum(
          attract_logw(Y.data(), d, own.begin, n, P.ptr.data(), P.col.data(), P.val.data(), logw));
      double kl = plogp - s + std::log(z);  // sum p log(p / (w/Z)) with sum p = 1
      res.kl = kl;
      res.kl_history.emplace_back(it + 1, kl);
      double el =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
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
    const double max_step2 = opt.max_step_norm * opt.max_step_norm;
#pragma omp parallel for schedule(static) if (n >= kMinPointsForThreads)
    for (int64_t i = 0; i < n; ++i) {
      double step2 = 0.0;
      for (int c = 0; c < d; ++c) {
        const int64_t t = i * d + c;
        const double grad = 4.0 * (exag * attr[t] - rep[t] / z);
        double& g = gains[t];
        g = (update[t] * grad < 0.0) ? g + 0.2 : std::max(0.01, g * 0.8);
        update[t] = mom * update[t] - lr * g * grad;
        step2 += update[t] * update[t];
      }
      // Clip the point's step (not each coordinate): its direction is kept.
      const double scale = opt.max_step_norm > 0 && step2 > max_step2 ? opt.max_step_norm / std::sqrt(step2) : 1.0;
      for (int c = 0; c < d; ++c) {
        update[i * d + c] *= scale;
        Y[(own.begin + i) * d + c] += update[i * d + c];
      }
    }
    comm.allgatherv_in_place(Y.data(), counts, displs);
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
