#include "data/quick_model.hpp"

#include <algorithm>
#include <cmath>

#include "util/error.hpp"

namespace sieve::data {

PooledShape pooled_shape(const DatasetMeta& m) {
  PooledShape p;
  if (m.kind == Kind::Tabular) {
    p.gh = p.gw = 1;
    p.c = m.features;
    return p;
  }
  const auto g = int64_t(std::sqrt(256.0 / double(m.channels)));
  p.gh = std::min(m.height, g);
  p.gw = std::min(m.width, g);
  p.c = m.channels;
  return p;
}

void pool_rows(const DatasetMeta& m, const PooledShape& p, const uint8_t* images,
               const float* features, int64_t count, float* out) {
  const int64_t d = p.dims();
  if (m.kind == Kind::Tabular) {
    std::copy_n(features, count * d, out);
    return;
  }
  const int64_t H = m.height, W = m.width, C = m.channels;
  // Pixel (y, x) falls in cell (y * gh / H, x * gw / W); each cell's mean.
  std::vector<int64_t> cy(static_cast<size_t>(H)), cx(static_cast<size_t>(W));
  for (int64_t y = 0; y < H; ++y) cy[size_t(y)] = y * p.gh / H;
  for (int64_t x = 0; x < W; ++x) cx[size_t(x)] = x * p.gw / W;
  std::vector<double> inv(size_t(p.gh * p.gw), 0.0);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) inv[size_t(cy[size_t(y)] * p.gw + cx[size_t(x)])] += 1;
  for (auto& v : inv) v = 1.0 / v;
  std::vector<double> acc(static_cast<size_t>(d));
  for (int64_t r = 0; r < count; ++r) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const uint8_t* img = images + r * H * W * C;
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        double* a = acc.data() + (cy[size_t(y)] * p.gw + cx[size_t(x)]) * C;
        const uint8_t* px = img + (y * W + x) * C;
        for (int64_t c = 0; c < C; ++c) a[c] += px[c];
      }
    for (int64_t cell = 0; cell < p.gh * p.gw; ++cell)
      for (int64_t c = 0; c < C; ++c)
        out[r * d + cell * C + c] = float(acc[size_t(cell * C + c)] * inv[size_t(cell)] / 255.0);
  }
}

namespace {

// Solve (A) X = B in place for symmetric positive definite A [d, d] and B [d, k]
// (Cholesky; the shrinkage keeps A positive definite).
void cholesky_solve(std::vector<double>& A, std::vector<double>& B, int64_t d, int64_t k) {
  for (int64_t j = 0; j < d; ++j) {
    double s = A[size_t(j * d + j)];
    for (int64_t p = 0; p < j; ++p) s -= A[size_t(j * d + p)] * A[size_t(j * d + p)];
    SIEVE_CHECK(s > 0, "quick model: covariance not positive definite");
    const double l = std::sqrt(s);
    A[size_t(j * d + j)] = l;
    for (int64_t i = j + 1; i < d; ++i) {
      double t = A[size_t(i * d + j)];
      for (int64_t p = 0; p < j; ++p) t -= A[size_t(i * d + p)] * A[size_t(j * d + p)];
      A[size_t(i * d + j)] = t / l;
    }
  }
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = 0; i < d; ++i) {  // L y = b
      double t = B[size_t(i * k + c)];
      for (int64_t p = 0; p < i; ++p) t -= A[size_t(i * d + p)] * B[size_t(p * k + c)];
      B[size_t(i * k + c)] = t / A[size_t(i * d + i)];
    }
    for (int64_t i = d - 1; i >= 0; --i) {  // L^T x = y
      double t = B[size_t(i * k + c)];
      for (int64_t p = i + 1; p < d; ++p) t -= A[size_t(p * d + i)] * B[size_t(p * k + c)];
      B[size_t(i * k + c)] = t / A[size_t(i * d + i)];
    }
  }
}

struct Linear {
  std::vector<double> w, b;  // [d, k], [k]: scores z^T w + b
};

// Sums over a set of rows: the lower triangle of sum z z^T, per-class sums of z, counts.
struct Sums {
  std::vector<double> G, M, count;
  Sums(int64_t d, int64_t k)
      : G(static_cast<size_t>(d * d), 0.0), M(static_cast<size_t>(d * k), 0.0), count(static_cast<size_t>(k), 0.0) {}
  void add(const Sums& o, double sign) {
    for (size_t i = 0; i < G.size(); ++i) G[i] += sign * o.G[i];
    for (size_t i = 0; i < M.size(); ++i) M[i] += sign * o.M[i];
    for (size_t i = 0; i < count.size(); ++i) count[i] += sign * o.count[i];
  }
};

// Linear discriminant analysis from the sums: class means, one within-class covariance
// shrunk by 1e-2 I (inputs are standardised), scores the log posterior up to a constant.
// Unlike least squares to one-hot targets, whose scores mask a class lying between others
// (on Fashion-MNIST ridge sent T-shirts to Dress rather than Shirt), the discriminants
// compare classes as a Gaussian model would.
Linear lda(Sums s, int64_t d, int64_t k) {
  double m = 0;
  for (double c : s.count) m += c;
  std::vector<double>& M = s.M;
  for (int64_t i = 0; i < d; ++i)
    for (int64_t c = 0; c < k; ++c) M[size_t(i * k + c)] /= std::max(1.0, s.count[size_t(c)]);
  // Within-class covariance: (sum z z^T - sum_c n_c mu_c mu_c^T) / m, plus the shrinkage.
  std::vector<double>& G = s.G;
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      double v = G[size_t(i * d + j)];
      for (int64_t c = 0; c < k; ++c) v -= s.count[size_t(c)] * M[size_t(i * k + c)] * M[size_t(j * k + c)];
      G[size_t(i * d + j)] = G[size_t(j * d + i)] = v / m;
    }
    G[size_t(i * d + i)] += 1e-2;
  }
  std::vector<double> A = M;
  cholesky_solve(G, A, d, k);
  Linear out;
  out.b.assign(size_t(k), 0.0);
  for (int64_t c = 0; c < k; ++c) {
    double q = 0;
    for (int64_t i = 0; i < d; ++i) q += M[size_t(i * k + c)] * A[size_t(i * k + c)];
    // A class without rows in the fitted folds is never predicted.
    out.b[size_t(c)] = s.count[size_t(c)] > 0 ? -0.5 * q + std::log(s.count[size_t(c)] / m) : -1e30;
  }
  out.w = std::move(A);
  return out;
}

}  // namespace

QuickModel cross_fit_lda(const std::vector<float>& x, int64_t d, const std::vector<int32_t>& labels,
                         const std::vector<uint8_t>& fold, int64_t classes) {
  const auto n = int64_t(labels.size());
  SIEVE_ASSERT(int64_t(x.size()) == n * d && int64_t(fold.size()) == n && n > 0);
  // Standardise each input (a constant one is zeroed: it carries nothing).
  std::vector<double> mean(static_cast<size_t>(d), 0.0), sd(static_cast<size_t>(d), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < d; ++i) mean[size_t(i)] += x[size_t(r * d + i)];
  for (auto& v : mean) v /= double(n);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < d; ++i) {
      const double t = x[size_t(r * d + i)] - mean[size_t(i)];
      sd[size_t(i)] += t * t;
    }
  for (auto& v : sd) v = std::sqrt(v / double(n));
  std::vector<double> z(size_t(n * d));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < d; ++i)
      z[size_t(r * d + i)] =
          sd[size_t(i)] > 1e-12 ? (x[size_t(r * d + i)] - mean[size_t(i)]) / sd[size_t(i)] : 0.0;

  // The sums of every fold (each fold's summed in row order by one thread, so the result
  // does not depend on the thread count); fold f's model is fitted on all the others (all
  // rows minus fold f), so the folds cost one Gram matrix in all.
  const int folds = 1 + *std::max_element(fold.begin(), fold.end());
  std::vector<Sums> per(size_t(folds), Sums(d, classes));
#pragma omp parallel for schedule(dynamic, 1)
  for (int f = 0; f < folds; ++f) {
    Sums& s = per[size_t(f)];
    for (int64_t r = 0; r < n; ++r) {
      if (fold[size_t(r)] != f) continue;
      const double* zr = z.data() + r * d;
      const int64_t y = labels[size_t(r)];
      for (int64_t i = 0; i < d; ++i) {
        const double zi = zr[i];
        double* g = s.G.data() + i * d;
        for (int64_t j = 0; j <= i; ++j) g[j] += zi * zr[j];
        s.M[size_t(i * classes + y)] += zi;
      }
      s.count[size_t(y)] += 1;
    }
  }
  Sums total(d, classes);
  for (auto& s : per) total.add(s, 1.0);
  std::vector<Linear> models(static_cast<size_t>(folds));
  const Linear all = lda(total, d, classes);
#pragma omp parallel for schedule(dynamic, 1)
  for (int f = 0; f < folds; ++f) {
    double rest = 0;
    for (int64_t c = 0; c < classes; ++c) rest += total.count[size_t(c)] - per[size_t(f)].count[size_t(c)];
    if (rest < 2) {  // too few rows outside this fold: the model of every row scores it
      models[size_t(f)] = all;
      continue;
    }
    Sums s = total;
    s.add(per[size_t(f)], -1.0);
    models[size_t(f)] = lda(std::move(s), d, classes);
  }
  QuickModel q;
  q.classes = classes;
  q.scores.resize(size_t(n * classes));
  q.confusion.assign(size_t(classes * classes), 0);
  std::vector<int32_t> pred(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const Linear& M = models[fold[size_t(r)]];
    float* s = q.scores.data() + r * classes;
    int64_t best = 0;
    for (int64_t c = 0; c < classes; ++c) {
      double v = M.b[size_t(c)];
      for (int64_t i = 0; i < d; ++i) v += z[size_t(r * d + i)] * M.w[size_t(i * classes + c)];
      s[c] = float(v);
      if (s[c] > s[best]) best = c;
    }
    pred[size_t(r)] = int32_t(best);
  }
  int64_t right = 0;
  for (int64_t r = 0; r < n; ++r) {
    ++q.confusion[size_t(labels[size_t(r)] * classes + pred[size_t(r)])];
    right += pred[size_t(r)] == labels[size_t(r)];
  }
  q.accuracy = double(right) / double(n);
  return q;
}

std::vector<int32_t> most_confused(const QuickModel& m, const std::vector<int32_t>& labels) {
  const int64_t K = m.classes;
  std::vector<double> mean(size_t(K * K), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(K), 0);
  for (size_t r = 0; r < labels.size(); ++r) {
    const int64_t y = labels[r];
    ++count[size_t(y)];
    for (int64_t c = 0; c < K; ++c) mean[size_t(y * K + c)] += m.scores[r * size_t(K) + size_t(c)];
  }
  std::vector<int32_t> partner(static_cast<size_t>(K), -1);
  for (int64_t a = 0; a < K; ++a) {
    if (count[size_t(a)] == 0) continue;
    int64_t best = -1;
    for (int64_t b = 0; b < K; ++b) {
      if (b == a) continue;
      if (best < 0) {
        best = b;
        continue;
      }
      const int64_t cb = m.confusion[size_t(a * K + b)], cbest = m.confusion[size_t(a * K + best)];
      if (cb > cbest || (cb == cbest && mean[size_t(a * K + b)] > mean[size_t(a * K + best)])) best = b;
    }
    partner[size_t(a)] = int32_t(best);
  }
  return partner;
}

void wrong_class_margins(const QuickModel& m, const std::vector<int32_t>& labels,
                         std::vector<int32_t>& best_wrong, std::vector<double>& margin) {
  const int64_t K = m.classes;
  best_wrong.assign(labels.size(), -1);
  margin.assign(labels.size(), 0.0);
  for (size_t r = 0; r < labels.size(); ++r) {
    const float* s = m.scores.data() + r * size_t(K);
    const int32_t y = labels[r];
    int32_t w = -1;
    for (int32_t c = 0; c < int32_t(K); ++c)
      if (c != y && (w < 0 || s[c] > s[w])) w = c;
    best_wrong[r] = w;
    margin[r] = double(s[y]) - double(s[w]);
  }
}

}  // namespace sieve::data
