// The quick model behind data.label_noise's pairwise default map and its instance-dependent
// noise: linear discriminant analysis (class means, one shared covariance) on coarsely
// pooled pixels (or the features of a table), cross-fitted on five folds so that every
// training row is scored by a model that never saw it.
//
// Why this model: noise "of the kinds real data has" should follow what makes classes and
// samples look alike. A linear classifier on pixels is the cheapest model that sees that
// (on Fashion-MNIST it confuses T-shirt with Shirt and Pullover with Coat, as people and
// networks do); LDA is closed-form (one Gram matrix, one Cholesky solve: no iterations to
// tune) and runs in a fixed order: every rank computes the same scores from the same
// gathered inputs, so the noise does not depend on the rank count.
#pragma once
#include <cstdint>
#include <vector>

#include "data/source.hpp"

namespace sieve::data {

// Images are averaged over a grid of at most about 256 values per image (16x16 for one
// channel, 9x9x3 for three; never finer than the image); tabular rows keep their features.
struct PooledShape {
  int64_t gh = 0, gw = 0, c = 0;  // images: grid and channels; tabular: gh = gw = 1, c = F
  int64_t dims() const { return gh * gw * c; }
};
PooledShape pooled_shape(const DatasetMeta& m);
// `count` rows (HWC uint8 images, or float features) into out [count, dims].
void pool_rows(const DatasetMeta& m, const PooledShape& p, const uint8_t* images,
               const float* features, int64_t count, float* out);

struct QuickModel {
  int64_t classes = 0;
  std::vector<float> scores;       // [n, classes]: out-of-fold discriminants (log posterior + const)
  std::vector<int64_t> confusion;  // [classes, classes]: label x argmax of the scores
  double accuracy = 0;             // out-of-fold
};

// x [n, d], labels in 0..classes-1, fold[i] in 0..F-1. Inputs are standardised over all
// rows (covariance shrunk by 1e-2 I); each fold's rows are scored by the model fitted on the
// other folds (by the model of all rows where fewer than 2 rows are outside the fold).
QuickModel cross_fit_lda(const std::vector<float>& x, int64_t d, const std::vector<int32_t>& labels,
                         const std::vector<uint8_t>& fold, int64_t classes);

// Per class, the other class its rows are most often predicted as (ties: the higher mean
// score over the class's rows, then the lower index); -1 for a class without rows.
std::vector<int32_t> most_confused(const QuickModel& m, const std::vector<int32_t>& labels);

// Per row, the best-scored class other than its label and the margin (label's score minus
// that class's score: negative where the model prefers the wrong class).
void wrong_class_margins(const QuickModel& m, const std::vector<int32_t>& labels,
                         std::vector<int32_t>& best_wrong, std::vector<double>& margin);

}  // namespace sieve::data
