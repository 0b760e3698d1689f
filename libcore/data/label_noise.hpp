// Injected label noise (data.label_noise): a fraction of the training labels flipped to
// another class, chosen with a seed, recorded as the ground truth (/train/noise_truth,
// noise_kind = label) beside the label it replaced (/train/clean_labels).
//
// Why: on a real image set nobody knows which labels are wrong, so no detector can be scored.
// Flipping a known set of labels makes the question "does the filter find them, and does
// removing them help?" answerable on any data (docs/detection.md). Uniform flips are the
// easy case; real annotators confuse look-alike classes (pairwise) and ambiguous images
// (instance-dependent), which is where detectors fail, so those kinds exist; `projection` is
// the instance-dependent noise most papers benchmark on, for comparison with them.
//
// Exactly round(rate * N) training rows are flipped (N: all training rows), chosen among the
// rows the source itself left clean (on synthetic data, those without the generator's own
// label noise or outlier: the truth is then the union of both):
//   symmetric  the rows of smallest keyed hash of (seed, row); the new label is
//              y + 1 + (hash mod (classes - 1)) modulo classes, uniform over the other classes.
//   pairwise   class y becomes partner(y), from data.label_noise.pairs or, by default, the class
//              the quick model (quick_model.hpp) predicts most often for y's rows. The total is
//              split over the mapped classes in proportion to their sizes (largest remainders),
//              and each class flips its rows of smallest keyed hash.
//   instance   the rows whose out-of-fold quick-model margin (own label's score minus the best
//              other's) is smallest, to that best other class; ties by the keyed hash. The seed
//              enters through the model's five folds, so other seeds flip overlapping sets.
//   projection Xia et al.'s instance-dependent noise (IDN): rows drawn by a per-row flip
//              probability ~ N(rate, 0.1) cut to [0, 1], each to the wrong class of largest
//              random projection of its pooled pixels (projection_targets in the .cpp).
// Everything is a pure function of the data and the seed: the model is fitted on every rank
// from the same gathered inputs, so the flips do not depend on the ranks or on how the writer
// splits the rows. Test rows are never changed.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "config/config.hpp"
#include "data/source.hpp"

namespace sieve::data {

struct LabelNoiseOptions {
  double rate = 0;                                  // in [0, 1)
  std::string kind = "symmetric";                   // symmetric, pairwise, instance, projection
  uint64_t seed = 0;
  std::vector<std::pair<int64_t, int64_t>> pairs;   // pairwise: (from, to); empty: the model's
};

// data.label_noise.* (the class indices of `pairs` are checked against the source later).
LabelNoiseOptions label_noise_options(const Config& cfg);

// Wraps `inner`. Collective over `comm` when the rows' labels or pixels are needed (every
// kind but symmetric on a source without noise of its own); prints one line on rank 0.
std::unique_ptr<Source> with_label_noise(std::unique_ptr<Source> inner, const LabelNoiseOptions& opt,
                                         const Comm& comm);

// `total` split over classes of the given sizes in proportion to them (floors, then one more
// for the largest remainders, ties to the lower index): sums to `total` exactly.
std::vector<int64_t> proportional_counts(const std::vector<int64_t>& sizes, int64_t total);

}  // namespace sieve::data
