// Exact DBSCAN (Ester et al. 1996) with scikit-learn's conventions, fast in 2-D and 3-D.
//
// Definitions (identical to sklearn.cluster.DBSCAN with the Euclidean metric):
//  - the eps-neighbourhood of p is every point q with |p - q| <= eps, p itself included;
//  - p is a core point when its neighbourhood holds >= min_samples points;
//  - core points within eps of each other are in the same cluster (transitively);
//  - a non-core point within eps of some core point is a border point of that core's
//    cluster; every other point is noise (-1).
// Borders adjacent to several clusters are ambiguous in DBSCAN itself; here a border goes
// to the cluster of its core neighbour with the smallest point index, so the result is
// deterministic and independent of threads and ranks. Clusters are numbered 0, 1, ... in
// the order of their smallest core point index.
//
// Method (the HPDBSCAN layout, with the cell size of Gunawan's / Gan & Tao's exact 2-D
// algorithm): points are sorted by the key of their grid cell. Cells have side
// eps / sqrt(d) (shrunk by 1e-6 relative), so any two points of one cell are within eps,
// and every eps-neighbour of a point lies in the 5^d block of cells around it (cell index
// differences <= 2 per axis). That gives two shortcuts that make dense data cheap:
//  - a cell holding >= min_samples points is all core without a single distance check;
//    other points count their neighbours with an early exit at min_samples;
//  - the core points of one cell are one set; two neighbouring cells' sets are merged as
//    soon as ONE core pair within eps is found (early exit), and not looked at again once
//    they are in the same set.
// The sets live in a lock-free union-find (link the larger root under the smaller with a
// CAS on the parent, path halving), with cells processed in parallel (OpenMP).
// Work: O(N log N) for the sort plus, per cell pair, at most |A|*|B| distance checks
// (usually far fewer). For d > 3 (5^d cells stop paying off) a blocked all-pairs search is
// used (O(N^2 d), fine for ~1e5 points). Distances are computed in double from the float
// inputs.
//
// Memory: the per-point arrays (sorted order, cell offsets, union-find parents) use
// the index type I, int32_t below 2^31 points and int64_t above (dbscan_index_bits), so
// one algorithm serves both and 2-D DBSCAN holds about 23 bytes a point besides its input
// and result (docs/cluster.md). Cell keys stay int64 (a grid can have more cells than points).
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace sieve::cluster {

struct DbscanParams {
  double eps = 0.5;
  int64_t min_samples = 5;  // counts the point itself, as scikit-learn does
};

struct DbscanResult {
  std::vector<int32_t> label;  // [n] cluster id, -1 = noise
  std::vector<uint8_t> core;   // [n] 1 = core point
  int32_t num_clusters = 0;
  int64_t num_noise = 0;
};

// Checks eps > 0, min_samples >= 1 and finite coordinates (sieve::UsageError / Error).
void check_dbscan_input(const float* points, int64_t n, int d, const DbscanParams& p);

// Width of the index type used for n points: 32 when n < 2^31, else 64.
int dbscan_index_bits(int64_t n);

// `points` is row-major [n, d]. Uses OpenMP threads inside (serial when called from
// inside another parallel region). `index_bits` 0 picks dbscan_index_bits(n); 32 or 64
// force a width (tests: both give the same result; 32 needs n < 2^31).
DbscanResult dbscan(const float* points, int64_t n, int d, const DbscanParams& p,
                    int index_bits = 0);

// Cell layout of a point set: the building block shared by the serial and the
// distributed DBSCAN and by the k-distance search.
struct Grid {
  int d = 0;
  double side = 0;              // cell side (~ eps / sqrt(d))
  std::vector<double> lo;       // [d] origin (per-dim minimum)
  std::vector<int64_t> extent;  // [d] cells per dim
  bool brute = false;           // true: one cell holding everything (d > 3 or huge extent)
  // Linear cell key of a point (row-major over cell coordinates).
  int64_t key_of(const float* x) const;
  // Key span of the 5^d neighbourhood: every neighbour key lies in [k - reach, k + reach].
  int64_t reach() const;
};

// Build the grid geometry for points whose per-dim minimum is `lo` and maximum `hi`:
// cells of side eps / sqrt(d) (see the header comment); `brute` for d > 3.
Grid make_grid(const std::vector<double>& lo, const std::vector<double>& hi, double eps);

// Points sorted by cell. `order[i]` is the input index of sorted position i. I (int32_t or
// int64_t) holds point positions and cell numbers: it must hold n.
template <typename I>
struct CellIndexT {
  std::vector<I> order;           // [n]
  std::vector<float> xs;          // [n, d] coordinates in sorted order
  std::vector<int64_t> cell_key;  // [cells] distinct keys, ascending
  std::vector<I> cell_start;      // [cells + 1] sorted-position offsets
  // Dense key table when the key span is small (about <= 8 n): first_cell(k) is the number
  // of the first cell with key >= dense_base + k, so a run of neighbouring keys is one run
  // of cells found in O(1). A bit per key (is the cell non-empty) and a count per 64 keys:
  // ~0.25 bytes a key, where a table of positions would take 4 or 8. dense_span == 0: none
  // (binary search on cell_key instead).
  struct DenseWord {
    uint64_t bits = 0;  // bit b: key 64 w + b has a cell
    I before = 0;       // cells with keys below 64 w
  };
  int64_t dense_base = 0, dense_span = 0;
  std::vector<DenseWord> dense;          // [dense_span / 64 + 1]
  int64_t first_cell(int64_t k) const {  // 0 <= k <= dense_span
    const DenseWord& w = dense[k >> 6];
    return int64_t(w.before) + __builtin_popcountll(w.bits & ((uint64_t(1) << (k & 63)) - 1));
  }
  int64_t size() const { return int64_t(order.size()); }
  int64_t cells() const { return int64_t(cell_key.size()); }
};
using CellIndex = CellIndexT<int64_t>;

// Sorts the points by cell (stable: input order within a cell).
template <typename I = int64_t>
CellIndexT<I> build_cell_index(const Grid& g, const float* points, int64_t n);

// Calls f(c0, c1) for runs of consecutive cells [c0, c1) (sorted positions
// cell_start[c0] .. cell_start[c1]) covering the 5^d neighbourhood of cell `c`, the own
// cell included; a few extra cells at the grid's edge may be included, which only costs
// distance checks. Brute grids have one cell, reported as [0, 1).
template <typename I, typename F>
void for_neighbor_cells(const Grid& g, const CellIndexT<I>& ci, int64_t c, F&& f) {
  if (g.brute) {
    f(int64_t(0), ci.cells());
    return;
  }
  const int64_t key = ci.cell_key[c];
  // Offsets over the first d-1 dims; the last dim is a contiguous key range [base-2, base+2].
  int64_t stride1 = g.d >= 2 ? g.extent[g.d - 1] : 0;
  int64_t stride0 = g.d >= 3 ? g.extent[g.d - 1] * g.extent[g.d - 2] : 0;
  int outer0 = g.d >= 3 ? 2 : 0, outer1 = g.d >= 2 ? 2 : 0;
  const int64_t span = ci.dense_span;
  for (int a = -outer0; a <= outer0; ++a)
    for (int b = -outer1; b <= outer1; ++b) {
      int64_t base = key + a * stride0 + b * stride1;
      if (span > 0) {  // one run of cells for the whole run of keys [base-2, base+2]
        int64_t lo = std::max<int64_t>(base - 2 - ci.dense_base, 0);
        int64_t hi = std::min<int64_t>(base + 3 - ci.dense_base, span);
        if (lo >= hi) continue;
        const int64_t c0 = ci.first_cell(lo), c1 = ci.first_cell(hi);
        if (c0 < c1) f(c0, c1);
        continue;
      }
      auto first = std::lower_bound(ci.cell_key.begin(), ci.cell_key.end(), base - 2);
      auto last = first;  // at most 5 keys: a scan beats a second binary search
      while (last != ci.cell_key.end() && *last <= base + 2) ++last;
      if (first < last)
        f(int64_t(first - ci.cell_key.begin()), int64_t(last - ci.cell_key.begin()));
    }
}

// Sorted-position ranges [begin, end) of the same neighbourhood (one per run of cells).
template <typename I, typename F>
void for_neighbor_ranges(const Grid& g, const CellIndexT<I>& ci, int64_t c, F&& f) {
  for_neighbor_cells(g, ci, c, [&](int64_t c0, int64_t c1) {
    f(int64_t(ci.cell_start[c0]), int64_t(ci.cell_start[c1]));
  });
}

inline double sq_dist(const float* a, const float* b, int d) {
  double s = 0;
  for (int k = 0; k < d; ++k) {
    double t = double(a[k]) - double(b[k]);
    s += t * t;
  }
  return s;
}

// Core flags (sorted order) of the positions with need[i] != 0 (all when need is null);
// other entries are 0.
template <typename I>
std::vector<uint8_t> compute_core(const Grid& g, const CellIndexT<I>& ci, const DbscanParams& p,
                                  const uint8_t* need);

// Union-find over the core points (sorted order) joined by core-core edges of length <= eps.
// Returns the root of each core point's set (its smallest sorted position), -1 for non-core.
template <typename I>
std::vector<I> union_cores(const Grid& g, const CellIndexT<I>& ci, double eps, const uint8_t* core);

// Renumbers the sets of union_cores' `root` in place: root[i] becomes the set number
// 0, 1, ... (in order of the sets' roots), -1 stays -1. Returns, per set, the smallest
// key(i) of its members. Serial, one pass.
template <typename I, typename Key>
auto number_sets(std::vector<I>& root, Key&& key) {
  std::vector<std::decay_t<decltype(key(int64_t(0)))>> set_min;
  const int64_t n = int64_t(root.size());
  for (int64_t i = 0; i < n; ++i) {
    const I r = root[i];
    if (r < 0) continue;
    // r <= i (a set's root is its smallest member), so root[r] is already renumbered
    // unless r == i, the first member met.
    if (r == i) {
      root[i] = I(set_min.size());
      set_min.push_back(key(i));
    } else {
      root[i] = root[r];
      set_min[root[i]] = std::min(set_min[root[i]], key(i));
    }
  }
  return set_min;
}

// For a non-core sorted position i of cell c: sorted position of its core neighbour with
// the smallest gid(j) (global id), or -1 when it has none (noise).
template <typename I, typename Gid>
int64_t border_anchor(const Grid& g, const CellIndexT<I>& ci, double eps, const uint8_t* core,
                      Gid&& gid, int64_t c, int64_t i) {
  const int d = g.d;
  const double eps2 = eps * eps;
  const float* xi = ci.xs.data() + i * d;
  int64_t best = -1;
  for_neighbor_ranges(g, ci, c, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j)
      if (core[j] && (best < 0 || gid(j) < gid(best)) &&
          sq_dist(xi, ci.xs.data() + j * d, d) <= eps2)
        best = j;
  });
  return best;
}

}  // namespace sieve::cluster
