#include "cluster/dbscan.hpp"

#include <omp.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <parallel/algorithm>

#include "util/error.hpp"

namespace sieve::cluster {

void check_dbscan_input(const float* points, int64_t n, int d, const DbscanParams& p) {
  if (!(p.eps > 0) || !std::isfinite(p.eps))
    throw UsageError(cat("DBSCAN eps: expected a finite value > 0, got ", p.eps));
  if (p.min_samples < 1)
    throw UsageError(cat("DBSCAN min_samples: expected >= 1, got ", p.min_samples));
  SIEVE_CHECK(d >= 1, "DBSCAN: expected points with >= 1 dimension, got ", d);
  for (int64_t i = 0; i < n * d; ++i)
    SIEVE_CHECK(std::isfinite(points[i]), "DBSCAN: point ", i / d, " has a non-finite coordinate (",
                points[i], ") in dimension ", i % d);
}

Grid make_grid(const std::vector<double>& lo, const std::vector<double>& hi, double eps) {
  Grid g;
  g.d = int(lo.size());
  // Widened so that floor((x - lo) / side) of two points <= eps apart never differs by 2,
  // whatever the rounding (relative error of the division ~1e-16 * cell index).
  g.side = eps * (1 + 1e-7);
  g.lo = lo;
  g.extent.assign(g.d, 1);
  if (g.d > 3) {
    g.brute = true;
    return g;
  }
  double cells = 1;
  for (int k = 0; k < g.d; ++k) {
    g.extent[k] = int64_t(std::floor((hi[k] - lo[k]) / g.side)) + 1;
    cells *= double(g.extent[k]);
  }
  // Linear keys must fit with room for the +-reach offsets; an absurd extent (eps tiny
  // against the spread) falls back to the all-pairs search rather than overflowing.
  if (cells > 1e18) g.brute = true;
  return g;
}

int64_t Grid::key_of(const float* x) const {
  if (brute) return 0;
  int64_t key = 0;
  for (int k = 0; k < d; ++k) {
    int64_t c = int64_t(std::floor((double(x[k]) - lo[k]) / side));
    c = std::clamp<int64_t>(c, 0, extent[k] - 1);
    key = key * extent[k] + c;
  }
  return key;
}

int64_t Grid::reach() const {
  if (brute) return 0;
  int64_t r = 1, stride = 1;
  for (int k = d - 1; k >= 1; --k) {
    stride *= extent[k];
    r += stride;
  }
  return r;
}

CellIndex build_cell_index(const Grid& g, const float* points, int64_t n) {
  CellIndex ci;
  const int d = g.d;
  std::vector<std::pair<int64_t, int64_t>> kv(n);  // (cell key, input index)
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) kv[i] = {g.key_of(points + i * d), i};
  // Sorting by (key, index) makes the order, and everything after it, deterministic.
  __gnu_parallel::sort(kv.begin(), kv.end());
  ci.order.resize(n);
  ci.xs.resize(size_t(n) * d);
  ci.point_cell.resize(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    ci.order[i] = kv[i].second;
    for (int k = 0; k < d; ++k) ci.xs[i * d + k] = points[kv[i].second * d + k];
  }
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || kv[i].first != kv[i - 1].first) {
      ci.cell_key.push_back(kv[i].first);
      ci.cell_start.push_back(i);
    }
    ci.point_cell[i] = int64_t(ci.cell_key.size()) - 1;
  }
  ci.cell_start.push_back(n);
  return ci;
}

std::vector<uint8_t> compute_core(const Grid& g, const CellIndex& ci, const DbscanParams& p,
                                  const uint8_t* need) {
  const int64_t cells = int64_t(ci.cell_key.size());
  const int d = g.d;
  const double eps2 = p.eps * p.eps;
  std::vector<uint8_t> core(ci.order.size(), 0);
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t c = 0; c < cells; ++c) {
    for (int64_t i = ci.cell_start[c]; i < ci.cell_start[c + 1]; ++i) {
      if (need && !need[i]) continue;
      const float* xi = ci.xs.data() + i * d;
      int64_t count = 0;
      for_neighbor_ranges(g, ci, c, [&](int64_t b, int64_t e) {
        if (count >= p.min_samples) return;  // early exit: core already decided
        for (int64_t j = b; j < e; ++j)
          if (sq_dist(xi, ci.xs.data() + j * d, d) <= eps2 && ++count >= p.min_samples) return;
      });
      core[i] = count >= p.min_samples;
    }
  }
  return core;
}

namespace {

// Lock-free union-find on int64 parents (atomic_ref over a plain vector). Roots are only
// ever linked under a smaller root, so a set's root is its smallest member.
struct UnionFind {
  std::vector<int64_t> parent;
  explicit UnionFind(int64_t n) : parent(n) {
    for (int64_t i = 0; i < n; ++i) parent[i] = i;
  }
  int64_t load(int64_t x) { return std::atomic_ref<int64_t>(parent[x]).load(std::memory_order_relaxed); }
  int64_t find(int64_t x) {
    while (true) {
      int64_t p = load(x);
      if (p == x) return x;
      int64_t gp = load(p);
      if (gp == p) return p;
      // Path halving: point x at its grandparent (an ancestor, so always safe).
      std::atomic_ref<int64_t>(parent[x]).compare_exchange_weak(p, gp, std::memory_order_relaxed);
      x = gp;
    }
  }
  void unite(int64_t a, int64_t b) {
    while (true) {
      a = find(a);
      b = find(b);
      if (a == b) return;
      if (a < b) std::swap(a, b);
      int64_t expected = a;
      if (std::atomic_ref<int64_t>(parent[a]).compare_exchange_strong(expected, b,
                                                                      std::memory_order_acq_rel))
        return;
    }
  }
};

}  // namespace

std::vector<int64_t> union_cores(const Grid& g, const CellIndex& ci, double eps,
                                 const uint8_t* core) {
  const int64_t n = int64_t(ci.order.size());
  const int64_t cells = int64_t(ci.cell_key.size());
  const int d = g.d;
  const double eps2 = eps * eps;
  UnionFind uf(n);
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t c = 0; c < cells; ++c) {
    for (int64_t i = ci.cell_start[c]; i < ci.cell_start[c + 1]; ++i) {
      if (!core[i]) continue;
      const float* xi = ci.xs.data() + i * d;
      for_neighbor_ranges(g, ci, c, [&](int64_t b, int64_t e) {
        for (int64_t j = std::max(b, i + 1); j < e; ++j)  // each edge once: j > i
          if (core[j] && sq_dist(xi, ci.xs.data() + j * d, d) <= eps2) uf.unite(i, j);
      });
    }
  }
  std::vector<int64_t> root(n, -1);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    if (core[i]) root[i] = uf.find(i);
  return root;
}

int64_t border_anchor(const Grid& g, const CellIndex& ci, double eps, const uint8_t* core,
                      const int64_t* gid, int64_t i) {
  const int d = g.d;
  const double eps2 = eps * eps;
  const float* xi = ci.xs.data() + i * d;
  int64_t best = -1;
  for_neighbor_ranges(g, ci, ci.point_cell[i], [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j)
      if (core[j] && (best < 0 || gid[j] < gid[best]) &&
          sq_dist(xi, ci.xs.data() + j * d, d) <= eps2)
        best = j;
  });
  return best;
}

DbscanResult dbscan(const float* points, int64_t n, int d, const DbscanParams& p) {
  check_dbscan_input(points, n, d, p);
  DbscanResult r;
  r.label.assign(n, -1);
  r.core.assign(n, 0);
  if (n == 0) return r;
  std::vector<double> lo(d, std::numeric_limits<double>::infinity()), hi(d, -lo[0]);
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < d; ++k) {
      lo[k] = std::min(lo[k], double(points[i * d + k]));
      hi[k] = std::max(hi[k], double(points[i * d + k]));
    }
  Grid g = make_grid(lo, hi, p.eps);
  CellIndex ci = build_cell_index(g, points, n);
  std::vector<uint8_t> core = compute_core(g, ci, p, nullptr);
  std::vector<int64_t> root = union_cores(g, ci, p.eps, core.data());

  // Number the sets by their smallest input index.
  std::vector<int64_t> min_index(n, std::numeric_limits<int64_t>::max());
  for (int64_t i = 0; i < n; ++i)
    if (root[i] >= 0) min_index[root[i]] = std::min(min_index[root[i]], ci.order[i]);
  std::vector<std::pair<int64_t, int64_t>> roots;  // (smallest input index, root)
  for (int64_t i = 0; i < n; ++i)
    if (root[i] == i) roots.push_back({min_index[i], i});
  std::sort(roots.begin(), roots.end());
  std::vector<int32_t> id_of_root(n, -1);
  for (size_t k = 0; k < roots.size(); ++k) id_of_root[roots[k].second] = int32_t(k);
  r.num_clusters = int32_t(roots.size());

  const int64_t* gid = ci.order.data();
#pragma omp parallel for schedule(dynamic, 1024)
  for (int64_t i = 0; i < n; ++i) {
    int64_t src = ci.order[i];
    if (core[i]) {
      r.core[src] = 1;
      r.label[src] = id_of_root[root[i]];
    } else {
      int64_t a = border_anchor(g, ci, p.eps, core.data(), gid, i);
      if (a >= 0) r.label[src] = id_of_root[root[a]];
    }
  }
  for (int64_t i = 0; i < n; ++i) r.num_noise += r.label[i] < 0;
  return r;
}

}  // namespace sieve::cluster
