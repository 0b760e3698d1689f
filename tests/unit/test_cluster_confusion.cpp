// The wrong-label count from the early model's confusion on the test split
// (confusion_count.hpp): exact on expected counts, its standard error, the cap's two
// conditions, a simulated class-conditional noise with a weak model, and what makes it unusable.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>

#include "cluster/confusion_count.hpp"

using namespace sieve::cluster;

namespace {

// Appends `count` samples with this label and prediction.
void add(std::vector<int32_t>& label, std::vector<int32_t>& predicted, int32_t y, int32_t p,
         int count) {
  for (int i = 0; i < count; ++i) {
    label.push_back(y);
    predicted.push_back(p);
  }
}

// Three classes. The model's test confusion (rows: true class, of 100 test samples each) is
// [90 10 0; 5 90 5; 0 10 90]. Training labels: 1,000 samples per label, of which label 0 holds
// 20 % true class 1 and label 2 holds 10 % true class 0: 300 wrong. The held-out samples
// (100 per label) are predicted exactly as those mixtures say: label 0: 0.8 * row 0 +
// 0.2 * row 1 = [73 26 1]; label 1: row 1; label 2: 0.9 * row 2 + 0.1 * row 0 = [9 10 81].
// `scale` multiplies every count.
ConfusionSamples three_classes(int scale) {
  ConfusionSamples s;
  s.classes = 3;
  const int test[3][3] = {{90, 10, 0}, {5, 90, 5}, {0, 10, 90}};
  const int held[3][3] = {{73, 26, 1}, {5, 90, 5}, {9, 10, 81}};
  for (int y = 0; y < 3; ++y)
    for (int p = 0; p < 3; ++p) {
      add(s.test_label, s.test_predicted, y, p, scale * test[y][p]);
      add(s.heldout_label, s.heldout_predicted, y, p, scale * held[y][p]);
    }
  return s;
}

}  // namespace

TEST(ClusterConfusion, ExactWhereTheHeldOutCountsAreTheExpectedMixtures) {
  const ConfusionCount c = count_from_confusion(three_classes(1), {1000, 1000, 1000}, 7);
  ASSERT_TRUE(c.usable) << c.why_not;
  EXPECT_NEAR(c.wrong, 300.0, 1e-6);
  EXPECT_EQ(c.test, 300);
  EXPECT_EQ(c.heldout, 300);
  EXPECT_GT(c.standard_error, 0.0);
  // The held-out share scales to each class's training size: twice the samples, twice the count.
  EXPECT_NEAR(count_from_confusion(three_classes(1), {2000, 2000, 2000}, 7).wrong, 600.0, 1e-6);
  // Per given label: 200 of label 0's, none of label 1's and 100 of label 2's are wrong, each
  // with its own spread, and they sum to the total.
  ASSERT_EQ(c.wrong_by_label.size(), 3u);
  ASSERT_EQ(c.standard_error_by_label.size(), 3u);
  EXPECT_NEAR(c.wrong_by_label[0], 200.0, 1e-6);
  EXPECT_NEAR(c.wrong_by_label[1], 0.0, 1e-6);
  EXPECT_NEAR(c.wrong_by_label[2], 100.0, 1e-6);
  for (double se : c.standard_error_by_label) EXPECT_GT(se, 0.0);
  // One label's spread is less than the total's: the others add theirs.
  EXPECT_LT(c.standard_error_by_label[0], c.standard_error);
}

// The whole composition of each label (the count is one minus its diagonal): label 0 holds
// 80 % class 0 and 20 % class 1, label 1 only class 1, label 2 10 % class 0 and 90 % class 2;
// as a joint of counts it is that times each label's size. test_split_joint gives it only where
// the estimate's two standard errors are within kTransitionPrecision of it.
TEST(ClusterConfusion, CompositionOfEachLabelAndTheJointWhereTheEstimateIsPrecise) {
  const ConfusionCount c = count_from_confusion(three_classes(1), {1000, 1000, 1000}, 7);
  ASSERT_TRUE(c.usable) << c.why_not;
  const std::vector<double> expected = {0.8, 0.2, 0.0, 0.0, 1.0, 0.0, 0.1, 0.0, 0.9};
  ASSERT_EQ(c.composition.size(), expected.size());
  for (size_t q = 0; q < expected.size(); ++q)
    EXPECT_NEAR(c.composition[q], expected[q], 1e-9) << q;
  ConfusionCount precise = c;
  precise.standard_error = 0.1 * c.wrong / 2.0;  // two SE: 10 % of the estimate
  const std::vector<double> joint = test_split_joint(precise, {1000, 2000, 1000});
  ASSERT_EQ(joint.size(), 9u);
  EXPECT_NEAR(joint[0], 800.0, 1e-6);
  EXPECT_NEAR(joint[1], 200.0, 1e-6);
  EXPECT_NEAR(joint[4], 2000.0, 1e-6);  // label 1's size
  EXPECT_NEAR(joint[6], 100.0, 1e-6);
  // The sign does not matter (labels that follow the model); the precision does.
  ConfusionCount below = precise;
  below.wrong = -c.wrong;
  EXPECT_EQ(test_split_joint(below, {1000, 2000, 1000}).size(), 9u);
  ConfusionCount loose = c;
  loose.standard_error = 0.3 * c.wrong / 2.0;  // two SE: 30 %
  EXPECT_TRUE(test_split_joint(loose, {1000, 2000, 1000}).empty());
  ConfusionCount unusable = precise;
  unusable.usable = false;
  EXPECT_TRUE(test_split_joint(unusable, {1000, 2000, 1000}).empty());
}

TEST(ClusterConfusion, StandardErrorHalvesWithFourTimesTheSamplesAndFollowsTheSeed) {
  const ConfusionCount small = count_from_confusion(three_classes(1), {1000, 1000, 1000}, 7);
  const ConfusionCount large = count_from_confusion(three_classes(4), {1000, 1000, 1000}, 7);
  ASSERT_TRUE(small.usable && large.usable);
  EXPECT_NEAR(large.wrong, 300.0, 1e-6);
  const double ratio = large.standard_error / small.standard_error;
  EXPECT_GT(ratio, 0.35);
  EXPECT_LT(ratio, 0.65);
  // A pure function of its inputs and seed (every rank computes it alike).
  EXPECT_EQ(count_from_confusion(three_classes(1), {1000, 1000, 1000}, 7).standard_error,
            small.standard_error);
  EXPECT_NE(count_from_confusion(three_classes(1), {1000, 1000, 1000}, 8).standard_error,
            small.standard_error);
}

TEST(ClusterConfusion, CapIsEstimatePlusTwoStandardErrorsOnlyWherePlainlyAboveZero) {
  ConfusionCount c;
  c.usable = true;
  c.wrong = 100;
  c.standard_error = 10;
  ASSERT_TRUE(confusion_cap(c).has_value());
  EXPECT_EQ(*confusion_cap(c), 120);
  c.standard_error = 50;  // 100 - 2 * 50 = 0: no shift plainly above zero
  EXPECT_FALSE(confusion_cap(c).has_value());
  c.wrong = -30;
  c.standard_error = 1;
  EXPECT_FALSE(confusion_cap(c).has_value());
  c.wrong = 100;
  c.standard_error = 10;
  c.usable = false;
  EXPECT_FALSE(confusion_cap(c).has_value());
}

TEST(ClusterConfusion, LabelCapIsItsEstimatePlusTwoOfItsStandardErrorsWherePlainlyAboveZero) {
  ConfusionCount c;
  c.usable = true;
  c.wrong_by_label = {100, 10, -40};
  c.standard_error_by_label = {10, 10, 5};
  ASSERT_TRUE(label_confusion_cap(c, 0).has_value());
  EXPECT_EQ(*label_confusion_cap(c, 0), 120);
  EXPECT_FALSE(label_confusion_cap(c, 1).has_value());  // 10 - 2 * 10 < 0: no shift seen
  EXPECT_FALSE(label_confusion_cap(c, 2).has_value());  // below zero
  EXPECT_FALSE(label_confusion_cap(c, 3).has_value());  // no such label
  EXPECT_FALSE(label_confusion_cap(c, -1).has_value());
  c.usable = false;
  EXPECT_FALSE(label_confusion_cap(c, 0).has_value());
}

// A weak model (it confuses classes 2k and 2k+1 a fifth of the time: its errors are four
// times the 5 % symmetric noise) on 60,000 training samples, a tenth held out, and 10,000 test
// samples; returns the estimate and the true number of wrong labels (per given label into
// `wrong_by_label` where given).
std::pair<ConfusionCount, int64_t> weak_model_symmetric_noise(
    uint64_t seed, std::vector<int64_t>* wrong_by_label = nullptr) {
  const int k = 10, per_class_train = 6000, per_class_test = 1000;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto predict = [&](int y) {  // 80 % right, 18 % its look-alike, 2 % any class
    const double v = u(rng);
    if (v < 0.80) return y;
    if (v < 0.98) return y ^ 1;
    return int(rng() % k);
  };
  ConfusionSamples s;
  s.classes = k;
  for (int y = 0; y < k; ++y)
    for (int i = 0; i < per_class_test; ++i) add(s.test_label, s.test_predicted, y, predict(y), 1);
  std::vector<int64_t> size(k, 0), wrong_of(k, 0);
  int64_t wrong = 0;
  for (int y = 0; y < k; ++y)
    for (int i = 0; i < per_class_train; ++i) {
      int given = y;
      if (u(rng) < 0.05) {
        given = int(rng() % (k - 1));
        given += given >= y;
      }
      ++size[size_t(given)];
      wrong += given != y;
      wrong_of[size_t(given)] += given != y;
      if (u(rng) < 0.1) add(s.heldout_label, s.heldout_predicted, given, predict(y), 1);
    }
  if (wrong_by_label) *wrong_by_label = wrong_of;
  return {count_from_confusion(s, size, seed + 100), wrong};
}

TEST(ClusterConfusion, WeakModelAndSymmetricNoiseSimulated) {
  const auto [c, wrong] = weak_model_symmetric_noise(3);
  ASSERT_TRUE(c.usable) << c.why_not;
  // The held-out samples disagree with their labels about 24 % of the time; the estimate
  // takes the model's own 20 % out.
  EXPECT_NEAR(c.wrong, double(wrong), 3.0 * c.standard_error);
  ASSERT_TRUE(confusion_cap(c).has_value());
  EXPECT_GE(*confusion_cap(c), wrong);
}

// The bootstrap standard error is the spread the estimate has over fresh draws of both splits:
// over 30 simulations the root mean square of (estimate - truth) / standard error is about 1.
TEST(ClusterConfusion, StandardErrorMatchesTheSpreadOverSimulations) {
  double sum_z2 = 0, sum_label_z2 = 0;
  const int runs = 30;
  for (int seed = 0; seed < runs; ++seed) {
    std::vector<int64_t> wrong_by_label;
    const auto [c, wrong] = weak_model_symmetric_noise(uint64_t(seed), &wrong_by_label);
    ASSERT_TRUE(c.usable) << c.why_not;
    const double z = (c.wrong - double(wrong)) / c.standard_error;
    sum_z2 += z * z;
    // And so is each label's own (its held-out samples: about 600 of its 6,000).
    for (size_t l = 0; l < wrong_by_label.size(); ++l) {
      const double zl =
          (c.wrong_by_label[l] - double(wrong_by_label[l])) / c.standard_error_by_label[l];
      sum_label_z2 += zl * zl;
    }
  }
  const double rms = std::sqrt(sum_z2 / runs);
  EXPECT_GT(rms, 0.6);
  EXPECT_LT(rms, 1.5);
  const double label_rms = std::sqrt(sum_label_z2 / (runs * 10));
  EXPECT_GT(label_rms, 0.7);
  EXPECT_LT(label_rms, 1.3);
}

// Noise that follows the model's confusions: a training sample the model would take for
// another class carries that class as its label half the time (instance-dependent). The
// held-out samples then agree with their labels more often than the test samples with theirs:
// the estimate is plainly below zero, nothing is capped, and labels_follow_model says so;
// class-conditional noise (above) never does.
TEST(ClusterConfusion, LabelsThatFollowTheModelsConfusionsGiveAnEstimateBelowZero) {
  const int k = 10;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto predict = [&](int y) { return u(rng) < 0.85 ? y : (y ^ 1); };
  ConfusionSamples s;
  s.classes = k;
  for (int y = 0; y < k; ++y)
    for (int i = 0; i < 1000; ++i) add(s.test_label, s.test_predicted, y, predict(y), 1);
  std::vector<int64_t> size(k, 0);
  int flips = 0;
  for (int y = 0; y < k; ++y)
    for (int i = 0; i < 6000; ++i) {
      const int p = predict(y);
      const int given = p != y && u(rng) < 0.5 ? p : y;
      flips += given != y;
      ++size[size_t(given)];
      if (i % 10 == 0) add(s.heldout_label, s.heldout_predicted, given, p, 1);
    }
  const ConfusionCount c = count_from_confusion(s, size, 2);
  ASSERT_TRUE(c.usable) << c.why_not;
  EXPECT_LT(c.wrong + 2.0 * c.standard_error, 0.0);
  // Its magnitude (what filter.follows_model_count flags) over-counts here: the estimator also
  // undoes the model's own errors, 1 / (1 - 2 x 0.15) = 1.43x the flips in expectation
  // (docs/detection.md quotes it).
  EXPECT_NEAR(-c.wrong / double(flips), 1.43, 3.0 * c.standard_error / double(flips));
  EXPECT_TRUE(labels_follow_model(c));
  EXPECT_FALSE(confusion_cap(c).has_value());
  EXPECT_FALSE(labels_follow_model(weak_model_symmetric_noise(3).first));
  ConfusionCount unusable = c;
  unusable.usable = false;
  EXPECT_FALSE(labels_follow_model(unusable));
}

// The magnitude below zero where the model follows every flip and errs nowhere else: class 0's
// 1,000 training samples include 200 that look like class 1 and carry label 1, and the model
// predicts 1 for them; on the clean test split it predicts 1 for the same share of class 0
// (test confusion [80 20 0; 0 100 0; 0 0 100] per 100). The held-out tenth: label 0, 80
// predicted 0; label 1, 120 predicted 1 (100 of class 1, 20 flips); label 2, 100 predicted 2.
// Label 0 then counts -200 (its held-out samples agree with it more than class 0's test
// samples do), the others none: as many below zero as there are flips, the count
// filter.follows_model_count flags (program.cpp).
TEST(ClusterConfusion, WhereTheModelFollowsEveryFlipTheCountBelowZeroIsTheFlips) {
  ConfusionSamples s;
  s.classes = 3;
  add(s.test_label, s.test_predicted, 0, 0, 80);
  add(s.test_label, s.test_predicted, 0, 1, 20);
  add(s.test_label, s.test_predicted, 1, 1, 100);
  add(s.test_label, s.test_predicted, 2, 2, 100);
  add(s.heldout_label, s.heldout_predicted, 0, 0, 80);
  add(s.heldout_label, s.heldout_predicted, 1, 1, 120);
  add(s.heldout_label, s.heldout_predicted, 2, 2, 100);
  const ConfusionCount c = count_from_confusion(s, {800, 1200, 1000}, 4);
  ASSERT_TRUE(c.usable) << c.why_not;
  EXPECT_NEAR(c.wrong, -200.0, 1e-6);
  ASSERT_EQ(c.wrong_by_label.size(), 3u);
  EXPECT_NEAR(c.wrong_by_label[0], -200.0, 1e-6);
  EXPECT_NEAR(c.wrong_by_label[1], 0.0, 1e-6);
  EXPECT_NEAR(c.wrong_by_label[2], 0.0, 1e-6);
}

// No noise: held-out predictions drawn as the test ones, so no shift and no cap.
TEST(ClusterConfusion, NoShiftNoCap) {
  std::mt19937_64 rng(5);
  ConfusionSamples s;
  s.classes = 4;
  for (int split = 0; split < 2; ++split)
    for (int y = 0; y < 4; ++y)
      for (int i = 0; i < 500; ++i) {
        const int p = rng() % 10 < 8 ? y : int(rng() % 4);
        add(split ? s.heldout_label : s.test_label, split ? s.heldout_predicted : s.test_predicted,
            y, p, 1);
      }
  const ConfusionCount c = count_from_confusion(s, {5000, 5000, 5000, 5000}, 1);
  ASSERT_TRUE(c.usable) << c.why_not;
  EXPECT_LT(std::abs(c.wrong), 3.0 * c.standard_error);
  EXPECT_FALSE(confusion_cap(c).has_value());
  EXPECT_FALSE(labels_follow_model(c));
}

TEST(ClusterConfusion, UnusableWithoutATestOrHeldOutSampleOfAClassOrWhenSingular) {
  ConfusionSamples s = three_classes(1);
  ConfusionSamples no_test = s;
  no_test.test_label.clear();
  no_test.test_predicted.clear();
  add(no_test.test_label, no_test.test_predicted, 0, 0, 10);
  add(no_test.test_label, no_test.test_predicted, 1, 1, 10);
  ConfusionCount c = count_from_confusion(no_test, {1000, 1000, 1000}, 1);
  EXPECT_FALSE(c.usable);
  EXPECT_EQ(c.why_not, "class 2 has no test sample");
  EXPECT_FALSE(confusion_cap(c).has_value());

  ConfusionSamples no_held = s;
  no_held.heldout_label.assign(10, 0);
  no_held.heldout_predicted.assign(10, 0);
  c = count_from_confusion(no_held, {1000, 1000, 1000}, 1);
  EXPECT_FALSE(c.usable);
  EXPECT_EQ(c.why_not, "class 1 has no held-out sample");
  // A class without training samples needs none held out.
  EXPECT_TRUE(count_from_confusion(no_held, {1000, 0, 0}, 1).usable);

  ConfusionSamples singular;  // classes 0 and 1 both always predicted as 0
  singular.classes = 2;
  add(singular.test_label, singular.test_predicted, 0, 0, 50);
  add(singular.test_label, singular.test_predicted, 1, 0, 50);
  add(singular.heldout_label, singular.heldout_predicted, 0, 0, 5);
  add(singular.heldout_label, singular.heldout_predicted, 1, 0, 5);
  c = count_from_confusion(singular, {50, 50}, 1);
  EXPECT_FALSE(c.usable);
  EXPECT_EQ(c.why_not, "the test split's confusion matrix is singular");

  // Nearly singular: one test sample of class 1 is predicted as itself, so the weight of a
  // held-out sample predicted 1 is 50 or 25 or 17 as resamples draw it once, twice or three
  // times: the spread dwarfs the 100 training samples.
  ConfusionSamples near = singular;
  near.test_predicted[50] = 1;
  near.heldout_predicted[8] = near.heldout_predicted[9] = 1;  // two of label 1 predicted 1
  c = count_from_confusion(near, {50, 50}, 1);
  EXPECT_FALSE(c.usable);
  EXPECT_NE(c.why_not.find("near singular"), std::string::npos) << c.why_not;
}
