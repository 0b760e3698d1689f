// Decisions calibrated to the data's own noise rate, and a consensus of detectors' scores.
//
// Why: a fixed rule ("at least 8 of 10 neighbours disagree", "DBSCAN noise") flags however
// many samples the rule happens to catch on this data, which is right only on the data it
// was tuned on. With 20 % pairwise noise the flipped samples' neighbours carry the same wrong
// label, so the vote misses half of them although their scores still rank them first. The
// remedy from confident learning (Northcutt et al. 2021, "prune by noise rate"): estimate how
// many samples of each class carry a wrong label, then flag that many of the highest-scored
// samples of that class. The ranking can come from any score, and ranks of several scores
// (out-of-sample confidence, feature-space votes, training dynamics) averaged are steadier
// across kinds of noise than any one of them.
//
// The estimate: the confident joint C[i][j] counts samples labelled i whose confidently
// predicted class (argmax{p_j : p_j >= t_j}, t_j the mean self-confidence of class j, or of
// its held-out samples where that is plainly lower: detect.hpp) is j.
// Calibrated so that each row sums to the class's size n_i, its off-diagonal mass is the
// estimated number of wrong labels in class i: n_i * (1 - C[i][i] / sum_j C[i][j]).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sieve::cluster {

struct NoiseEstimate {
  int classes = 0;
  std::vector<int64_t> joint;       // [classes x classes] confident joint (raw counts)
  std::vector<int64_t> class_size;  // [classes] samples given each label
  std::vector<int64_t> per_class;   // [classes] estimated wrong labels among them
  std::vector<double> threshold;    // [classes] the self-confidence thresholds t_j
  std::vector<uint8_t> threshold_from_heldout;  // [classes] 1: t_j is the held-out samples' mean
  int64_t total() const;
  bool empty() const { return classes == 0; }
};

// The calibrated estimate from the raw confident joint and the class sizes. A class with no
// confidently predicted sample gets an estimate of 0 (nothing to go on).
NoiseEstimate estimate_from_joint(std::vector<int64_t> joint, std::vector<int64_t> class_size,
                                  int classes);

// The noise's label transition T[i][j] = P(given label i | true class j), [classes x
// classes] row-major, from the confident joint's columns (the samples confidently predicted j,
// by the label they carry), each cell first given a prior of `prior_share` of its column's
// count. Why the prior: a cell of a few samples is mostly the model's own error, and a
// posterior that trusted it would take every confusion the model makes there for a flip; with
// a prior of 0.5 % per cell (kTransitionPrior) a cell moves the posterior once it holds more
// than a few per mille of its column (docs/detection.md, twenty-sixth session). A column with no
// sample is uniform.
inline constexpr double kTransitionPrior = 0.005;
std::vector<double> label_transition(const NoiseEstimate& estimate,
                                     double prior_share = kTransitionPrior);
// The same from any joint of (given label i, true class j) counts [classes x classes],
// row-major; a negative cell (a linear estimate's sampling noise: the test split's,
// confusion_count.hpp) counts as 0.
std::vector<double> label_transition(const std::vector<double>& joint, int classes,
                                     double prior_share = kTransitionPrior);

// The posterior that a sample's label y is wrong, given the model's class probabilities p [K]
// and the transition T: 1 - p_y T[y][y] / sum_j p_j T[y][j] (Bayes: the model says which
// class the image is, T how often each class is given label y). Where confident learning's
// margin (max_j p_j - p_y) weighs every other class alike, this weighs each by how often its
// samples carry label y: under pairwise noise a Shirt labelled T-shirt/top is a likely flip,
// a Bag labelled T-shirt/top a likely model error. 0 where the denominator is 0.
double wrong_label_posterior(const float* p, int y, const std::vector<double>& transition,
                             int classes);

// How many samples of each class the calibrated decisions flag: the larger of the estimate
// and the number a vote (e.g. the knn detector's) flags in that class. Why: the confident
// joint counts only the samples the model confidently places in another class. An outlier
// image (no class above its threshold) is not counted, nor is a flipped sample the model has
// partly learnt: at 20 % symmetric noise on Fashion-MNIST 12 k the estimate came to 1,597 of
// 2,400 while the neighbourhood vote flagged 2,437 (docs/detection.md). Either count is
// evidence of wrong labels, so each class takes the larger. labels in [0, estimate.size()).
std::vector<int64_t> combined_counts(const std::vector<int64_t>& estimate,
                                     const std::vector<uint8_t>& vote_flag, const int32_t* labels);

// filter.noise_rate: a share of wrong labels the user knows (from relabelling a sample, say)
// as per-class counts, round(rate * N) in all (N: the sum of class_size). Where that is more
// than the data's own per-class estimate, each class keeps its estimate and the wrong labels
// the estimate could not see are spread by class size (noise that follows the model's own
// confusions is what it misses, and nothing says which classes hold it; spreading it like the
// estimate would pile it into the few classes the estimate happened to see); where it is less,
// the estimate is scaled down. The rounding's units go to the largest remainders (ties to the
// lower class), and no class gets more than it holds (the excess goes to the others).
std::vector<int64_t> counts_for_rate(double rate, const std::vector<int64_t>& estimated,
                                     const std::vector<int64_t>& class_size);

// Per-class counts raised to `total` where the data's own count says the per-class counts are
// too few (program.cpp: the test split's count below zero, labels that follow the model's
// confusions): each class keeps its count and the rest is spread by class size (as
// counts_for_rate spreads what the estimate could not see), but no class is taken by the raise
// past floor(max_share * its size), so a raise never makes filter.max_flagged refuse a run its
// own counts did not (the excess goes to the other classes; where none has room, less is
// placed). A total at or under the counts' sum returns them unchanged.
std::vector<int64_t> counts_raised_within_limit(int64_t total, const std::vector<int64_t>& counts,
                                                const std::vector<int64_t>& class_size,
                                                double max_share);

// Flags the sum of counts samples with the highest score over all classes, labels in
// [0, counts.size()) (ties go to the lower row, so the result is a pure function of the
// inputs), where no class c takes more than the larger of counts[c] and floor(max_share * its
// size): the counts say how many, the score says where. Why not counts[c] in each class
// (cleanlab's prune_by_noise_rate, Sieve's rule until the twenty-first session): the confident
// joint's per-class estimates err in opposite directions between look-alike classes (T-shirt/top
// over, Shirt under on Fashion-MNIST's pairwise noise) and their sum errs less than its parts;
// ranking over all classes is cleanlab's filter_by "low_self_confidence" /
// "low_normalized_margin". Over 60 scored runs (six data sets, six kinds of noise) the
// consensus's F1 rose in 32 and fell in 8, by +0.006 on average; with a known noise rate (59
// runs), it rose in 52 and fell in 3, by +0.033 (docs/detection.md). The bound keeps the score
// alone from taking a class past filter.max_flagged (max_share) where its own count did not: a
// class whose labels are half wrong would otherwise be refused on a tie. `class_limit` (where
// given; -1: none) is a hard bound per class that even the score may not pass: the test split's
// own count for a class kept under max_share (program.cpp, bound_classes_over_max_flagged).
std::vector<uint8_t> flag_top_overall(const std::vector<float>& score, const int32_t* labels,
                                      const std::vector<int64_t>& counts, double max_share,
                                      const std::vector<int64_t>& class_limit = {});

// The mean over the given scores of each sample's normalised rank in (0, 1] (1 = the most
// suspicious of that score; tied samples share their average rank). All scores have the same
// length; a NaN entry is "no score from this detector" and the sample's mean is over the
// others (a sample with none gets 0).
std::vector<float> rank_average(const std::vector<const std::vector<float>*>& scores);

// Whether the confident joint's estimate can be told from the early model's own mistakes.
// One minus its held-out peak accuracy (against the given labels) is about the share of wrong
// labels plus the model's own error on clean samples; less the estimated share it is that own
// error, if the estimate is right. Where that is at least the estimate, the joint cannot
// separate the two (a weak model's confident errors count as flips; a model that learnt the
// wrong labels counts none of them). On 95 scored runs (83 stored, 12 on fresh seeds) it held on
// 25, and 23 of those estimates were off by a quarter or more, either way: 0.01x-1.55x the
// truth (the others: a wine table with 7 wrong labels and 15 held-out samples, 1.14x, and
// Fashion-MNIST pairwise 5 %, 0.751x); it missed 8 of the 31 that were off (docs/detection.md,
// twenty-third session). False where either figure is NaN (no held-out samples recorded).
bool estimate_in_doubt(double heldout_peak_accuracy, double estimated_share);
// That own error: one minus the held-out peak accuracy, less the estimated share.
double own_error_share(double heldout_peak_accuracy, double estimated_share);

// "class 6 'Shirt'" for log lines and errors: the index, and the dataset's name where
// `class_names` has one.
std::string class_and_name(int64_t c, const std::vector<std::string>& class_names);

// filter.max_flagged: the largest share of a class a detector may flag. Returns "" when every
// class is within it, else one line naming the key and each class over it (largest share
// first, at most five, with its name where `class_names` has one) and its counts.
std::string over_max_flagged(const std::string& method, const std::vector<uint8_t>& flag,
                             const int32_t* labels, double max_share,
                             const std::vector<std::string>& class_names = {});

}  // namespace sieve::cluster
