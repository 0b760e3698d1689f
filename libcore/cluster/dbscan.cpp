#include "cluster/dbscan.hpp"

#include <omp.h>

#include <array>
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
    SIEVE_CHECK(std::isfinite(points[i]), "DBSCAN: point ", i / d, " has a NaN or infinite coordinate (",
                points[i], ") in dimension ", i % d);
}

Grid make_grid(const std::vector<double>& lo, const std::vector<double>& hi, double eps) {
  Grid g;
  g.d = int(lo.size());
  // Side eps / sqrt(d), shrunk by 1e-6 relative: two points of one cell are then strictly
  // within eps even when rounding in the cell index misplaces a point by ~1e-16 * index,
  // and points <= eps apart differ by at most eps / side < 2 (d = 1: 1.000001) cells per
  // axis, so the 5^d block always holds every neighbour.
  g.side = eps / std::sqrt(double(std::max(g.d, 1))) * (1 - 1e-6);
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
  int64_t r = 2, stride = 1;
  for (int k = d - 1; k >= 1; --k) {
    stride *= extent[k];
    r += 2 * stride;
  }
  return r;
}

CellIndex build_cell_index(const Grid& g, const float* points, int64_t n) {
  CellIndex ci;
  const int d = g.d;
  std::vector<int64_t> key(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) key[i] = g.key_of(points + i * d);
  int64_t kmin = n ? *std::min_element(key.begin(), key.end()) : 0;
  int64_t kmax = n ? *std::max_element(key.begin(), key.end()) : -1;
  ci.order.resize(n);
  const bool dense = n > 0 && !g.brute && kmax - kmin < 8 * n + (int64_t(1) << 20);
  if (dense) {
    // Counting sort by key: stable (input order within a cell), O(n + span), and the
    // prefix sums are the dense key table.
    const int64_t span = kmax - kmin + 1;
    ci.dense_base = kmin;
    ci.dense_start.assign(span + 1, 0);
    for (int64_t i = 0; i < n; ++i) ++ci.dense_start[key[i] - kmin + 1];
    for (int64_t k = 0; k < span; ++k) ci.dense_start[k + 1] += ci.dense_start[k];
    std::vector<int64_t> next(ci.dense_start.begin(), ci.dense_start.end() - 1);
    for (int64_t i = 0; i < n; ++i) ci.order[next[key[i] - kmin]++] = i;
  } else {
    std::vector<std::pair<int64_t, int64_t>> kv(n);  // (cell key, input index)
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) kv[i] = {key[i], i};
    // Sorting by (key, index) makes the order, and everything after it, deterministic.
    __gnu_parallel::sort(kv.begin(), kv.end());
    for (int64_t i = 0; i < n; ++i) ci.order[i] = kv[i].second;
  }
  ci.xs.resize(size_t(n) * d);
  ci.point_cell.resize(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < d; ++k) ci.xs[i * d + k] = points[ci.order[i] * d + k];
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = key[ci.order[i]];
    if (i == 0 || k != ci.cell_key.back()) {
      ci.cell_key.push_back(k);
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
    const int64_t b0 = ci.cell_start[c], e0 = ci.cell_start[c + 1];
    if (!g.brute && e0 - b0 >= p.min_samples) {  // a cell is within eps of itself
      for (int64_t i = b0; i < e0; ++i) core[i] = !need || need[i];
      continue;
    }
    // Neighbour ranges with the own cell cut out (its points are all within eps).
    std::array<std::pair<int64_t, int64_t>, 64> ranges;
    size_t nr = 0;
    auto add = [&](int64_t b, int64_t e) {
      if (b < e) ranges[nr++] = {b, e};
    };
    for_neighbor_ranges(g, ci, c, [&](int64_t b, int64_t e) {
      if (!g.brute && b <= b0 && e0 <= e) {
        add(b, b0);
        add(e0, e);
      } else {
        add(b, e);
      }
    });
    for (int64_t i = b0; i < e0; ++i) {
      if (need && !need[i]) continue;
      const float* xi = ci.xs.data() + i * d;
      int64_t count = g.brute ? 0 : e0 - b0;
      for (size_t r = 0; r < nr && count < p.min_samples; ++r)
        for (int64_t j = ranges[r].first; j < ranges[r].second; ++j)
          if (sq_dist(xi, ci.xs.data() + j * d, d) <= eps2 && ++count >= p.min_samples) break;
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
  int64_t load(int64_t x) {
    return std::atomic_ref<int64_t>(parent[x]).load(std::memory_order_relaxed);
  }
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
  if (g.brute) {  // one "cell" with no diameter guarantee: every core pair once
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t i = 0; i < n; ++i) {
      if (!core[i]) continue;
      const float* xi = ci.xs.data() + i * d;
      for (int64_t j = i + 1; j < n; ++j)
        if (core[j] && sq_dist(xi, ci.xs.data() + j * d, d) <= eps2) uf.unite(i, j);
    }
  } else {
    // First core of each cell (-1: none); a cell's cores are one set (diameter < eps).
    std::vector<int64_t> first(cells, -1);
#pragma omp parallel for schedule(dynamic, 256)
    for (int64_t c = 0; c < cells; ++c)
      for (int64_t i = ci.cell_start[c]; i < ci.cell_start[c + 1]; ++i)
        if (core[i]) {
          if (first[c] < 0)
            first[c] = i;
          else
            uf.unite(first[c], i);
        }
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t c = 0; c < cells; ++c) {
      if (first[c] < 0) continue;
      const int64_t b0 = ci.cell_start[c], e0 = ci.cell_start[c + 1];
      for_neighbor_ranges(g, ci, c, [&](int64_t b, int64_t e) {
        // Each cell pair once: only cells after c (a range may hold several cells).
        for (int64_t cb = std::max(b, e0); cb < e; cb = ci.cell_start[ci.point_cell[cb] + 1]) {
          int64_t other = ci.point_cell[cb];
          if (first[other] < 0 || uf.find(first[c]) == uf.find(first[other])) continue;
          // Any one core pair within eps joins the two sets.
          const int64_t ce = ci.cell_start[other + 1];
          bool joined = false;
          for (int64_t i = b0; i < e0 && !joined; ++i) {
            if (!core[i]) continue;
            const float* xi = ci.xs.data() + i * d;
            for (int64_t j = cb; j < ce; ++j)
              if (core[j] && sq_dist(xi, ci.xs.data() + j * d, d) <= eps2) {
                uf.unite(i, j);
                joined = true;
                break;
              }
          }
        }
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
