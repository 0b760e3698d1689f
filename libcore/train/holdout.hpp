// The held-out part of the training split that pretrain does not train on.
//
// Why: a network trained long enough fits noisy labels too, and then its features place a
// mislabelled sample among its (wrong) class, where no detector can see it. Accuracy on
// samples it never trains on rises while it learns the common patterns and falls once it
// starts memorising; the model at that peak (the early-learning phase) is the one whose
// features and probabilities expose the noise (docs/detection.md).
//
// The split is stratified: round(fraction * n_c) samples of each class c, chosen by a
// keyed hash of (seed, sample id), so it depends neither on row order nor on the ranks.
#pragma once
#include <cstdint>
#include <vector>

#include "train/loader.hpp"

namespace sieve::train {

struct HoldoutSplit {
  std::vector<int64_t> train;    // rows trained on, ascending
  std::vector<int64_t> holdout;  // rows held out, ascending
};

HoldoutSplit split_holdout(const SplitData& d, double fraction, uint64_t seed);

}  // namespace sieve::train
