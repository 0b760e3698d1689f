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
#pragma once
#include <algorithm>
#include <cstdint>
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

// `points` is row-major [n, d]. Uses OpenMP threads inside (serial when called from
// inside another parallel region).
DbscanResult dbscan(const float* points, int64_t n, int d, const DbscanParams& p);

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

// Points sorted by cell. `order[i]` is the input index of sorted position i.
struct CellIndex {
  std::vector<int64_t> order;       // [n]
  std::vector<float> xs;            // [n, d] coordinates in sorted order
  std::vector<int64_t> cell_key;    // [cells] distinct keys, ascending
  std::vector<int64_t> cell_start;  // [cells + 1] sorted-position offsets
  std::vector<int64_t> point_cell;  // [n] cell of each sorted position
  // Dense key table when the key span is small (about <= 8 n): dense_start[k - dense_base]
  // is the sorted position of the first point with key >= k, so a run of neighbouring keys
  // is one range found in O(1). Empty otherwise (binary search on cell_key instead).
  int64_t dense_base = 0;
  std::vector<int64_t> dense_start;  // [span + 1]
};
CellIndex build_cell_index(const Grid& g, const float* points, int64_t n);

// Calls f(begin, end) for the sorted-position ranges covering the 5^d neighbourhood of
// cell `c` (a range may span several adjacent cells, the own cell included; a few extra
// cells at the grid's edge may be included, which only costs distance checks). Brute
// grids report the single range [0, n).
template <typename F>
void for_neighbor_ranges(const Grid& g, const CellIndex& ci, int64_t c, F&& f) {
  const int64_t n = int64_t(ci.order.size());
  if (g.brute) {
    f(int64_t(0), n);
    return;
  }
  const int64_t key = ci.cell_key[c];
  // Offsets over the first d-1 dims; the last dim is a contiguous key range [base-2, base+2].
  int64_t stride1 = g.d >= 2 ? g.extent[g.d - 1] : 0;
  int64_t stride0 = g.d >= 3 ? g.extent[g.d - 1] * g.extent[g.d - 2] : 0;
  int outer0 = g.d >= 3 ? 2 : 0, outer1 = g.d >= 2 ? 2 : 0;
  const int64_t span = int64_t(ci.dense_start.size()) - 1;
  for (int a = -outer0; a <= outer0; ++a)
    for (int b = -outer1; b <= outer1; ++b) {
      int64_t base = key + a * stride0 + b * stride1;
      if (span > 0) {  // one range for the whole run of keys [base-2, base+2]
        int64_t lo = std::max<int64_t>(base - 2 - ci.dense_base, 0);
        int64_t hi = std::min<int64_t>(base + 3 - ci.dense_base, span);
        if (lo < hi && ci.dense_start[lo] < ci.dense_start[hi])
          f(ci.dense_start[lo], ci.dense_start[hi]);
        continue;
      }
      auto it = std::lower_bound(ci.cell_key.begin(), ci.cell_key.end(), base - 2);
      for (; it != ci.cell_key.end() && *it <= base + 2; ++it) {
        int64_t cc = it - ci.cell_key.begin();
        f(ci.cell_start[cc], ci.cell_start[cc + 1]);
      }
    }
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
std::vector<uint8_t> compute_core(const Grid& g, const CellIndex& ci, const DbscanParams& p,
                                  const uint8_t* need);

// Union-find over the core points (sorted order) joined by core-core edges of length <= eps.
// Returns the root of each core point's set (its smallest sorted position), -1 for non-core.
std::vector<int64_t> union_cores(const Grid& g, const CellIndex& ci, double eps,
                                 const uint8_t* core);

// For a non-core sorted position i: sorted position of its core neighbour with the smallest
// `gid` (global id), or -1 when it has none (noise).
int64_t border_anchor(const Grid& g, const CellIndex& ci, double eps, const uint8_t* core,
                      const int64_t* gid, int64_t i);

}  // namespace sieve::cluster
