#include "cluster/filter.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <exception>
#include <iomanip>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

#include "cluster/dbscan_dist.hpp"
#include "cluster/eps_select.hpp"
#include "util/log.hpp"

namespace sieve::cluster {

namespace {

struct Group {
  int32_t cls;                // class, or -1 for "all points"
  std::vector<int64_t> rows;  // ascending input rows
};

struct GroupResult {
  std::vector<int32_t> label;  // [rows] group-local cluster id, -1 noise
  int64_t clusters = 0;
  double log_likelihood = 0;
};

std::vector<float> gather_rows(const float* x, int d, const std::vector<int64_t>& rows) {
  std::vector<float> g(rows.size() * d);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy(x + rows[i] * d, x + (rows[i] + 1) * d, g.begin() + i * d);
  return g;
}

std::string group_name(const Group& g) {
  return g.cls >= 0 ? cat("class ", g.cls) : std::string("all points");
}

// One group on this rank (threads inside).
GroupResult cluster_group(const std::vector<float>& gx, int d, const Group& g,
                          const FilterOptions& o, uint64_t seed) {
  const int64_t n = int64_t(g.rows.size());
  GroupResult r;
  if (o.method == "dbscan") {
    DbscanResult db = dbscan(gx.data(), n, d, o.dbscan);
    r.label = std::move(db.label);
    r.clusters = db.num_clusters;
    return r;
  }
  if (o.method == "gmm") {
    SIEVE_CHECK(n >= o.gmm.k, group_name(g), ": ", n,
                " samples, fewer than filter.gmm.components = ", o.gmm.k);
    GmmParams p = o.gmm;
    p.seed = seed;
    GmmModel m = fit_gmm(gx.data(), n, d, p);
    std::vector<double> logp;
    std::vector<int32_t> comp;
    gmm_score(m, gx.data(), n, &logp, &comp);
    double thr = o.gmm_use_threshold ? o.gmm_threshold : quantile(logp, o.outlier_quantile);
    for (int64_t i = 0; i < n; ++i)
      if (logp[i] < thr) comp[i] = -1;
    r.label = std::move(comp);
    r.clusters = o.gmm.k;
    r.log_likelihood = m.log_likelihood;
    return r;
  }
  SIEVE_CHECK(n >= o.kmeans.k, group_name(g), ": ", n,
              " samples, fewer than filter.kmeans.k = ", o.kmeans.k);
  KmeansParams p = o.kmeans;
  p.seed = seed;
  KmeansModel m = fit_kmeans(gx.data(), n, d, p);
  double thr = quantile(m.dist, 1 - o.outlier_quantile);
  r.label = m.assign;
  for (int64_t i = 0; i < n; ++i)
    if (m.dist[i] > thr) r.label[i] = -1;
  r.clusters = o.kmeans.k;
  return r;
}

double choose_eps(const float* x, int d, const std::vector<Group>& groups, int64_t total,
                  const FilterOptions& o) {
  std::vector<double> pooled;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    std::vector<float> gx = gather_rows(x, d, g.rows);
    int64_t q = std::max<int64_t>(1, o.auto_eps_samples * int64_t(g.rows.size()) / total);
    auto kd =
        k_distances(gx.data(), int64_t(g.rows.size()), d, o.dbscan.min_samples, q, o.seed + gi);
    pooled.insert(pooled.end(), kd.begin(), kd.end());
  }
  std::sort(pooled.begin(), pooled.end());
  int64_t e = elbow_index(pooled);
  double eps = pooled.empty() ? 0 : pooled[e];
  SIEVE_CHECK(eps > 0,
              "cannot choose eps automatically: the k-distance elbow is 0 (many "
              "duplicate points?); set filter.dbscan.eps");
  log::infof("auto eps: k-distance elbow (k = min_samples = ", o.dbscan.min_samples, ", ",
             pooled.size(), " sampled points, elbow at ", e, ") gives eps = ", eps);
  return eps;
}

// Groups: one per class (ascending), or everything at once.
std::vector<Group> make_groups(const int32_t* labels, int64_t n, bool per_class) {
  std::vector<Group> groups;
  if (!per_class) {
    groups.push_back({-1, {}});
    for (int64_t i = 0; i < n; ++i) groups[0].rows.push_back(i);
    return groups;
  }
  std::set<int32_t> classes(labels, labels + n);
  std::unordered_map<int32_t, size_t> at;
  for (int32_t c : classes) {
    at[c] = groups.size();
    groups.push_back({c, {}});
  }
  for (int64_t i = 0; i < n; ++i) groups[at[labels[i]]].rows.push_back(i);
  return groups;
}

// Table I (res.table, res.noise) from res.keep and res.cluster: per class, whatever the grouping.
void fill_class_table(const int32_t* labels, int64_t n, FilterResult& res) {
  std::map<int32_t, ClassRow> rows;
  std::map<int32_t, std::set<int32_t>> seen;
  for (int64_t i = 0; i < n; ++i) {
    ClassRow& r = rows[labels[i]];
    r.cls = labels[i];
    ++r.samples;
    if (res.keep[i])
      seen[labels[i]].insert(res.cluster[i]);
    else
      ++r.noise;
  }
  for (auto& [c, r] : rows) {
    r.clusters = int64_t(seen[c].size());
    r.removed_pct = 100.0 * double(r.noise) / double(r.samples);
    res.noise += r.noise;
    res.table.push_back(r);
  }
}

}  // namespace

FilterResult run_filter(const Comm& comm, const float* x, int64_t n, int d, const int32_t* labels,
                        const FilterOptions& opt) {
  FilterOptions o = opt;
  SIEVE_CHECK(n > 0, "cluster_filter: no samples to filter");
  const std::vector<Group> groups = make_groups(labels, n, o.per_class);
  const int G = int(groups.size());
  FilterResult res;
  if (o.method == "dbscan" && o.auto_eps) {
    double eps = 0;
    if (comm.is_root()) eps = choose_eps(x, d, groups, n, o);
    comm.bcast(&eps, 1);
    o.dbscan.eps = eps;
  }
  if (o.method == "dbscan") {
    check_dbscan_input(x, n, d, o.dbscan);
    res.eps = o.dbscan.eps;
  }

  std::vector<int32_t> lab(n, -2);  // -2: not computed on this rank
  std::vector<int64_t> nclusters(G, -1);
  std::vector<double> ll(G, 0);
  bool spatial = o.method == "dbscan" && comm.size() > 1 &&
                 (o.parallel == "spatial" || (o.parallel == "auto" && G < comm.size()));
  log::Progress prog("clustering", G, "groups");
  if (spatial) {
    for (int gi = 0; gi < G; ++gi) {
      const auto& g = groups[gi];
      Range rr = block_range(int64_t(g.rows.size()), comm.rank(), comm.size());
      std::vector<int64_t> mine(g.rows.begin() + rr.begin, g.rows.begin() + rr.end);
      std::vector<float> gx = gather_rows(x, d, mine);
      std::vector<int64_t> gid(mine.size());
      for (size_t i = 0; i < gid.size(); ++i) gid[i] = rr.begin + int64_t(i);
      DbscanResult db =
          dbscan_distributed(comm, gx.data(), gid.data(), int64_t(gid.size()), d, o.dbscan);
      // Blocks in rank order concatenate to the group's rows in order.
      std::vector<int32_t> all = comm.allgatherv(db.label);
      SIEVE_ASSERT(all.size() == g.rows.size());
      for (size_t i = 0; i < all.size(); ++i) lab[g.rows[i]] = all[i];
      nclusters[gi] = db.num_clusters;
      prog.update(gi + 1);
    }
  } else {
    // Largest group first onto the least-loaded rank: the same plan on every rank.
    std::vector<int64_t> group_rows;
    for (const auto& g : groups) group_rows.push_back(int64_t(g.rows.size()));
    const std::vector<int> mine = deal_largest_first(group_rows, comm.size())[size_t(comm.rank())];
    int64_t done = 0;
    std::exception_ptr failure;  // exceptions must not leave an OpenMP region
    // Several groups: one per thread (DBSCAN's inner loops then run serially).
#pragma omp parallel for schedule(dynamic, 1) if (mine.size() > 1)
    for (size_t k = 0; k < mine.size(); ++k) {
      try {
        const auto& g = groups[mine[k]];
        std::vector<float> gx = gather_rows(x, d, g.rows);
        GroupResult gr = cluster_group(gx, d, g, o, o.seed + uint64_t(mine[k]));
        for (size_t i = 0; i < g.rows.size(); ++i) lab[g.rows[i]] = gr.label[i];
        nclusters[mine[k]] = gr.clusters;
        ll[mine[k]] = gr.log_likelihood;
#pragma omp critical
        prog.update(++done);
      } catch (...) {
#pragma omp critical
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
    if (comm.size() > 1) {
      comm.allreduce_max(lab.data(), size_t(n));
      comm.allreduce_max(nclusters.data(), size_t(G));
      comm.allreduce_sum(ll.data(), ll.size());
    }
  }
  prog.finish();

  // Global cluster ids: group-local ids offset by the clusters of earlier groups.
  std::vector<int64_t> offset(G, 0);
  for (int gi = 1; gi < G; ++gi) offset[gi] = offset[gi - 1] + nclusters[gi - 1];
  res.cluster.assign(n, -1);
  res.keep.assign(n, 0);
  for (int gi = 0; gi < G; ++gi)
    for (int64_t row : groups[gi].rows) {
      SIEVE_ASSERT(lab[row] >= -1, "row ", row, " was not clustered");
      if (lab[row] >= 0) res.cluster[row] = int32_t(offset[gi] + lab[row]);
      res.keep[row] = lab[row] >= 0;
    }
  res.clusters = offset[G - 1] + nclusters[G - 1];
  double llsum = 0;
  for (int gi = 0; gi < G; ++gi) llsum += ll[gi] * double(groups[gi].rows.size());
  res.log_likelihood = llsum / double(n);

  fill_class_table(labels, n, res);
  res.random_keep = random_keep_mask(labels, n, res.table, o.seed);
  return res;
}

std::vector<uint8_t> random_keep_mask(const int32_t* labels, int64_t n,
                                      const std::vector<ClassRow>& table, uint64_t seed) {
  std::vector<uint8_t> keep(n, 1);
  std::map<int32_t, std::vector<int64_t>> members;
  for (int64_t i = 0; i < n; ++i) members[labels[i]].push_back(i);
  for (const auto& r : table) {
    auto& m = members[r.cls];
    SIEVE_ASSERT(r.noise <= int64_t(m.size()));
    // Partial Fisher-Yates: the first `noise` entries become a uniform random subset.
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + uint64_t(r.cls) + 1);
    for (int64_t i = 0; i < r.noise; ++i) {
      int64_t j = std::uniform_int_distribution<int64_t>(i, int64_t(m.size()) - 1)(rng);
      std::swap(m[i], m[j]);
      keep[m[i]] = 0;
    }
  }
  return keep;
}

NoiseScore score_noise(const std::vector<int64_t>& ids, const std::vector<uint8_t>& keep,
                       const std::vector<int64_t>& truth_ids, const std::vector<uint8_t>& truth) {
  std::unordered_map<int64_t, uint8_t> t;
  t.reserve(truth_ids.size());
  for (size_t i = 0; i < truth_ids.size(); ++i) t[truth_ids[i]] = truth[i];
  NoiseScore s;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = t.find(ids[i]);
    if (it == t.end()) continue;
    ++s.matched;
    bool flagged = !keep[i], noisy = it->second != 0;
    s.flagged += flagged;
    s.truth += noisy;
    s.hits += flagged && noisy;
  }
  s.precision = s.flagged ? double(s.hits) / double(s.flagged) : 0;
  s.recall = s.truth ? double(s.hits) / double(s.truth) : 0;
  return s;
}

std::string format_table(const std::vector<ClassRow>& table) {
  std::ostringstream os;
  os << std::setw(8) << "class" << std::setw(10) << "samples" << std::setw(10) << "clusters"
     << std::setw(10) << "noise" << std::setw(11) << "removed %"
     << "\n";
  int64_t s = 0, c = 0, z = 0;
  for (const auto& r : table) {
    os << std::setw(8) << r.cls << std::setw(10) << r.samples << std::setw(10) << r.clusters
       << std::setw(10) << r.noise << std::setw(11) << std::fixed << std::setprecision(2)
       << r.removed_pct << "\n";
    s += r.samples;
    c += r.clusters;
    z += r.noise;
  }
  os << std::setw(8) << "total" << std::setw(10) << s << std::setw(10) << c << std::setw(10) << z
     << std::setw(11) << std::fixed << std::setprecision(2)
     << (s ? 100.0 * double(z) / double(s) : 0.0);
  return os.str();
}

}  // namespace sieve::cluster
