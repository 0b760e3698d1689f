#include "cluster/eps_select.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <random>

#include "cluster/dbscan.hpp"

namespace sieve::cluster {

namespace {

// Ring search around the query's cell: after rings 0..R every unvisited point is at least
// R * side away, so the search stops once the k-th best distance is within that bound.
template <typename I>
double kth_grid(const Grid& g, const CellIndexT<I>& ci, const float* q, int64_t k) {
  const int d = g.d;
  std::priority_queue<double> best;  // the k smallest squared distances (max on top)
  std::vector<int64_t> c(d);
  for (int t = 0; t < d; ++t)
    c[t] = std::clamp<int64_t>(int64_t(std::floor((double(q[t]) - g.lo[t]) / g.side)), 0,
                               g.extent[t] - 1);
  int64_t max_r = *std::max_element(g.extent.begin(), g.extent.end());
  std::vector<int64_t> o(d);
  for (int64_t R = 0; R <= max_r; ++R) {
    if (R > 32) {  // an isolated point: scanning all points is cheaper than more rings
      std::vector<double> dist(ci.order.size());
      for (size_t j = 0; j < dist.size(); ++j) dist[j] = sq_dist(q, ci.xs.data() + j * d, d);
      std::nth_element(dist.begin(), dist.begin() + (k - 1), dist.end());
      return std::sqrt(dist[k - 1]);
    }
    // Every offset in [-R, R]^d with Chebyshev norm exactly R.
    int64_t total = 1;
    for (int t = 0; t < d; ++t) total *= 2 * R + 1;
    for (int64_t idx = 0; idx < total; ++idx) {
      int64_t rem = idx, key = 0;
      bool shell = false, inside = true;
      for (int t = 0; t < d; ++t) {
        o[t] = rem % (2 * R + 1) - R;
        rem /= 2 * R + 1;
        shell |= std::abs(o[t]) == R;
        int64_t cc = c[t] + o[t];
        inside &= cc >= 0 && cc < g.extent[t];
        key = key * g.extent[t] + cc;
      }
      if (!shell || !inside) continue;
      auto it = std::lower_bound(ci.cell_key.begin(), ci.cell_key.end(), key);
      if (it == ci.cell_key.end() || *it != key) continue;
      int64_t cell = it - ci.cell_key.begin();
      for (int64_t j = ci.cell_start[cell]; j < ci.cell_start[cell + 1]; ++j) {
        double v = sq_dist(q, ci.xs.data() + j * d, d);
        if (int64_t(best.size()) < k) {
          best.push(v);
        } else if (v < best.top()) {
          best.pop();
          best.push(v);
        }
      }
    }
    if (int64_t(best.size()) == k && best.top() <= double(R) * g.side * double(R) * g.side) break;
  }
  return std::sqrt(best.top());
}

}  // namespace

std::vector<double> k_distances(const float* x, int64_t n, int d, int64_t k, int64_t max_queries,
                                uint64_t seed) {
  std::vector<double> out;
  if (n == 0) return out;
  k = std::clamp<int64_t>(k, 1, n);
  std::vector<int64_t> queries(n);
  for (int64_t i = 0; i < n; ++i) queries[i] = i;
  if (n > max_queries) {
    std::mt19937_64 rng(seed);
    for (int64_t i = 0; i < max_queries; ++i)
      std::swap(queries[i], queries[std::uniform_int_distribution<int64_t>(i, n - 1)(rng)]);
    queries.resize(max_queries);
  }
  std::vector<double> lo(d, std::numeric_limits<double>::infinity()), hi(d, -lo[0]);
  for (int64_t i = 0; i < n; ++i)
    for (int t = 0; t < d; ++t) {
      lo[t] = std::min(lo[t], double(x[i * d + t]));
      hi[t] = std::max(hi[t], double(x[i * d + t]));
    }
  // Cell side: about k points per cell on average over the bounding box.
  double volume = 1;
  for (int t = 0; t < d; ++t) volume *= std::max(hi[t] - lo[t], 1e-12);
  double side = std::pow(volume * double(k) / double(n), 1.0 / d);
  Grid g = make_grid(lo, hi, std::max(side, 1e-12));
  out.resize(queries.size());
  if (g.brute || d > 3) {
#pragma omp parallel for schedule(dynamic, 16)
    for (size_t qi = 0; qi < queries.size(); ++qi) {
      std::vector<double> dist(n);
      const float* q = x + queries[qi] * d;
      for (int64_t j = 0; j < n; ++j) dist[j] = sq_dist(q, x + j * d, d);
      std::nth_element(dist.begin(), dist.begin() + (k - 1), dist.end());
      out[qi] = std::sqrt(dist[k - 1]);
    }
  } else {
    // The index DBSCAN itself would build for these points (32-bit positions below 2^31
    // points: half the memory).
    auto search = [&](const auto& ci) {
#pragma omp parallel for schedule(dynamic, 16)
      for (size_t qi = 0; qi < queries.size(); ++qi)
        out[qi] = kth_grid(g, ci, x + queries[qi] * d, k);
    };
    if (dbscan_index_bits(n) == 32)
      search(build_cell_index<int32_t>(g, x, n));
    else
      search(build_cell_index<int64_t>(g, x, n));
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t elbow_index(const std::vector<double>& y) {
  const int64_t m = int64_t(y.size());
  if (m < 3 || !(y.back() > y.front())) return 0;
  int64_t best = 0;
  double best_gap = -1;
  for (int64_t i = 0; i < m; ++i) {
    double xn = double(i) / double(m - 1);
    double yn = (y[i] - y.front()) / (y.back() - y.front());
    if (xn - yn > best_gap) best_gap = xn - yn, best = i;
  }
  return best;
}

}  // namespace sieve::cluster
