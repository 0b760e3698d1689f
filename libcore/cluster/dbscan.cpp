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
    SIEVE_CHECK(std::isfinite(points[i]), "DBSCAN: point ", i / d,
                " has a NaN or infinite coordinate (", points[i], ") in dimension ", i % d);
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

int dbscan_index_bits(int64_t n) {
  return n <= int64_t(std::numeric_limits<int32_t>::max()) ? 32 : 64;
}

namespace {

// Smallest and largest cell key of the points (kmin > kmax when n == 0).
std::pair<int64_t, int64_t> key_range(const Grid& g, const float* points, int64_t n) {
  int64_t kmin = std::numeric_limits<int64_t>::max(), kmax = std::numeric_limits<int64_t>::min();
#pragma omp parallel for schedule(static) reduction(min : kmin) reduction(max : kmax)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = g.key_of(points + i * g.d);
    kmin = std::min(kmin, k);
    kmax = std::max(kmax, k);
  }
  return {kmin, kmax};
}

}  // namespace

template <typename I>
CellIndexT<I> build_cell_index(const Grid& g, const float* points, int64_t n) {
  SIEVE_CHECK(n <= int64_t(std::numeric_limits<I>::max()), "DBSCAN: ", n, " points do not fit ",
              8 * sizeof(I), "-bit indices (at most ", std::numeric_limits<I>::max(), ")");
  CellIndexT<I> ci;
  const int d = g.d;
  const auto [kmin, kmax] = key_range(g, points, n);
  ci.order.resize(n);
  // No per-point key array: keys are recomputed from the coordinates when needed (cheap
  // next to the 8 bytes a point they would take).
  const bool dense = n > 0 && !g.brute && kmax - kmin < 8 * n + (int64_t(1) << 20);
  if (dense) {
    // Counting sort by key: stable (input order within a cell), O(n + span). `cursor`
    // counts points per key, then holds each key's write position; after the scatter
    // cursor[k] is the end of key k. It is freed before the coordinates are copied.
    const int64_t span = kmax - kmin + 1;
    std::vector<I> cursor(span, 0);
    for (int64_t i = 0; i < n; ++i) ++cursor[g.key_of(points + i * d) - kmin];
    int64_t cells = 0, pos = 0;
    for (int64_t k = 0; k < span; ++k) {
      cells += cursor[k] > 0;
      const int64_t count = cursor[k];
      cursor[k] = I(pos);
      pos += count;
    }
    for (int64_t i = 0; i < n; ++i) ci.order[cursor[g.key_of(points + i * d) - kmin]++] = I(i);
    ci.cell_key.resize(cells);
    ci.cell_start.resize(cells + 1);
    ci.dense_base = kmin;
    ci.dense_span = span;
    ci.dense.resize(span / 64 + 1);
    int64_t c = 0;
    for (int64_t k = 0, begin = 0; k < span; ++k) {
      if (k % 64 == 0) ci.dense[k / 64].before = I(c);
      if (cursor[k] == begin) continue;
      ci.dense[k / 64].bits |= uint64_t(1) << (k % 64);
      ci.cell_key[c] = kmin + k;
      ci.cell_start[c++] = I(begin);
      begin = cursor[k];
    }
    if (span % 64 == 0) ci.dense[span / 64].before = I(cells);
    ci.cell_start[cells] = I(n);
  } else {
    // Sorting by (key, index) makes the order, and everything after it, deterministic.
    // Packed pairs (12 bytes with 32-bit indices) sorted in place: the default parallel
    // sort (a multiway mergesort) would take a second copy of them.
#pragma pack(push, 4)
    struct KeyIndex {
      int64_t key;
      I index;
      bool operator<(const KeyIndex& o) const {
        return key < o.key || (key == o.key && index < o.index);
      }
    };
#pragma pack(pop)
    std::vector<KeyIndex> kv(n);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) kv[i] = {g.key_of(points + i * d), I(i)};
    __gnu_parallel::sort(kv.begin(), kv.end(), __gnu_parallel::balanced_quicksort_tag());
    int64_t cells = 0;
    for (int64_t i = 0; i < n; ++i) {
      ci.order[i] = kv[i].index;
      cells += i == 0 || kv[i].key != kv[i - 1].key;
    }
    ci.cell_key.reserve(cells);
    ci.cell_start.reserve(cells + 1);
    for (int64_t i = 0; i < n; ++i)
      if (i == 0 || kv[i].key != kv[i - 1].key) {
        ci.cell_key.push_back(int64_t{kv[i].key});  // a copy: the member is not 8-aligned
        ci.cell_start.push_back(I(i));
      }
    ci.cell_start.push_back(I(n));
  }
  ci.xs.resize(size_t(n) * d);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < d; ++k) ci.xs[i * d + k] = points[int64_t(ci.order[i]) * d + k];
  return ci;
}

template <typename I>
std::vector<uint8_t> compute_core(const Grid& g, const CellIndexT<I>& ci, const DbscanParams& p,
                                  const uint8_t* need) {
  const int64_t cells = ci.cells();
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

// Lock-free union-find on parents of type I (atomic_ref over a plain vector, which the
// caller owns and gets back as the roots). Roots are only ever linked under a smaller root,
// so a set's root is its smallest member.
template <typename I>
struct UnionFind {
  std::vector<I>& parent;
  explicit UnionFind(std::vector<I>& p) : parent(p) {}
  I load(I x) { return std::atomic_ref<I>(parent[x]).load(std::memory_order_relaxed); }
  I find(I x) {
    while (true) {
      I p = load(x);
      if (p == x) return x;
      I gp = load(p);
      if (gp == p) return p;
      // Path halving: point x at its grandparent (an ancestor, so always safe).
      std::atomic_ref<I>(parent[x]).compare_exchange_weak(p, gp, std::memory_order_relaxed);
      x = gp;
    }
  }
  void unite(I a, I b) {
    while (true) {
      a = find(a);
      b = find(b);
      if (a == b) return;
      if (a < b) std::swap(a, b);
      I expected = a;
      if (std::atomic_ref<I>(parent[a]).compare_exchange_strong(expected, b,
                                                                std::memory_order_acq_rel))
        return;
    }
  }
};

}  // namespace

template <typename I>
std::vector<I> union_cores(const Grid& g, const CellIndexT<I>& ci, double eps,
                           const uint8_t* core) {
  const int64_t n = ci.size();
  const int64_t cells = ci.cells();
  const int d = g.d;
  const double eps2 = eps * eps;
  // The parents become the roots in place: one array of n, not two.
  std::vector<I> parent(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) parent[i] = I(i);
  UnionFind<I> uf(parent);
  if (g.brute) {  // one "cell" with no diameter guarantee: every core pair once
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t i = 0; i < n; ++i) {
      if (!core[i]) continue;
      const float* xi = ci.xs.data() + i * d;
      for (int64_t j = i + 1; j < n; ++j)
        if (core[j] && sq_dist(xi, ci.xs.data() + j * d, d) <= eps2) uf.unite(I(i), I(j));
    }
  } else {
    // First core of each cell (-1: none); a cell's cores are one set (diameter < eps).
    std::vector<I> first(cells, -1);
#pragma omp parallel for schedule(dynamic, 256)
    for (int64_t c = 0; c < cells; ++c)
      for (int64_t i = ci.cell_start[c]; i < ci.cell_start[c + 1]; ++i)
        if (core[i]) {
          if (first[c] < 0)
            first[c] = I(i);
          else
            uf.unite(first[c], I(i));
        }
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t c = 0; c < cells; ++c) {
      if (first[c] < 0) continue;
      const int64_t b0 = ci.cell_start[c], e0 = ci.cell_start[c + 1];
      for_neighbor_cells(g, ci, c, [&](int64_t c0, int64_t c1) {
        // Each cell pair once: only cells after c (a run may hold c itself).
        for (int64_t other = std::max(c0, c + 1); other < c1; ++other) {
          if (first[other] < 0 || uf.find(first[c]) == uf.find(first[other])) continue;
          // Any one core pair within eps joins the two sets.
          const int64_t cb = ci.cell_start[other], ce = ci.cell_start[other + 1];
          bool joined = false;
          for (int64_t i = b0; i < e0 && !joined; ++i) {
            if (!core[i]) continue;
            const float* xi = ci.xs.data() + i * d;
            for (int64_t j = cb; j < ce; ++j)
              if (core[j] && sq_dist(xi, ci.xs.data() + j * d, d) <= eps2) {
                uf.unite(I(i), I(j));
                joined = true;
                break;
              }
          }
        }
      });
    }
  }
  // Every unite is done: each core's parent becomes its root (an ancestor, so the other
  // threads' finds stay valid); non-cores were never linked, nobody walks through them.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const I r = core[i] ? uf.find(I(i)) : I(-1);
    std::atomic_ref<I>(parent[i]).store(r, std::memory_order_relaxed);
  }
  return parent;
}

namespace {

template <typename I>
DbscanResult dbscan_impl(const float* points, int64_t n, int d, const DbscanParams& p) {
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
  const Grid g = make_grid(lo, hi, p.eps);
  const CellIndexT<I> ci = build_cell_index<I>(g, points, n);
  const std::vector<uint8_t> core = compute_core(g, ci, p, nullptr);
  std::vector<I> set = union_cores(g, ci, p.eps, core.data());

  // Number the clusters by their smallest input index.
  auto input_index = [&](int64_t i) { return ci.order[i]; };
  const std::vector<I> set_min = number_sets(set, input_index);
  std::vector<std::pair<I, int32_t>> by_min(set_min.size());  // (smallest input index, set)
  for (size_t k = 0; k < set_min.size(); ++k) by_min[k] = {set_min[k], int32_t(k)};
  std::sort(by_min.begin(), by_min.end());
  std::vector<int32_t> id_of_set(set_min.size());
  for (size_t k = 0; k < by_min.size(); ++k) id_of_set[by_min[k].second] = int32_t(k);
  r.num_clusters = int32_t(by_min.size());

  const int64_t cells = ci.cells();
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t c = 0; c < cells; ++c)
    for (int64_t i = ci.cell_start[c]; i < ci.cell_start[c + 1]; ++i) {
      const int64_t src = ci.order[i];
      if (core[i]) {
        r.core[src] = 1;
        r.label[src] = id_of_set[set[i]];
      } else {
        int64_t a = border_anchor(g, ci, p.eps, core.data(), input_index, c, i);
        if (a >= 0) r.label[src] = id_of_set[set[a]];
      }
    }
  for (int64_t i = 0; i < n; ++i) r.num_noise += r.label[i] < 0;
  return r;
}

}  // namespace

DbscanResult dbscan(const float* points, int64_t n, int d, const DbscanParams& p, int index_bits) {
  check_dbscan_input(points, n, d, p);
  if (index_bits == 0) index_bits = dbscan_index_bits(n);
  SIEVE_CHECK(index_bits == 32 || index_bits == 64,
              "DBSCAN: index_bits must be 0 (by N), 32 or 64, got ", index_bits);
  return index_bits == 32 ? dbscan_impl<int32_t>(points, n, d, p)
                          : dbscan_impl<int64_t>(points, n, d, p);
}

#define SIEVE_DBSCAN_INSTANTIATE(I)                                                   \
  template CellIndexT<I> build_cell_index<I>(const Grid&, const float*, int64_t);     \
  template std::vector<uint8_t> compute_core<I>(const Grid&, const CellIndexT<I>&,    \
                                                const DbscanParams&, const uint8_t*); \
  template std::vector<I> union_cores<I>(const Grid&, const CellIndexT<I>&, double, const uint8_t*);
SIEVE_DBSCAN_INSTANTIATE(int32_t)
SIEVE_DBSCAN_INSTANTIATE(int64_t)
#undef SIEVE_DBSCAN_INSTANTIATE

}  // namespace sieve::cluster
