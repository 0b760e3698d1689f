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

// Cross-fitting folds (pretrain.folds): the fold, 0..folds-1, of every row of `d`. Within each
// class the rows are ordered by the same keyed hash of (seed, sample id) and dealt out in
// turn, so every fold holds floor or ceil(n_c / folds) samples of class c, and the assignment
// depends neither on row order nor on the ranks (extract_features recomputes it from the
// dataset). Needs folds >= 2.
std::vector<int32_t> split_folds(const SplitData& d, int folds, uint64_t seed);

}  // namespace sieve::train
