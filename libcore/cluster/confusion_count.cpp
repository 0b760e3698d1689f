#include "cluster/confusion_count.hpp"

#include <lapacke.h>

#include <cmath>
#include <numeric>
#include <random>

#include "util/error.hpp"

namespace sieve::cluster {

namespace {

// Two standard errors, as the held-out thresholds' test (detect.cpp): one-sided about 2.3 %.
constexpr double kConfusionZ = 2.0;

// The predictions of each class's samples (by label), in sample order.
std::vector<std::vector<int32_t>> predictions_by_class(const std::vector<int32_t>& label,
                                                       const std::vector<int32_t>& predicted,
                                                       int classes, const char* what) {
  SIEVE_ASSERT(label.size() == predicted.size(), "count_from_confusion: ", label.size(), " ", what,
               " labels and ", predicted.size(), " predictions");
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(classes));
  for (size_t i = 0; i < label.size(); ++i) {
    SIEVE_ASSERT(label[i] >= 0 && label[i] < classes && predicted[i] >= 0 && predicted[i] < classes,
                 "count_from_confusion: ", what, " sample ", i, " has label ", label[i],
                 " and prediction ", predicted[i], " outside the ", classes, " classes");
    out[size_t(label[i])].push_back(predicted[i]);
  }
  return out;
}

// The inverse of the row-normalised confusion counts [k x k] (rows: true class); false where
// it is singular.
bool invert_confusion(const std::vector<double>& counts, int k, std::vector<double>& inverse) {
  std::vector<double> m(counts);
  for (int r = 0; r < k; ++r) {
    const double row = std::accumulate(m.begin() + r * k, m.begin() + (r + 1) * k, 0.0);
    if (row <= 0) return false;
    for (int c = 0; c < k; ++c) m[size_t(r * k + c)] /= row;
  }
  inverse.assign(size_t(k) * size_t(k), 0.0);
  for (int r = 0; r < k; ++r) inverse[size_t(r * k + r)] = 1.0;
  std::vector<lapack_int> pivots(static_cast<size_t>(k));
  const lapack_int info =
      LAPACKE_dgesv(LAPACK_ROW_MAJOR, k, k, m.data(), k, pivots.data(), inverse.data(), k);
  return info == 0;
}

// The wrong labels among each label's class_size given the inverse confusion and, per label i,
// the sum over its held-out samples of inverse[prediction][i] and their number.
void wrong_by_label(const std::vector<double>& clean_weight, const std::vector<int64_t>& heldout_n,
                    const std::vector<int64_t>& class_size, std::vector<double>& wrong) {
  wrong.assign(class_size.size(), 0.0);
  for (size_t i = 0; i < class_size.size(); ++i) {
    const double clean =
        heldout_n[i] > 0 ? double(class_size[i]) / double(heldout_n[i]) * clean_weight[i] : 0.0;
    wrong[i] = double(class_size[i]) - clean;
  }
}

// The sample standard deviation of v (at least two values).
double sample_sd(const std::vector<double>& v) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / double(v.size() - 1));
}

// The sample standard deviation of v[r][c] over the replicates r, per c.
std::vector<double> spread(const std::vector<std::vector<double>>& v) {
  std::vector<double> sd(v.empty() ? 0 : v[0].size()), column(v.size());
  for (size_t c = 0; c < sd.size(); ++c) {
    for (size_t r = 0; r < v.size(); ++r) column[r] = v[r][c];
    sd[c] = sample_sd(column);
  }
  return sd;
}

}  // namespace

ConfusionCount count_from_confusion(const ConfusionSamples& s,
                                    const std::vector<int64_t>& class_size, uint64_t seed,
                                    int replicates) {
  const int k = s.classes;
  SIEVE_ASSERT(k > 0 && class_size.size() == size_t(k), "count_from_confusion: ", class_size.size(),
               " class sizes for ", k, " classes");
  const auto test = predictions_by_class(s.test_label, s.test_predicted, k, "test");
  const auto held = predictions_by_class(s.heldout_label, s.heldout_predicted, k, "held-out");
  ConfusionCount out;
  out.test = int64_t(s.test_label.size());
  out.heldout = int64_t(s.heldout_label.size());
  std::vector<int64_t> heldout_n(static_cast<size_t>(k));
  for (int c = 0; c < k; ++c) {
    heldout_n[size_t(c)] = int64_t(held[size_t(c)].size());
    if (test[size_t(c)].empty()) {
      out.why_not = cat("class ", c, " has no test sample");
      return out;
    }
    if (class_size[size_t(c)] > 0 && held[size_t(c)].empty()) {
      out.why_not = cat("class ", c, " has no held-out sample");
      return out;
    }
  }
  // One estimate per label from the given predictions, or from a resample of each class's (rng).
  std::vector<double> counts(static_cast<size_t>(k * k)), inverse, weight(static_cast<size_t>(k));
  auto estimate = [&](std::mt19937_64* rng, std::vector<double>& by_label) {
    auto pick = [&](const std::vector<int32_t>& v, size_t q) {
      return rng ? v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(*rng)] : v[q];
    };
    std::fill(counts.begin(), counts.end(), 0.0);
    for (int c = 0; c < k; ++c)
      for (size_t q = 0; q < test[size_t(c)].size(); ++q)
        counts[size_t(c * k + pick(test[size_t(c)], q))] += 1;
    if (!invert_confusion(counts, k, inverse)) return false;
    for (int i = 0; i < k; ++i) {
      weight[size_t(i)] = 0;
      for (size_t q = 0; q < held[size_t(i)].size(); ++q)
        weight[size_t(i)] += inverse[size_t(pick(held[size_t(i)], q) * k + i)];
    }
    wrong_by_label(weight, heldout_n, class_size, by_label);
    return true;
  };
  auto total = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0);
  };
  std::vector<double> point;
  if (!estimate(nullptr, point)) {
    out.why_not = "the test split's confusion matrix is singular";
    return out;
  }
  // The point estimate's whole composition: each held-out sample of label i counts
  // inverse[prediction][j] towards true class j (the count above is its diagonal).
  std::vector<double> composition(size_t(k) * size_t(k), 0.0);
  for (int i = 0; i < k; ++i)
    for (int32_t predicted : held[size_t(i)])
      for (int j = 0; j < k; ++j)
        composition[size_t(i * k + j)] +=
            inverse[size_t(predicted * k + j)] / double(held[size_t(i)].size());
  std::mt19937_64 rng(seed);
  std::vector<std::vector<double>> resampled;
  std::vector<double> one;
  for (int b = 0; b < replicates; ++b)
    if (estimate(&rng, one)) resampled.push_back(one);
  if (resampled.size() < 2 || 2 * resampled.size() < size_t(replicates)) {
    out.why_not = cat("the test split's confusion matrix is singular in ",
                      replicates - int(resampled.size()), " of ", replicates, " resamples");
    return out;
  }
  std::vector<double> totals;
  for (const auto& r : resampled) totals.push_back(total(r));
  const double se = sample_sd(totals);
  // A near-singular confusion (few test samples of classes the model mixes up) makes a few
  // resamples explode; a spread wider than the training split itself says nothing.
  const double n = double(std::accumulate(class_size.begin(), class_size.end(), int64_t(0)));
  if (!(se <= n)) {
    out.why_not = cat("the test split's confusion matrix is near singular (its resamples spread ",
                      int64_t(se), " wide, over ", int64_t(n), " training samples)");
    return out;
  }
  out.usable = true;
  out.wrong = total(point);
  out.standard_error = se;
  out.wrong_by_label = point;
  out.standard_error_by_label = spread(resampled);
  out.composition = std::move(composition);
  return out;
}

std::vector<double> test_split_joint(const ConfusionCount& c,
                                     const std::vector<int64_t>& class_size) {
  const size_t k = class_size.size();
  if (!c.usable || c.composition.size() != k * k ||
      !(kConfusionZ * c.standard_error <= kTransitionPrecision * std::abs(c.wrong)))
    return {};
  std::vector<double> joint(k * k);
  for (size_t i = 0; i < k; ++i)
    for (size_t j = 0; j < k; ++j)
      joint[i * k + j] = double(class_size[i]) * c.composition[i * k + j];
  return joint;
}

bool labels_follow_model(const ConfusionCount& c) {
  return c.usable && c.wrong + kConfusionZ * c.standard_error < 0;
}

std::optional<int64_t> confusion_cap(const ConfusionCount& c) {
  if (!c.usable || c.wrong - kConfusionZ * c.standard_error <= 0) return std::nullopt;
  return int64_t(std::ceil(c.wrong + kConfusionZ * c.standard_error));
}

std::optional<int64_t> label_confusion_cap(const ConfusionCount& c, int32_t label) {
  if (!c.usable || label < 0 || size_t(label) >= c.wrong_by_label.size()) return std::nullopt;
  const double wrong = c.wrong_by_label[size_t(label)];
  const double se = c.standard_error_by_label[size_t(label)];
  if (wrong - kConfusionZ * se <= 0) return std::nullopt;
  return int64_t(std::ceil(wrong + kConfusionZ * se));
}

}  // namespace sieve::cluster
