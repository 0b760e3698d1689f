// Decisions calibrated to the estimated noise rate (calibrate.hpp): the confident joint's
// estimate on hand-computed and constructed cases, top-k per class, rank averaging, and the
// filter.max_flagged refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "cluster/calibrate.hpp"
#include "cluster/detect.hpp"
#include "cluster/detectors.hpp"
#include "cluster/inputs.hpp"
#include "pipeline/schema.hpp"
#include "util/error.hpp"

using namespace sieve;
using namespace sieve::cluster;

// Rows of the joint are calibrated to the class sizes: the off-diagonal share times n_i.
TEST(ClusterCalibrate, EstimateFromJointByHand) {
  // class 0: 80 of 100 confident samples on the diagonal, 150 samples -> 0.2 * 150 = 30;
  // class 1: 90 of 100 -> 0.1 * 120 = 12; class 2: nothing confident -> 0.
  NoiseEstimate e = estimate_from_joint({80, 20, 0, 5, 90, 5, 0, 0, 0}, {150, 120, 40}, 3);
  ASSERT_EQ(e.per_class.size(), 3u);
  EXPECT_EQ(e.per_class[0], 30);
  EXPECT_EQ(e.per_class[1], 12);
  EXPECT_EQ(e.per_class[2], 0);
  EXPECT_EQ(e.total(), 42);
  EXPECT_EQ(e.classes, 3);
}

namespace {

// Three classes, 200 samples each; `flipped` samples of class 0 carry label 1 (pairwise
// noise) and every sample's probabilities say 0.8 for its true class, 0.1 for the others.
struct PairwiseCase {
  std::vector<float> p;
  std::vector<int32_t> labels;
  std::vector<uint8_t> truth;
};
PairwiseCase pairwise_case(int flipped) {
  PairwiseCase c;
  for (int cls = 0; cls < 3; ++cls)
    for (int i = 0; i < 200; ++i) {
      const bool flip = cls == 0 && i < flipped;
      for (int j = 0; j < 3; ++j) c.p.push_back(j == cls ? 0.8f : 0.1f);
      c.labels.push_back(flip ? 1 : cls);
      c.truth.push_back(flip);
    }
  return c;
}

}  // namespace

// The transition's columns: the confident joint's counts plus a prior of a share of the
// column in every cell, normalised; an empty column is uniform.
TEST(ClusterCalibrate, LabelTransitionIsTheJointsColumnsWithAPriorPerCell) {
  // columns (predicted class): 0 holds 80 + 5 = 85... rows are the given labels.
  NoiseEstimate e = estimate_from_joint({80, 20, 0, 20, 90, 0, 0, 10, 0}, {100, 110, 10}, 3);
  const std::vector<double> bare = label_transition(e, 0.0);
  EXPECT_DOUBLE_EQ(bare[0 * 3 + 0], 0.8);  // column 0: 80 and 20 of 100
  EXPECT_DOUBLE_EQ(bare[1 * 3 + 0], 0.2);
  EXPECT_DOUBLE_EQ(bare[2 * 3 + 0], 0.0);
  EXPECT_DOUBLE_EQ(bare[1 * 3 + 1], 0.75);  // column 1: 20, 90, 10 of 120
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(bare[size_t(i) * 3 + 2], 1.0 / 3) << i;
  // A prior of 10 % of the column per cell: column 0 becomes (90, 30, 10) / 130.
  const std::vector<double> prior = label_transition(e, 0.1);
  EXPECT_NEAR(prior[0 * 3 + 0], 90.0 / 130, 1e-12);
  EXPECT_NEAR(prior[1 * 3 + 0], 30.0 / 130, 1e-12);
  EXPECT_NEAR(prior[2 * 3 + 0], 10.0 / 130, 1e-12);
  for (int j = 0; j < 3; ++j) {
    double column = 0;
    for (int i = 0; i < 3; ++i) column += prior[size_t(i) * 3 + j];
    EXPECT_NEAR(column, 1.0, 1e-12) << j;
  }
}

// The posterior weighs the other classes by how often their samples carry the label: the same
// probabilities score higher where the likely class is the label's look-alike (many of its
// samples given this label) than where it is a class whose samples never are.
TEST(ClusterCalibrate, WrongLabelPosteriorFollowsTheTransition) {
  // Label 0 is given to 30 % of class 1's samples and to none of class 2's.
  const std::vector<double> t = {0.9, 0.3, 0.0,  //
                                 0.1, 0.7, 0.0,  //
                                 0.0, 0.0, 1.0};
  const float towards_lookalike[3] = {0.4f, 0.6f, 0.0f};
  const float towards_other[3] = {0.4f, 0.0f, 0.6f};
  // 1 - .4*.9 / (.4*.9 + .6*.3) = 1 - .36/.54
  EXPECT_NEAR(wrong_label_posterior(towards_lookalike, 0, t, 3), 1.0 - 0.36 / 0.54, 1e-6);
  // class 2 is never labelled 0: the image must be class 0, whatever the model says
  EXPECT_NEAR(wrong_label_posterior(towards_other, 0, t, 3), 0.0, 1e-6);
  const float sure[3] = {1.0f, 0.0f, 0.0f};
  EXPECT_NEAR(wrong_label_posterior(sure, 0, t, 3), 0.0, 1e-12);
  const float none[3] = {0.0f, 0.0f, 1.0f};
  EXPECT_EQ(wrong_label_posterior(none, 0, t, 3), 0.0);  // nothing gives label 0: no evidence
}

// On probabilities that point at the true class, the confident joint counts the flipped
// samples exactly, and flagging that many top-scored samples finds them all.
TEST(ClusterCalibrate, ConfidentJointEstimatesPairwiseNoiseAndPruneFindsIt) {
  for (int flipped : {0, 20, 60}) {
    PairwiseCase c = pairwise_case(flipped);
    NoiseEstimate e;
    Detection d = detect_confident(c.p.data(), int64_t(c.labels.size()), 3, c.labels.data(), &e);
    ASSERT_EQ(e.per_class.size(), 3u);
    EXPECT_EQ(e.per_class[0], 0) << flipped;
    EXPECT_EQ(e.per_class[1], flipped) << flipped;  // the flipped ones now labelled 1
    EXPECT_EQ(e.per_class[2], 0) << flipped;
    EXPECT_EQ(e.class_size[1], 200 + flipped);
    const auto flag = flag_top_overall(d.score, c.labels.data(), e.per_class, 0.5);
    EXPECT_EQ(flag, c.truth) << flipped;
  }
}

// The posterior detector on the same case: every flipped sample (the model says class 0, the
// label 1 that class 0's samples are given) scores above every clean one, so the estimated
// count of top scores is exactly the flips; the scores are the same on one rank as by hand.
TEST(ClusterCalibrate, PosteriorDetectorRanksPairwiseFlipsFirst) {
  Comm self(MPI_COMM_SELF);
  for (int flipped : {20, 60}) {
    PairwiseCase c = pairwise_case(flipped);
    const int64_t n = int64_t(c.labels.size());
    NoiseEstimate e;
    detect_confident(c.p.data(), n, 3, c.labels.data(), &e);
    RowShare share;
    share.x = c.p;
    share.width = 3;
    for (int64_t i = 0; i < n; ++i) share.rows.push_back(i);
    const Detection d = detect_posterior(self, share, n, c.labels.data(), label_transition(e));
    EXPECT_EQ(d.method, "posterior");
    float lowest_flip = 1, highest_clean = 0;
    for (int64_t i = 0; i < n; ++i)
      (c.truth[size_t(i)] ? lowest_flip = std::min(lowest_flip, d.score[size_t(i)])
                          : highest_clean = std::max(highest_clean, d.score[size_t(i)]));
    EXPECT_GT(lowest_flip, highest_clean) << flipped;
    if (flipped == 20) {
      // By hand: column 0 of the joint is 180 given 0 and 20 given 1, a prior of 0.005 * 200 = 1
      // per cell: T[1][0] = 21/203, T[1][1] = 201/203, T[1][2] = 1/203. A flip (p .8/.1/.1,
      // label 1): 1 - .1 * 201 / (.8 * 21 + .1 * 201 + .1 * 1) = 1 - 20.1 / 37.
      EXPECT_NEAR(lowest_flip, 1.0 - 20.1 / 37.0, 1e-5);
    }
    const std::vector<double> t = label_transition(e);
    EXPECT_FLOAT_EQ(d.score[0], float(wrong_label_posterior(c.p.data(), c.labels[0], t, 3)));
    EXPECT_EQ(flag_top_overall(d.score, c.labels.data(), e.per_class, 0.5), c.truth) << flipped;
  }
}

// The transition from a joint of doubles (the test split's, test_split_joint) is the
// confident joint's formula; a negative cell (sampling noise of a linear estimate) counts as 0.
TEST(ClusterCalibrate, LabelTransitionFromAJointOfDoublesClipsNegativeCells) {
  const NoiseEstimate e = estimate_from_joint({90, 30, 0, 10, 70, 0, 0, 0, 100}, {120, 80, 100}, 3);
  const std::vector<double> from_ints = label_transition(e);
  const std::vector<double> from_doubles =
      label_transition(std::vector<double>{90, 30, 0, 10, 70, 0, 0, 0, 100}, 3);
  ASSERT_EQ(from_doubles.size(), 9u);
  for (size_t q = 0; q < 9; ++q) EXPECT_DOUBLE_EQ(from_doubles[q], from_ints[q]) << q;
  const std::vector<double> clipped =
      label_transition(std::vector<double>{90, 30, -4, 10, 70, 0, 0, 0, 100}, 3);
  for (size_t q = 0; q < 9; ++q) EXPECT_DOUBLE_EQ(clipped[q], from_ints[q]) << q;
  EXPECT_THROW(label_transition(std::vector<double>(8, 1.0), 3), Error);
}

// The knn vote read through the transition: two samples whose neighbours all disagree with
// their label score alike by the plain vote, but a neighbourhood of the label's look-alike
// (class 1, whose samples carry label 0 three times in ten) is a likely flip and one of a
// class never given label 0 a likely feature error. Rows arrive in any order (the inverted
// file reorders its share).
TEST(ClusterCalibrate, KnnPosteriorWeighsNeighboursByTheTransition) {
  Comm self(MPI_COMM_SELF);
  // Columns of 100 each: class 0 given 0 90 times and 1 10 times; class 1 given 0 30, 1 70.
  NoiseEstimate e = estimate_from_joint({90, 30, 0, 10, 70, 0, 0, 0, 100}, {120, 80, 100}, 3);
  const std::vector<int32_t> labels = {0, 0, 0, 1, 1, 2, 2, 1};
  NeighbourLists nb;
  nb.k = 2;
  nb.rows = {2, 0, 1};
  nb.lists = {0, 1,   // row 2: two of its own label
              3, 4,   // row 0: two of label 1, the look-alike
              5, 6};  // row 1: two of label 2
  const Detection d = detect_knn_posterior(self, nb, 8, labels.data(), label_transition(e), 3);
  EXPECT_EQ(d.method, "knn_posterior");
  ASSERT_EQ(d.score.size(), 8u);
  // Shares (count + 0.5) / 3.5; a prior of 0.5 per cell of a column of 100: T[0][0] = 90.5 /
  // 101.5, T[0][1] = 30.5 / 101.5, T[0][2] = 0.5 / 101.5 (the 101.5 cancels).
  EXPECT_NEAR(d.score[0], 1.0 - 45.25 / (45.25 + 2.5 * 30.5 + 0.25), 1e-5);
  EXPECT_NEAR(d.score[1], 1.0 - 45.25 / (45.25 + 0.5 * 30.5 + 2.5 * 0.5), 1e-5);
  EXPECT_NEAR(d.score[2], 1.0 - 2.5 * 90.5 / (2.5 * 90.5 + 0.5 * 30.5 + 0.25), 1e-5);
  EXPECT_GT(d.score[0], d.score[1]);  // the plain vote ties them at 1
  EXPECT_GT(d.score[1], d.score[2]);
  for (int64_t i = 3; i < 8; ++i) EXPECT_EQ(d.score[size_t(i)], 0.0f) << i;  // not this rank's
  // Lists that do not match their rows are refused.
  nb.lists.pop_back();
  EXPECT_THROW(detect_knn_posterior(self, nb, 8, labels.data(), label_transition(e), 3), Error);
}

// The counts say how many, the score says where: the sum of the counts, highest first over all
// classes, ties to the lower row.
TEST(ClusterCalibrate, TopOverallTakesTheCountsSumWhereTheScoreIsHighest) {
  const std::vector<float> score = {0.5f, 0.9f, 0.5f, 0.5f, 0.1f, 0.8f, 0.7f, 0.2f};
  const std::vector<int32_t> labels = {0, 0, 0, 0, 1, 1, 1, 1};
  // 3 in all although class 0 asked for all 3: its 0.9, then class 1's 0.8 and 0.7.
  EXPECT_EQ(flag_top_overall(score, labels.data(), {3, 0}, 1.0),
            (std::vector<uint8_t>{0, 1, 0, 0, 0, 1, 1, 0}));
  // 4 in all: then the first of class 0's three tied 0.5s (row 0).
  EXPECT_EQ(flag_top_overall(score, labels.data(), {1, 3}, 1.0),
            (std::vector<uint8_t>{1, 1, 0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(flag_top_overall(score, labels.data(), {0, 0}, 1.0), std::vector<uint8_t>(8, 0));
  // More than the samples: every sample once.
  EXPECT_EQ(flag_top_overall(score, labels.data(), {9, 9}, 1.0), std::vector<uint8_t>(8, 1));
  EXPECT_THROW(flag_top_overall(score, labels.data(), {1}, 1.0), Error);  // label 1: no count
}

// The score alone never takes a class past max_share (floor of its share of the class) where
// that class's own count did not ask for more: the rest goes to the next highest elsewhere.
TEST(ClusterCalibrate, TopOverallKeepsAClassUnderTheShareItsCountDidNotPass) {
  // Class 0 holds the four highest scores; at most half of it (2) unless it asks for more.
  const std::vector<float> score = {0.9f, 0.8f, 0.7f, 0.6f, 0.1f, 0.5f, 0.4f, 0.3f};
  const std::vector<int32_t> labels = {0, 0, 0, 0, 1, 1, 1, 1};
  struct Case {
    std::vector<int64_t> counts;
    double max_share;
    std::vector<uint8_t> flag;
    const char* why;
  };
  const Case cases[] = {
      {{1, 3}, 0.5, {1, 1, 0, 0, 0, 1, 1, 0}, "class 0 full at 2: the rest from class 1"},
      {{3, 1}, 0.5, {1, 1, 1, 0, 0, 1, 0, 0}, "class 0 asks for 3 itself (then refused)"},
      {{2, 2}, 0.25, {1, 1, 0, 0, 0, 1, 1, 0}, "a class's own count bounds it above the share"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(flag_top_overall(score, labels.data(), c.counts, c.max_share), c.flag) << c.why;
}

// A class limit binds even the score: class 0, limited to 1, gives the rest to class 1; -1
// leaves a class as the share allows; a limit for every class or none.
TEST(ClusterCalibrate, TopOverallKeepsAClassWithinItsLimit) {
  const std::vector<float> score = {0.9f, 0.8f, 0.7f, 0.6f, 0.1f, 0.5f, 0.4f, 0.3f};
  const std::vector<int32_t> labels = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_EQ(flag_top_overall(score, labels.data(), {1, 3}, 0.5, {1, -1}),
            (std::vector<uint8_t>{1, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(flag_top_overall(score, labels.data(), {1, 3}, 0.5, {-1, -1}),
            flag_top_overall(score, labels.data(), {1, 3}, 0.5));
  EXPECT_THROW(flag_top_overall(score, labels.data(), {1, 3}, 0.5, {1}), Error);
}

TEST(ClusterCalibrate, CombinedCountsTakeTheLargerPerClass) {
  // Class 0: the estimate says 2, the vote flags 1 -> 2. Class 1: the estimate says 0 (the
  // outliers it cannot place), the vote flags 2 -> 2. Class 2: neither -> 0.
  const std::vector<int32_t> labels = {0, 0, 0, 1, 1, 1, 2};
  const std::vector<uint8_t> vote = {1, 0, 0, 1, 1, 0, 0};
  EXPECT_EQ(combined_counts({2, 0, 0}, vote, labels.data()), (std::vector<int64_t>{2, 2, 0}));
  EXPECT_EQ(combined_counts({0, 3, 1}, vote, labels.data()), (std::vector<int64_t>{1, 3, 1}));
  EXPECT_THROW(combined_counts({1, 1}, vote, labels.data()), Error);  // label 2 has no count
}

// A known noise rate as per-class counts: round(rate * N) in all; above the estimate, each
// class keeps its estimate and the rest is spread by class size; below it, the estimate is
// scaled down; remainders to the largest (ties to the lower class); no class past its size.
TEST(ClusterCalibrate, CountsForAKnownRateKeepTheEstimateAndSpreadTheRest) {
  // 0.2 * 1000 = 200 against an estimate of 40: 10 / 30 kept, the other 160 by size 1:3.
  EXPECT_EQ(counts_for_rate(0.2, {10, 30}, {250, 750}), (std::vector<int64_t>{50, 150}));
  // 0.1 * 30 = 3 below an estimate of 12 (4 each): scaled to 1 each.
  EXPECT_EQ(counts_for_rate(0.1, {4, 4, 4}, {10, 10, 10}), (std::vector<int64_t>{1, 1, 1}));
  // 0.1 * 20 = 2 below 3 equal estimates: the lower classes take the remainders.
  EXPECT_EQ(counts_for_rate(0.1, {1, 1, 1}, {5, 10, 5}), (std::vector<int64_t>{1, 1, 0}));
  // An estimate of 0: all by class size, 0.25 * 40 = 10 -> 2.5 / 7.5 -> 3 / 7 (tie: lower).
  EXPECT_EQ(counts_for_rate(0.25, {0, 0}, {10, 30}), (std::vector<int64_t>{3, 7}));
  // The estimate saw one class only (instance noise): it keeps its 8; the other 40 go by size
  // 10:90 -> 4 / 36, but class 0 has room for 2 only -> 10 / 38.
  EXPECT_EQ(counts_for_rate(0.48, {8, 0}, {10, 90}), (std::vector<int64_t>{10, 38}));
  // An estimate above a class's size counts as its size.
  EXPECT_EQ(counts_for_rate(0.5, {30, 0}, {10, 10}), (std::vector<int64_t>{10, 0}));
  EXPECT_EQ(counts_for_rate(0.0, {5, 5}, {10, 10}), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(counts_for_rate(1.0, {1, 0}, {3, 4}), (std::vector<int64_t>{3, 4}));
}

// A raise of the counts to a total (the test split's count below zero): each class keeps its
// count, the rest goes by class size, but never past floor(max_share * size), the excess to
// the other classes; a total at or under the counts changes nothing.
TEST(ClusterCalibrate, CountsRaisedWithinTheLimitKeepEachCountAndSpreadTheRestBySize) {
  // 200 against 40 counted: 10 / 30 kept, the other 160 by size 1:3 -> 50 / 150.
  EXPECT_EQ(counts_raised_within_limit(200, {10, 30}, {250, 750}, 0.5),
            (std::vector<int64_t>{50, 150}));
  // Class 0 may hold 5 of its 10 at max_share 0.5: 8 counted already, so it takes none and the
  // 40 more go to class 1 (limit 45): 8 / 40. Not 10 / 38 as a known rate would give, which
  // takes class 0 past the limit and would have the run refused.
  EXPECT_EQ(counts_raised_within_limit(48, {8, 0}, {10, 90}, 0.5), (std::vector<int64_t>{8, 40}));
  // Every class full: what fits is placed (5 + 5), not the 15 asked.
  EXPECT_EQ(counts_raised_within_limit(15, {1, 2}, {10, 10}, 0.5), (std::vector<int64_t>{5, 5}));
  // At or under the counts' sum: unchanged (never lowered; a count over the limit stays).
  EXPECT_EQ(counts_raised_within_limit(3, {4, 1}, {10, 10}, 0.5), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(counts_raised_within_limit(9, {7, 1}, {10, 10}, 0.5), (std::vector<int64_t>{7, 2}));
}

TEST(ClusterCalibrate, RankAverageWithTiesAndMissingScores) {
  const std::vector<float> a = {1, 2, 2, 4};  // ranks 1, 2.5, 2.5, 4 of 4
  const float nan = std::nanf("");
  const std::vector<float> b = {nan, 3, 1, 2};  // ranks -, 3, 1, 2 of 3
  const auto r = rank_average({&a, &b});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_FLOAT_EQ(r[0], 0.25f);  // only a: 1/4
  EXPECT_FLOAT_EQ(r[1], float((2.5 / 4 + 3.0 / 3) / 2));
  EXPECT_FLOAT_EQ(r[2], float((2.5 / 4 + 1.0 / 3) / 2));
  EXPECT_FLOAT_EQ(r[3], float((4.0 / 4 + 2.0 / 3) / 2));
  EXPECT_EQ(rank_average({&a}), (std::vector<float>{0.25f, 0.625f, 0.625f, 1.0f}));
}

TEST(ClusterCalibrate, MaxFlaggedNamesTheKeyAndTheClass) {
  const std::vector<int32_t> labels = {0, 0, 0, 0, 1, 1};
  EXPECT_EQ(over_max_flagged("dbscan", {1, 1, 0, 0, 1, 0}, labels.data(), 0.5), "");
  const std::string why = over_max_flagged("dbscan", {1, 1, 1, 0, 0, 0}, labels.data(), 0.5);
  EXPECT_NE(why.find("filter.max_flagged"), std::string::npos) << why;
  EXPECT_NE(why.find("3 of the 4 samples of class 0"), std::string::npos) << why;
  EXPECT_NE(why.find("filter.method=dbscan"), std::string::npos) << why;
  EXPECT_NE(why.find("lose most of that class"), std::string::npos) << why;
  EXPECT_NE(why.find("check the detector's parameters"), std::string::npos) << why;
}

// Every class over the limit is named, the largest share first, with its name where the
// dataset has one: the first class alone could hide a worse one behind it.
TEST(ClusterCalibrate, MaxFlaggedNamesEveryClassOverItWorstFirst) {
  // class 0: 2 of 4 (50 %, at the limit: fine); class 1: 3 of 5 (60 %); class 2: 3 of 4 (75 %)
  const std::vector<int32_t> labels = {0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2};
  const std::vector<uint8_t> flag = {1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0};
  const std::string why =
      over_max_flagged("consensus", flag, labels.data(), 0.5, {"Trouser", "Sandal", "Shirt"});
  EXPECT_NE(why.find("flags 3 of the 4 samples of class 2 'Shirt' (75 %) and 3 of the 5 "
                     "samples of class 1 'Sandal' (60 %), more than config key "
                     "'filter.max_flagged' = 0.5"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("class 0"), std::string::npos) << why;
  EXPECT_NE(why.find("lose most of those classes"), std::string::npos) << why;
  // A calibrated detector's count is the noise estimate's: the line says so, not "parameters".
  EXPECT_NE(why.find("the noise estimate itself puts that many of their labels in doubt"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("parameters"), std::string::npos) << why;
  // Names missing for a label: the index alone.
  EXPECT_NE(over_max_flagged("knn", flag, labels.data(), 0.5, {"Trouser"})
                .find("3 of the 4 samples of class 2 (75 %)"),
            std::string::npos);
  // Many classes: five listed, the rest counted, still one line.
  std::vector<int32_t> many;
  std::vector<uint8_t> all;
  for (int32_t c = 0; c < 8; ++c)
    for (int k = 0; k < 2; ++k) {
      many.push_back(c);
      all.push_back(1);
    }
  const std::string eight = over_max_flagged("knn", all, many.data(), 0.5);
  EXPECT_NE(eight.find("of class 4 (100 %) and 3 more classes, more than"), std::string::npos)
      << eight;
  EXPECT_EQ(eight.find("class 5"), std::string::npos) << eight;
  EXPECT_EQ(eight.find('\n'), std::string::npos) << eight;
}

TEST(ClusterCalibrate, RegistryKnowsEveryDetectorOnce) {
  std::set<std::string> names;
  for (const auto& d : detectors()) {
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    EXPECT_FALSE(d.looks_at.empty()) << d.name;
    EXPECT_FALSE(d.description.empty()) << d.name;
  }
  // filter.method's allowed values are the registry's names, in its order.
  const KeySpec* key = pipeline_schema().find("filter.method");
  ASSERT_NE(key, nullptr);
  std::vector<std::string> registered;
  for (const auto& d : detectors()) registered.push_back(d.name);
  EXPECT_EQ(key->choices, registered);
  EXPECT_EQ(detector("knn").name, "knn");
  EXPECT_TRUE(detector("dbscan").clusters);
  EXPECT_TRUE(detector("consensus").needs_probs && detector("consensus").needs_features);
  // The calibrated decisions are the ones whose counts come from the noise estimate.
  for (const auto& d : detectors())
    EXPECT_EQ(d.counts_estimated, d.name == "consensus" || d.name == "dynamics" ||
                                      d.name == "posterior" || d.name == "knn_posterior")
        << d.name;
  try {
    detector("lof");
    ADD_FAILURE() << "an unknown detector must fail";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("filter.method"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("consensus"), std::string::npos) << e.what();
  }
}

// The area under the margin over the recorded epochs (NaN = not recorded).
TEST(ClusterCalibrate, AreaUnderTheMarginSkipsUnrecordedEpochs) {
  const float nan = std::nanf("");
  // 3 epochs x 3 samples: sample 0 always recorded, 1 in epochs 0 and 2, 2 never.
  const std::vector<float> m = {1.0f, -2.0f, nan, 2.0f, nan, nan, 3.0f, 4.0f, nan};
  const auto aum = area_under_margin(m, 3, 3);
  ASSERT_EQ(aum.size(), 3u);
  EXPECT_FLOAT_EQ(aum[0], 2.0f);
  EXPECT_FLOAT_EQ(aum[1], 1.0f);
  EXPECT_TRUE(std::isnan(aum[2]));
  EXPECT_THROW(area_under_margin(m, 2, 3), Error);
}

// Held-out areas (from evaluation, on another scale) take the trained areas' value at the
// same quantile, class by class; ties share a quantile, NaN stays, a class with no trained
// sample is left alone.
TEST(ClusterCalibrate, HeldOutAreasTakeTheTrainedQuantiles) {
  const float nan = std::nanf("");
  //                          class 0: trained 1..4, held 20 / 10 / NaN; class 1: held only
  std::vector<float> aum = {1.0f, 2.0f, 3.0f, 4.0f, 20.0f, 10.0f, nan, 7.0f};
  const std::vector<uint8_t> held = {0, 0, 0, 0, 1, 1, 1, 1};
  const std::vector<int32_t> labels = {0, 0, 0, 0, 0, 0, 0, 1};
  align_heldout_areas(aum, held, labels);
  // Two held-out of four trained: quantiles 1/4 and 3/4, i.e. positions 0.5 and 2.5.
  EXPECT_FLOAT_EQ(aum[5], 1.5f);
  EXPECT_FLOAT_EQ(aum[4], 3.5f);
  EXPECT_TRUE(std::isnan(aum[6]));
  EXPECT_FLOAT_EQ(aum[7], 7.0f);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(aum[size_t(i)], float(i + 1)) << i;
  // A tie takes the mean rank: both at the median of the trained areas.
  std::vector<float> tied = {1.0f, 2.0f, 3.0f, 4.0f, -5.0f, -5.0f};
  align_heldout_areas(tied, {0, 0, 0, 0, 1, 1}, {0, 0, 0, 0, 0, 0});
  EXPECT_FLOAT_EQ(tied[4], 2.5f);
  EXPECT_FLOAT_EQ(tied[5], 2.5f);
}

// The held-out accuracy at the best epoch: only held-out columns count, NaN margins are not
// recorded, and a table with no recorded held-out margin has none.
TEST(ClusterCalibrate, HeldOutPeakAccuracyIsTheBestEpochsShareOfPositiveMargins) {
  const float nan = std::nanf("");
  // 3 epochs x 4 samples; sample 1 is trained (its margins never count).
  const std::vector<float> m = {1.0f,  5.0f,  -1.0f, -1.0f,  // held out: 1 of 3 right
                                1.0f,  -5.0f, 1.0f,  nan,    // 2 of 2 recorded right
                                -1.0f, 1.0f,  -1.0f, 1.0f};  // 1 of 3
  const std::vector<uint8_t> held = {1, 0, 1, 1};
  EXPECT_DOUBLE_EQ(heldout_peak_accuracy(m, 3, 4, held), 1.0);
  const std::vector<float> first_only(m.begin(), m.begin() + 4);
  EXPECT_DOUBLE_EQ(heldout_peak_accuracy(first_only, 1, 4, held), 1.0 / 3.0);
  EXPECT_TRUE(std::isnan(heldout_peak_accuracy(m, 3, 4, {0, 0, 0, 0})));
  EXPECT_TRUE(std::isnan(heldout_peak_accuracy({nan, 1.0f}, 1, 2, {1, 0})));
  EXPECT_THROW(heldout_peak_accuracy(m, 2, 4, held), Error);
}

// The caution fires where the model's own error (one minus the held-out peak, less the
// estimated share) is at least the estimated share. Figures from stored runs
// (docs/detection.md, twenty-third session).
TEST(ClusterCalibrate, EstimateInDoubtWhereTheModelsOwnErrorIsAsLargeAsTheEstimate) {
  // Fashion-MNIST 60 k, symmetric 20 %: own error 0.067 against 0.197.
  EXPECT_FALSE(estimate_in_doubt(0.736, 0.197));
  // 12 k, pairwise 5 % (cross-entropy): 0.097 against 0.065; estimate 1.30x the truth.
  EXPECT_TRUE(estimate_in_doubt(0.838, 0.065));
  EXPECT_NEAR(own_error_share(0.838, 0.065), 0.097, 1e-12);  // the figure the log line gives
  // 60 k, instance 20 %: the model learnt the wrong labels, the estimate is 0.001.
  EXPECT_TRUE(estimate_in_doubt(0.954, 0.001));
  // Exactly as large counts; just under does not.
  EXPECT_TRUE(estimate_in_doubt(0.75, 0.125));
  EXPECT_FALSE(estimate_in_doubt(0.76, 0.125));
  // A model better than its labels' estimate allows (own error below zero): no doubt.
  EXPECT_FALSE(estimate_in_doubt(0.933, 0.317));
  EXPECT_FALSE(estimate_in_doubt(std::nan(""), 0.1));
  EXPECT_FALSE(estimate_in_doubt(0.9, std::nan("")));
}
