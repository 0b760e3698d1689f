#include "cluster/dbscan_dist.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace sieve::cluster {

namespace {

std::vector<int> scaled(const std::vector<int>& counts, int by) {
  std::vector<int> out(counts);
  for (int& c : out) c *= by;
  return out;
}

// Points routed to ranks: for each destination, which local rows, in send order.
struct Routing {
  std::vector<int> counts;    // [p] rows per destination
  std::vector<int64_t> rows;  // rows grouped by destination
};

// Send rows (coordinates + gids) along `route`; append what arrives to xs/ids. The rows
// are copied out before anything is appended, so xs_in / ids_in may point into xs / ids.
// Each send buffer is freed once sent, and the first arrival becomes xs/ids (no copy).
void exchange_points(const Comm& comm, const Routing& route, int d, const float* xs_in,
                     const int64_t* ids_in, std::vector<float>& xs, std::vector<int64_t>& ids,
                     std::vector<int>* recv_counts) {
  auto append = [](auto& to, auto&& from) {
    if (to.empty())
      to = std::move(from);
    else
      to.insert(to.end(), from.begin(), from.end());
  };
  std::vector<float> sx(route.rows.size() * d);
  std::vector<int64_t> sid(route.rows.size());
  for (size_t k = 0; k < route.rows.size(); ++k) {
    int64_t row = route.rows[k];
    std::copy(xs_in + row * d, xs_in + (row + 1) * d, sx.begin() + k * d);
    sid[k] = ids_in[row];
  }
  std::vector<float> rx = comm.alltoallv(sx, scaled(route.counts, d));
  std::vector<float>().swap(sx);
  append(xs, std::move(rx));
  std::vector<int64_t> rid = comm.alltoallv(sid, route.counts, recv_counts);
  std::vector<int64_t>().swap(sid);
  append(ids, std::move(rid));
}

// What the owner of a point decides: its cluster id (-1 noise) and core flag.
struct OwnedLabels {
  std::vector<int32_t> id;       // [n_own] unsorted owned order
  std::vector<uint8_t> is_core;  // [n_own]
  int32_t num_clusters = 0;
};

// Steps 4-6 on this rank's owned + halo points (xs, ids: owned first), with sorted positions
// and cells in I (int32_t when n_own + n_halo < 2^31). Takes xs to free it once sorted.
template <typename I>
OwnedLabels label_local_points(const Comm& comm, const Grid& g, const DbscanParams& p,
                               std::vector<float> xs, const std::vector<int64_t>& ids,
                               int64_t n_own, const Routing& halo) {
  const int64_t n_loc = int64_t(ids.size());

  // 4. Core flags: computed for owned points, received from the owners for halo points.
  const CellIndexT<I> ci = build_cell_index<I>(g, xs.data(), n_loc);
  std::vector<float>().swap(xs);  // ci.xs holds them in sorted order
  std::vector<uint8_t> core;
  {
    std::vector<uint8_t> need(n_loc);
    for (int64_t i = 0; i < n_loc; ++i) need[i] = ci.order[i] < n_own;
    core = compute_core(g, ci, p, need.data());
    std::vector<uint8_t> core_local(n_loc, 0);  // unsorted (local row) order
    for (int64_t i = 0; i < n_loc; ++i)
      if (need[i]) core_local[ci.order[i]] = core[i];
    std::vector<uint8_t> sent(halo.rows.size());
    for (size_t k = 0; k < halo.rows.size(); ++k) sent[k] = core_local[halo.rows[k]];
    std::vector<uint8_t> got = comm.alltoallv(sent, halo.counts);
    for (size_t k = 0; k < got.size(); ++k) core_local[n_own + k] = got[k];
    for (int64_t i = 0; i < n_loc; ++i) core[i] = core_local[ci.order[i]];
  }

  // 5. Local sets, labelled by their smallest global id; then merge across ranks.
  std::vector<I> set = union_cores(g, ci, p.eps, core.data());
  auto gid_of = [&](int64_t i) { return ids[ci.order[i]]; };  // sorted position -> gid
  const std::vector<int64_t> set_min = number_sets(set, gid_of);
  std::vector<I> row_set(n_loc, -1);  // unsorted order: local set of cores (borders: below)
  for (int64_t i = 0; i < n_loc; ++i) row_set[ci.order[i]] = set[i];
  auto label_of_row = [&](int64_t row) -> int64_t {
    return row_set[row] >= 0 ? set_min[row_set[row]] : -1;
  };
  std::vector<int64_t> pairs;  // (my label, owner's label) for core halo points
  {
    std::vector<int64_t> sent(halo.rows.size());
    for (size_t k = 0; k < halo.rows.size(); ++k) sent[k] = label_of_row(halo.rows[k]);
    std::vector<int64_t> got = comm.alltoallv(sent, halo.counts);
    for (size_t k = 0; k < got.size(); ++k)
      if (got[k] >= 0 && got[k] != label_of_row(n_own + int64_t(k))) {
        pairs.push_back(label_of_row(n_own + int64_t(k)));
        pairs.push_back(got[k]);
      }
  }
  std::vector<int64_t> all_pairs = comm.allgatherv(pairs);
  // Union-find over the labels that occur in pairs (same on every rank).
  std::vector<int64_t> names(all_pairs);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<int64_t> parent(names.size());
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int64_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  auto index_of = [&](int64_t name) {
    return std::lower_bound(names.begin(), names.end(), name) - names.begin();
  };
  for (size_t k = 0; k + 1 < all_pairs.size(); k += 2) {
    int64_t a = find(index_of(all_pairs[k])), b = find(index_of(all_pairs[k + 1]));
    if (a > b) std::swap(a, b);
    if (a != b) parent[b] = a;  // names are sorted: the root is the smallest label
  }
  // Global label of each local set: the smallest core gid of its cluster.
  std::vector<int64_t> set_rep(set_min.size());
  for (size_t k = 0; k < set_min.size(); ++k) {
    auto it = std::lower_bound(names.begin(), names.end(), set_min[k]);
    set_rep[k] =
        it == names.end() || *it != set_min[k] ? set_min[k] : names[find(it - names.begin())];
  }

  // 6. Owned borders join the set of their anchor (row_set); cores are already in theirs.
  OwnedLabels out;
  out.is_core.assign(n_own, 0);
  const int64_t cells = ci.cells();
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t c = 0; c < cells; ++c)
    for (int64_t i = ci.cell_start[c]; i < ci.cell_start[c + 1]; ++i) {
      const int64_t row = ci.order[i];
      if (row >= n_own) continue;
      if (core[i]) {
        out.is_core[row] = 1;
      } else {
        int64_t a = border_anchor(g, ci, p.eps, core.data(), gid_of, c, i);
        if (a >= 0) row_set[row] = set[a];
      }
    }
  // Clusters are numbered by their global label over all ranks.
  std::vector<int64_t> reps;
  for (int64_t i = 0; i < n_own; ++i)
    if (out.is_core[i]) reps.push_back(set_rep[row_set[i]]);
  std::sort(reps.begin(), reps.end());
  reps.erase(std::unique(reps.begin(), reps.end()), reps.end());
  std::vector<int64_t> all_reps = comm.allgatherv(reps);
  std::sort(all_reps.begin(), all_reps.end());
  all_reps.erase(std::unique(all_reps.begin(), all_reps.end()), all_reps.end());
  std::vector<int32_t> set_id(set_rep.size());
  for (size_t k = 0; k < set_rep.size(); ++k)
    set_id[k] =
        int32_t(std::lower_bound(all_reps.begin(), all_reps.end(), set_rep[k]) - all_reps.begin());
  out.id.assign(n_own, -1);
  for (int64_t i = 0; i < n_own; ++i)
    if (row_set[i] >= 0) out.id[i] = set_id[row_set[i]];
  out.num_clusters = int32_t(all_reps.size());
  return out;
}

}  // namespace

DbscanResult dbscan_distributed(const Comm& comm, const float* points, const int64_t* gid,
                                int64_t n_local, int d, const DbscanParams& p, int index_bits) {
  check_dbscan_input(points, n_local, d, p);
  SIEVE_CHECK(index_bits == 0 || index_bits == 32 || index_bits == 64,
              "DBSCAN: index_bits must be 0 (by N), 32 or 64, got ", index_bits);
  const int P = comm.size(), me = comm.rank();
  DbscanResult result;
  result.label.assign(n_local, -1);
  result.core.assign(n_local, 0);
  const int64_t n_total = comm.allreduce_sum<int64_t>(n_local);
  if (n_total == 0) return result;

  // 1. Global grid and cell-range splitters from sampled keys.
  std::vector<double> lo(d), hi(d);
  for (int k = 0; k < d; ++k) {
    double l = std::numeric_limits<double>::infinity(), h = -l;
    for (int64_t i = 0; i < n_local; ++i) {
      l = std::min(l, double(points[i * d + k]));
      h = std::max(h, double(points[i * d + k]));
    }
    lo[k] = comm.allreduce_min(l);
    hi[k] = comm.allreduce_max(h);
  }
  const Grid g = make_grid(lo, hi, p.eps);
  std::vector<int64_t> mine;
  {
    std::vector<int64_t> sorted_keys(n_local);  // freed before the exchange
    for (int64_t i = 0; i < n_local; ++i) sorted_keys[i] = g.key_of(points + i * d);
    std::sort(sorted_keys.begin(), sorted_keys.end());
    const int64_t samples = std::min<int64_t>(n_local, 256);
    for (int64_t s = 0; s < samples; ++s) mine.push_back(sorted_keys[s * n_local / samples]);
  }
  std::vector<int64_t> all = comm.allgatherv(mine);
  std::sort(all.begin(), all.end());
  // Rank r owns keys in [split[r], split[r+1]); split[0] = -inf, split[P] = +inf.
  std::vector<int64_t> split(P + 1);
  split[0] = std::numeric_limits<int64_t>::min();
  split[P] = std::numeric_limits<int64_t>::max();
  for (int r = 1; r < P; ++r)
    split[r] = all.empty() ? 0 : all[std::min(all.size() - 1, all.size() * r / P)];
  auto owner = [&](int64_t i) {
    const int64_t key = g.key_of(points + i * d);
    return int(std::upper_bound(split.begin() + 1, split.end() - 1, key) - (split.begin() + 1));
  };

  // 2. Move each point to the owner of its cell (rows grouped by owner, in row order; the
  // row list is freed after the exchange and the order recomputed for the way back).
  std::vector<int> to_owner_counts(P, 0);
  for (int64_t i = 0; i < n_local; ++i) ++to_owner_counts[owner(i)];
  auto first_of_owner = [&] {
    std::vector<int64_t> first(P, 0);
    for (int r = 1; r < P; ++r) first[r] = first[r - 1] + to_owner_counts[r - 1];
    return first;
  };
  std::vector<float> xs;      // [n_own + n_halo, d]
  std::vector<int64_t> ids;   // [n_own + n_halo] global ids
  std::vector<int> own_from;  // [P] how many owned points came from each rank
  {
    Routing to_owner;
    to_owner.counts = to_owner_counts;
    to_owner.rows.resize(n_local);
    std::vector<int64_t> next = first_of_owner();
    for (int64_t i = 0; i < n_local; ++i) to_owner.rows[next[owner(i)]++] = i;
    exchange_points(comm, to_owner, d, points, gid, xs, ids, &own_from);
  }
  const int64_t n_own = int64_t(ids.size());

  // 3. Halo: my owned points whose key lies within `reach` of another rank's cell range.
  const int64_t reach = g.reach();
  Routing halo;
  halo.counts.assign(P, 0);
  for (int r = 0; r < P; ++r) {
    if (r == me) continue;
    // Saturating bounds: split[0] / split[P] are the int64 extremes.
    int64_t a = split[r] == std::numeric_limits<int64_t>::min() ? split[r] : split[r] - reach;
    int64_t b =
        split[r + 1] == std::numeric_limits<int64_t>::max() ? split[r + 1] : split[r + 1] + reach;
    for (int64_t i = 0; i < n_own; ++i) {
      int64_t k = g.key_of(xs.data() + i * d);
      if (k >= a && k < b) {
        halo.rows.push_back(i);
        ++halo.counts[r];
      }
    }
  }
  std::vector<int> halo_from;
  exchange_points(comm, halo, d, xs.data(), ids.data(), xs, ids, &halo_from);
  const int64_t n_loc = int64_t(ids.size());

  // 4-6 with the narrowest index type that holds this rank's points.
  if (index_bits == 0) index_bits = dbscan_index_bits(n_loc);
  OwnedLabels own = index_bits == 32
                        ? label_local_points<int32_t>(comm, g, p, std::move(xs), ids, n_own, halo)
                        : label_local_points<int64_t>(comm, g, p, std::move(xs), ids, n_own, halo);

  // Back to the input layout: owned rows arrived grouped by source rank, in send order.
  std::vector<int32_t> back_id = comm.alltoallv(own.id, own_from);
  std::vector<uint8_t> back_core = comm.alltoallv(own.is_core, own_from);
  std::vector<int64_t> next = first_of_owner();
  for (int64_t i = 0; i < n_local; ++i) {
    const int64_t k = next[owner(i)]++;
    result.label[i] = back_id[k];
    result.core[i] = back_core[k];
  }
  result.num_clusters = own.num_clusters;
  int64_t noise = 0;
  for (int64_t i = 0; i < n_local; ++i) noise += result.label[i] < 0;
  result.num_noise = comm.allreduce_sum(noise);
  return result;
}

}  // namespace sieve::cluster
