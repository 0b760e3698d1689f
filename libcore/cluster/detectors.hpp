// The one registry of noise detectors: name, what each looks at, what it needs, one line of
// description. cluster_filter decides from it which inputs to read and which detectors to
// run; the report and the docs name detectors as it does. A new detector adds one entry here
// and its run in program.cpp (detect.hpp, calibrate.hpp hold the math).
#pragma once
#include <string>
#include <vector>

namespace sieve::cluster {

struct DetectorInfo {
  std::string name;
  std::string looks_at;         // the input, as the report shows it
  std::string description;      // one line: score and decision
  bool clusters = false;        // clusters the embedding per class (dbscan, gmm, kmeans)
  bool needs_features = false;  // /train/features of the features file
  bool needs_probs = false;     // /train/probs of the features file
  bool needs_dynamics = false;  // pretrain's dynamics.h5 (per-epoch margins)
  bool reference = false;       // runs beside the chosen one when ground truth exists
  bool counts_estimated = false;  // flags the per-class counts of the noise estimate (calibrated)
};

// Every detector, in the order the report lists them.
const std::vector<DetectorInfo>& detectors();
// The entry of `name`; UsageError naming config key 'filter.method' and the known names.
const DetectorInfo& detector(const std::string& name);
// "knn, confident, ..." for help texts.
std::string detector_names();

}  // namespace sieve::cluster
