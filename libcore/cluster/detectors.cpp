#include "cluster/detectors.hpp"

#include "util/error.hpp"

namespace sieve::cluster {

const std::vector<DetectorInfo>& detectors() {
  static const std::vector<DetectorInfo> all = {
      {"consensus", "features + class probabilities (+ training dynamics)",
       "rank average of the knn_posterior, posterior and (where recorded) dynamics scores; flags "
       "as many as the confident joint estimates wrong, the highest over all classes",
       false, true, true, false, true, true},
      {"knn", "penultimate features",
       "fraction of the k nearest neighbours (cosine) with another label; flagged above "
       "filter.knn.threshold",
       false, true, false, false, true},
      {"confident", "class probabilities",
       "max other-class probability minus the label's; flagged off the confident joint's "
       "diagonal",
       false, false, true, false, true},
      {"posterior", "class probabilities + the confident joint",
       "posterior that the label is wrong under the noise's label transition (the test split's "
       "count where precise, else the confident joint's columns; a 0.5 % prior per cell); flags "
       "as many as the confident joint estimates wrong, the highest over all classes",
       false, false, true, false, true, true},
      {"knn_posterior", "penultimate features + the confident joint",
       "the knn vote read through the noise's label transition: the posterior that the label is "
       "wrong with the k nearest neighbours' label shares in place of the class probabilities; "
       "flags as many as the confident joint estimates wrong, the highest over all classes",
       false, true, true, false, true, true},
      {"dynamics", "training dynamics (margin at every epoch)",
       "negated area under the margin (mean of assigned logit minus the largest other over the "
       "epochs); flags as many as the confident joint estimates wrong, the highest over all "
       "classes, else AUM < 0",
       false, false, false, true, true, true},
      {"dbscan", "2-D embedding, per class",
       "core distance; DBSCAN noise (the paper's method, the reference)", true, false, false, false,
       true},
      {"gmm", "2-D embedding, per class",
       "least likely filter.outlier_quantile under a Gaussian mixture", true, false, false, false},
      {"kmeans", "2-D embedding, per class",
       "farthest filter.outlier_quantile from the k-means centroids", true, false, false, false},
  };
  return all;
}

const DetectorInfo& detector(const std::string& name) {
  for (const auto& d : detectors())
    if (d.name == name) return d;
  throw UsageError(cat("config key 'filter.method': unknown detector '", name,
                       "' (expected one of ", detector_names(), ")"));
}

std::string detector_names() {
  std::string out;
  for (const auto& d : detectors()) out += (out.empty() ? "" : ", ") + d.name;
  return out;
}

}  // namespace sieve::cluster
