// The cluster_filter stage: flag noise per class (DBSCAN, GMM or k-means), build the
// matched random control, the per-class table (the paper's Table I) and the noise
// precision/recall against ground truth.
//
// Parallelism: every rank holds all points. Classes are dealt to ranks (largest first to
// the least-loaded rank) and, inside a rank, to OpenMP threads (one class per thread when
// there are several; otherwise DBSCAN's own loops use the threads). When there are fewer
// classes than ranks (or clustering is over all points), DBSCAN instead splits each class
// spatially across all ranks (dbscan_distributed, halo exchange). Either way the result is
// the same as the serial one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cluster/dbscan.hpp"
#include "cluster/mixture.hpp"
#include "comm/comm.hpp"

namespace sieve::cluster {

struct FilterOptions {
  std::string method = "dbscan";  // the cluster methods: dbscan | gmm | kmeans
  bool per_class = true;          // false: one clustering over all points
  std::string parallel = "auto";  // auto | classes | spatial (DBSCAN only)
  DbscanParams dbscan;
  bool auto_eps = true;             // choose eps at the k-distance elbow (k = min_samples)
  int64_t auto_eps_samples = 5000;  // query points for the k-distance curve
  GmmParams gmm;
  KmeansParams kmeans;
  double outlier_quantile = 0.05;  // gmm/kmeans: fraction of each group flagged
  bool gmm_use_threshold = false;  // gmm: flag log p(x) < gmm_threshold instead
  double gmm_threshold = 0;
  uint64_t seed = 0;  // random_keep and the initialisations
};

struct ClassRow {
  int32_t cls = 0;
  int64_t samples = 0, clusters = 0, noise = 0;
  double removed_pct = 0;
};

struct FilterResult {
  std::vector<int32_t> cluster;      // [n] global cluster id (unique over classes), -1 = noise
  std::vector<uint8_t> keep;         // [n] 1 = not noise
  std::vector<uint8_t> random_keep;  // [n] same removed count per class, chosen at random
  std::vector<ClassRow> table;       // ascending class
  double eps = 0;                    // the eps used (chosen or configured); 0 for gmm/kmeans
  double log_likelihood = 0;         // gmm: sample-weighted mean log-likelihood over groups
  int64_t clusters = 0, noise = 0;
};

// x [n, d] row-major, labels [n] >= 0. Collective over comm; every rank gets the result.
FilterResult run_filter(const Comm& comm, const float* x, int64_t n, int d, const int32_t* labels,
                        const FilterOptions& opt);

// Seeded random keep-mask removing removed[c] samples of each class c (rows of class c in
// `labels`); identical on every rank and for every thread count.
std::vector<uint8_t> random_keep_mask(const int32_t* labels, int64_t n,
                                      const std::vector<ClassRow>& table, uint64_t seed);

struct NoiseScore {
  double precision = 0, recall = 0;
  int64_t flagged = 0, truth = 0, hits = 0, matched = 0;
};
// Precision/recall of `keep == 0` against truth flags joined on sample id.
NoiseScore score_noise(const std::vector<int64_t>& ids, const std::vector<uint8_t>& keep,
                       const std::vector<int64_t>& truth_ids, const std::vector<uint8_t>& truth);

// The per-class table as printable lines.
std::string format_table(const std::vector<ClassRow>& table);

}  // namespace sieve::cluster
