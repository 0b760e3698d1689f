// How many training labels are wrong, from the early model's confusion on the test split.
//
// Why: the confident joint (calibrate.hpp) counts the samples the model confidently places in
// another class, and a model's own mistakes on clean samples are counted with the flips. Where
// the model errs about as often as the labels do (5 % noise on a 12 k subset of Fashion-MNIST:
// 15 % held-out error), it counted 1.6-2.0x the truth, mostly hard clean images of the
// look-alike classes; and the k-NN vote's floor over it counts the same images again (1.17x
// on 60 k symmetric 10 % where the joint alone was 0.97x). The test split's labels are clean in
// a benchmark (shard_dataset never changes them) and in most curated data sets, so the model's
// confusion there measures its own mistakes apart from the labels' (Lipton et al. 2018, black
// box shift estimation; Hendrycks et al. 2018 use a trusted set the same way): with M[k][j] the
// share of test samples of class k it predicts as j, the held-out samples given label i (never
// trained; a stratified share of each class) are predicted as j at the rate
// sum_k P(true k | label i) M[k][j] when the noise depends on the true class only. So each
// held-out sample (label i, prediction j) counts (M^-1)[j][i] towards the clean ones, and the
// class's size over its held-out size scales that to the training split; the rest is wrong.
//
// What it cannot see: noise that follows the model's own confusions (instance-dependent: the
// flipped images look like their new class, so the model predicts the wrong label as often as
// it errs on clean test images) and test labels as noisy as the training ones both leave no
// shift between the two splits; the estimate is then near zero whatever the truth. So it only
// lowers a count where it sees a shift plainly above zero (confusion_cap). Where the model
// predicts the flips' given labels, the estimate goes plainly below zero instead
// (labels_follow_model), and its magnitude is the count (program.cpp,
// filter.follows_model_count).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sieve::cluster {

// The test split's labels and the early model's predictions (most likely class) for them,
// and the same for the held-out training samples (their given labels).
struct ConfusionSamples {
  int classes = 0;
  std::vector<int32_t> test_label, test_predicted;
  std::vector<int32_t> heldout_label, heldout_predicted;
};

struct ConfusionCount {
  bool usable = false;
  std::string why_not;        // where not usable: one clause for the log
  double wrong = 0;           // estimated wrong labels in the training split (may be < 0)
  double standard_error = 0;  // bootstrap, both splits resampled within each class
  // The same per given label (what the total sums), with their own bootstrap standard errors.
  std::vector<double> wrong_by_label, standard_error_by_label;
  // [classes x classes] row-major, row i: the share of each true class j among the samples given
  // label i (the point estimate; a cell may fall below 0 or above 1 by sampling noise).
  std::vector<double> composition;
  int64_t heldout = 0, test = 0;
};

// The estimate above for a training split of class_size[c] samples given label c. Not usable
// where a class has training samples but no held-out or no test sample, or where the test
// confusion (or most of its bootstrap replicates) cannot be inverted, or is so near singular
// that the standard error exceeds the training split's size. The standard error
// resamples each class's test samples and each label's held-out samples with replacement,
// `replicates` times, from `seed` (the same on every rank: a pure function of its inputs).
ConfusionCount count_from_confusion(const ConfusionSamples& s,
                                    const std::vector<int64_t>& class_size, uint64_t seed,
                                    int replicates = 200);

// The cap on the number of samples the calibrated decisions flag: the estimate plus two
// standard errors (the z of the held-out thresholds, detect.cpp), where the estimate is more
// than two standard errors above zero; none otherwise (no shift seen: clean labels, noise that
// follows the model's confusions, or test labels as noisy as the training ones, which it
// cannot tell apart) or where the estimate is not usable.
std::optional<int64_t> confusion_cap(const ConfusionCount& c);

// The same bound for the samples given one label: its estimate plus two of its standard errors,
// where plainly above zero. A label's held-out samples are a tenth of its own, so its interval is
// wide; it bounds only a class whose count would otherwise pass filter.max_flagged
// (program.cpp, bound_classes_over_max_flagged).
std::optional<int64_t> label_confusion_cap(const ConfusionCount& c, int32_t label);

// The joint of (given label, true class) counts the test split implies, class_size[i] x
// composition[i][j], for the posteriors' label transition (calibrate.hpp, label_transition),
// where the estimate is precise: usable, and its total within kTransitionPrecision of itself at
// two standard errors (either sign). Why: the confident joint's off-diagonal cells count the
// model's own mistakes on hard clean images with the flips, so its transition sends a class's
// labels to its look-alikes more often than the noise does; the test split takes those
// mistakes out (the same estimator as the count). Why only where precise: a small test split's
// inverse is noisy cell by cell, and on the 1,500 digits (15 held-out samples a class) it
// ranked worse than the joint (docs/detection.md, thirty-first session). Empty otherwise.
inline constexpr double kTransitionPrecision = 0.2;
std::vector<double> test_split_joint(const ConfusionCount& c,
                                     const std::vector<int64_t>& class_size);

// Whether the held-out samples agree with their given labels plainly more often than the test
// samples with their clean ones: the estimate more than two standard errors below zero, which
// no class-conditional noise gives. The given labels then follow the model's own confusions
// (instance-dependent noise: the flipped images look like their new class), or the test split
// is harder than the training data; either way no count from the model's beliefs sees those
// wrong labels. On the stored runs (docs/detection.md, twenty-fourth session) it held on 10 of
// the 22 with instance-dependent noise (every Fashion-MNIST one at 10 and 20 %, where the count
// was 0.02-0.33x the truth) and on none of the 91 with other noise. Where it holds, the
// estimate's magnitude below zero counts the flips the model follows (exactly, where it follows
// all and errs nowhere else), which filter.follows_model_count flags.
bool labels_follow_model(const ConfusionCount& c);

}  // namespace sieve::cluster
