// The noise detectors (libcore/cluster/detect.hpp) on cases with a known answer, and the
// scoring against ground truth (precision, recall, F1, the PR curve, average precision).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "cluster/detect.hpp"
#include "util/error.hpp"

using namespace sieve;
using namespace sieve::cluster;

namespace {

// Classes as tight directions in d-D (the features of a network that separates them), with
// a fraction of the labels flipped to another class: the flipped rows are the truth.
struct Flipped {
  std::vector<float> x;
  std::vector<int32_t> labels;
  std::vector<uint8_t> truth;
  int64_t n = 0;
  int d = 0;
};

Flipped make_flipped(int classes, int per_class, int d, double frac, uint64_t seed) {
  Flipped f;
  f.d = d;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> N(0, 0.15f);
  std::uniform_real_distribution<float> scale(0.5f, 3.0f);  // cosine must ignore the norm
  std::bernoulli_distribution flip(frac);
  for (int c = 0; c < classes; ++c)
    for (int i = 0; i < per_class; ++i) {
      const float s = scale(rng);
      for (int j = 0; j < d; ++j) f.x.push_back(s * ((j == c ? 1.0f : 0.0f) + N(rng)));
      const bool flipped = flip(rng);
      f.labels.push_back(flipped ? (c + 1 + int(rng() % (classes - 1))) % classes : c);
      f.truth.push_back(flipped);
    }
  f.n = int64_t(f.labels.size());
  return f;
}

}  // namespace

TEST(ClusterDetect, KnnVoteScoreIsTheDisagreeingFractionOfCosineNeighbours) {
  Flipped f = make_flipped(4, 150, 6, 0.1, 3);
  Comm self(MPI_COMM_SELF);
  const int k = 10;
  Detection det = detect_knn_vote(self, f.x.data(), f.n, f.d, f.labels.data(), k, 0.5);
  ASSERT_EQ(det.method, "knn");
  ASSERT_EQ(det.score.size(), size_t(f.n));
  // Brute force: cosine similarity, the sample itself excluded.
  auto cosine = [&](int64_t a, int64_t b) {
    double ab = 0, aa = 0, bb = 0;
    for (int j = 0; j < f.d; ++j) {
      ab += double(f.x[a * f.d + j]) * f.x[b * f.d + j];
      aa += double(f.x[a * f.d + j]) * f.x[a * f.d + j];
      bb += double(f.x[b * f.d + j]) * f.x[b * f.d + j];
    }
    return ab / std::sqrt(aa * bb);
  };
  for (int64_t q : {0, 17, 151, 333, 599}) {
    std::vector<std::pair<double, int64_t>> sims;
    for (int64_t i = 0; i < f.n; ++i)
      if (i != q) sims.push_back({-cosine(q, i), i});
    std::sort(sims.begin(), sims.end());
    int disagree = 0;
    for (int j = 0; j < k; ++j)
      disagree += f.labels[size_t(sims[size_t(j)].second)] != f.labels[size_t(q)];
    EXPECT_FLOAT_EQ(det.score[size_t(q)], float(disagree) / k) << "row " << q;
    EXPECT_EQ(det.flag[size_t(q)], disagree > k / 2) << "row " << q;
  }
  // Well separated classes, 10 % flipped: the vote finds them all and nothing else.
  DetectionScore s = score_detection(det, f.truth);
  EXPECT_GT(s.truth, 40);
  EXPECT_EQ(s.hits, s.truth);
  EXPECT_EQ(s.flagged, s.truth);
  EXPECT_DOUBLE_EQ(s.f1, 1.0);
  EXPECT_DOUBLE_EQ(s.average_precision, 1.0);
  // A stricter threshold flags a subset.
  Detection strict = detect_knn_vote(self, f.x.data(), f.n, f.d, f.labels.data(), k, 0.95);
  for (int64_t i = 0; i < f.n; ++i) EXPECT_LE(strict.flag[size_t(i)], det.flag[size_t(i)]);
  EXPECT_THROW(detect_knn_vote(self, f.x.data(), 5, f.d, f.labels.data(), 5, 0.5), sieve::Error);
}

// The inverted file (the search from embed::kApproxKnnMinPoints rows on) against the exact
// search on overlapping classes (noise of norm ~1.2 around unit directions) with 10 % of the
// labels flipped: 77 cells of ~80 rows, 16 probed, so a query meets about a fifth of the
// rows and misses some of its true neighbours; the flags must still agree on >= 99 % of the
// samples and find the flips as well.
TEST(ClusterDetect, KnnVoteThroughTheInvertedFileFlagsAsTheExactSearch) {
  const Flipped f = make_flipped(60, 100, 64, 0.1, 21);
  Comm self(MPI_COMM_SELF);
  const int k = 10;
  const Detection exact =
      detect_knn_vote(self, f.x.data(), f.n, f.d, f.labels.data(), k, 0.7, embed::KnnMethod::Exact);
  const Detection ivf =
      detect_knn_vote(self, f.x.data(), f.n, f.d, f.labels.data(), k, 0.7, embed::KnnMethod::Ivf);
  int64_t same = 0, same_score = 0;
  for (int64_t i = 0; i < f.n; ++i) {
    same += exact.flag[size_t(i)] == ivf.flag[size_t(i)];
    same_score += exact.score[size_t(i)] == ivf.score[size_t(i)];
  }
  std::printf("ivf vs exact: flags agree on %lld of %lld, scores on %lld\n", (long long)same,
              (long long)f.n, (long long)same_score);
  EXPECT_GE(double(same), 0.99 * double(f.n));
  EXPECT_NE(ivf.inputs.find("inverted file"), std::string::npos) << ivf.inputs;
  EXPECT_EQ(exact.inputs.find("inverted file"), std::string::npos) << exact.inputs;
  const DetectionScore se = score_detection(exact, f.truth), si = score_detection(ivf, f.truth);
  EXPECT_GT(se.f1, 0.8);  // the data leave the vote something to find
  EXPECT_GT(si.f1, se.f1 - 0.01);
  // The default (auto) is exact at this size.
  EXPECT_EQ(detect_knn_vote(self, f.x.data(), f.n, f.d, f.labels.data(), k, 0.7).score,
            exact.score);
}

TEST(ClusterDetect, ConfidentLearningFlagsOffDiagonalOfTheConfidentJoint) {
  // Three classes. Thresholds are the mean self-confidence per given label:
  // label 0 rows: p0 = .9, .9, .3 -> t0 = .7; label 1 rows: p1 = .8, .6 -> t1 = .7;
  // label 2 rows: p2 = .5, .5 -> t2 = .5.
  const std::vector<float> probs = {
      .90f, .05f, .05f,  // y0: confidently 0           -> kept
      .90f, .05f, .05f,  // y0                          -> kept
      .30f, .65f, .05f,  // y0: p1 .65 < t1 .7, p2 < t2 -> no confident class, kept
      .10f, .80f, .10f,  // y1                          -> kept
      .75f, .60f, .05f,  // y1: p0 .75 >= t0, p1 < t1   -> confidently 0: flagged
      .20f, .30f, .50f,  // y2                          -> kept
      .20f, .30f, .50f,  // y2                          -> kept
  };
  const std::vector<int32_t> y = {0, 0, 0, 1, 1, 2, 2};
  Detection det = detect_confident(probs.data(), 7, 3, y.data());
  EXPECT_EQ(det.method, "confident");
  EXPECT_EQ(det.flag, (std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 0}));
  // Score: the best other class's probability minus the given label's.
  EXPECT_FLOAT_EQ(det.score[0], .05f - .90f);
  EXPECT_FLOAT_EQ(det.score[2], .65f - .30f);
  EXPECT_FLOAT_EQ(det.score[4], .75f - .60f);
  // The ranking puts row 2 (the unsure one) first, then the flagged row 4.
  DetectionScore s = score_detection(det, {0, 0, 0, 0, 1, 0, 0});
  EXPECT_DOUBLE_EQ(s.precision, 1.0);
  EXPECT_DOUBLE_EQ(s.recall, 1.0);
  EXPECT_DOUBLE_EQ(s.average_precision, 0.5);  // hit at rank 2: precision 1/2
  const std::vector<int32_t> bad = {0, 0, 0, 1, 1, 2, 3};
  EXPECT_THROW(detect_confident(probs.data(), 7, 3, bad.data()), sieve::Error);
}

TEST(ClusterDetect, ConfidentThresholdFromHeldOutSamplesWhereTheyArePlainlyLessSure) {
  // In-sample probabilities are fitted: class 1's trained rows say .95, its four held-out
  // rows about .70. Row 6, labelled 0, is a class-1 image trained under label 0: its .80 for
  // class 1 is below the in-sample mean (.85) but above what the model gives class-1 images
  // it did not train on as class 1.
  const std::vector<float> probs = {
      .90f,  .05f,  .05f,  .90f,  .05f, .05f,  .90f,  .05f, .05f,   // y0, trained
      .90f,  .05f,  .05f,  .90f,  .05f, .05f,  .90f,  .05f, .05f,   // y0, trained
      .15f,  .80f,  .05f,                                           // y0: a class-1 image
      .90f,  .05f,  .05f,  .90f,  .05f, .05f,                       // y0, held out
      .025f, .95f,  .025f, .025f, .95f, .025f, .025f, .95f, .025f,  // y1, trained
      .025f, .95f,  .025f, .025f, .95f, .025f, .025f, .95f, .025f,  // y1, trained
      .15f,  .70f,  .15f,  .14f,  .72f, .14f,  .16f,  .68f, .16f,   // y1, held out
      .15f,  .70f,  .15f,                                           // y1, held out
      .05f,  .05f,  .90f,  .05f,  .05f, .90f,  .05f,  .05f, .90f,   // y2, trained
      .025f, .025f, .95f,  .35f,  .35f, .30f,                       // y2, held out
  };
  const std::vector<int32_t> y = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1,
                                  1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2};
  const std::vector<uint8_t> heldout = {0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0,
                                        0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1};
  const int64_t n = int64_t(y.size());
  std::vector<uint8_t> only_row_6(size_t(n), 0);
  only_row_6[6] = 1;

  NoiseEstimate plain, with_heldout;
  const Detection before = detect_confident(probs.data(), n, 3, y.data(), &plain);
  const Detection after =
      detect_confident(probs.data(), n, 3, y.data(), &with_heldout, heldout.data());
  // Without the held-out rows: t1 = .85, row 6 has no confident class and is not counted.
  EXPECT_EQ(before.flag, std::vector<uint8_t>(size_t(n), 0));
  EXPECT_EQ(plain.per_class, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(plain.threshold_from_heldout, (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_NEAR(plain.threshold[1], .85, 1e-6);
  // With them: class 1's held-out mean (.70, standard error .008) is 18 standard errors
  // below .85, so it is the threshold and row 6 is confidently class 1. Class 0's held-out
  // rows are as sure as its trained ones, and class 2's two (.95, .30) are lower on average
  // (.625 against .79) but within two of their standard errors (.33): both keep theirs.
  EXPECT_EQ(after.flag, only_row_6);
  EXPECT_EQ(with_heldout.threshold_from_heldout, (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_NEAR(with_heldout.threshold[0], 7.35 / 9, 1e-6);
  EXPECT_NEAR(with_heldout.threshold[1], .70, 1e-6);
  EXPECT_NEAR(with_heldout.threshold[2], .79, 1e-6);
  EXPECT_EQ(with_heldout.per_class, (std::vector<int64_t>{1, 0, 0}));  // 9 x 1/9
  EXPECT_EQ(with_heldout.class_size, (std::vector<int64_t>{9, 10, 5}));
  // The score does not depend on the thresholds.
  EXPECT_EQ(after.score, before.score);
}

TEST(ClusterDetect, CoreDistanceIsTheDistanceToTheNeighbourDbscanCounts) {
  // 1-D, class 0 at 0, 1, 3, 10; class 1 at 100, 101 (too small for min_samples 3).
  const std::vector<float> x = {0, 1, 3, 10, 100, 101};
  const std::vector<int32_t> y = {0, 0, 0, 0, 1, 1};
  auto s = core_distance_per_class(x.data(), 6, 1, y.data(), 3);  // 2nd nearest other sample
  EXPECT_FLOAT_EQ(s[0], 3);                                       // neighbours 1, 3
  EXPECT_FLOAT_EQ(s[1], 2);                                       // 0, 3
  EXPECT_FLOAT_EQ(s[2], 3);                                       // 1, 0
  EXPECT_FLOAT_EQ(s[3], 9);                                       // 3, 1
  EXPECT_FLOAT_EQ(s[4], 9);  // class too small: the largest score of the run
  EXPECT_FLOAT_EQ(s[5], 9);
}

TEST(ClusterDetect, ScoringCountsTiesTogetherAndThinsTheCurve) {
  Detection d;
  d.method = "test";
  d.score = {0.9f, 0.8f, 0.8f, 0.5f, 0.1f, 0.0f};
  d.flag = {1, 1, 1, 0, 0, 0};
  const std::vector<uint8_t> truth = {1, 0, 1, 1, 0, 0};
  DetectionScore s = score_detection(d, truth);
  EXPECT_EQ(s.flagged, 3);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.truth, 3);
  EXPECT_DOUBLE_EQ(s.precision, 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.recall, 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.f1, 2.0 / 3);
  // Points: (1/1, 1/3), tie block (2/3, 2/3), (3/4, 1), (3/5, 1), (3/6, 1).
  ASSERT_EQ(s.curve.size(), 5u);
  EXPECT_DOUBLE_EQ(s.curve[1].precision, 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.curve[1].recall, 2.0 / 3);
  EXPECT_FLOAT_EQ(s.curve[1].threshold, 0.8f);
  EXPECT_DOUBLE_EQ(s.average_precision, 1.0 / 3 + (2.0 / 3) / 3 + 0.75 / 3);
  // AUROC: clean samples below each noisy one, a tie counting half: 3 + 2.5 + 2 of 3 x 3.
  EXPECT_DOUBLE_EQ(s.auroc, 7.5 / 9);
  // Thinning keeps the first and last points.
  DetectionScore thin = score_detection(d, truth, 3);
  ASSERT_EQ(thin.curve.size(), 3u);
  EXPECT_DOUBLE_EQ(thin.curve.front().recall, 1.0 / 3);
  EXPECT_DOUBLE_EQ(thin.curve.back().precision, 0.5);
  // Nothing flagged, no truth: zeros, not NaN.
  d.flag.assign(6, 0);
  DetectionScore none = score_detection(d, std::vector<uint8_t>(6, 0));
  EXPECT_EQ(none.precision, 0.0);
  EXPECT_EQ(none.f1, 0.0);
  EXPECT_TRUE(none.curve.empty());
}

TEST(ClusterDetect, TruthIsAlignedBySampleId) {
  auto t = align_truth({30, 10, 20}, {10, 20, 30}, {1, 0, 1}, "data.h5");
  EXPECT_EQ(t, (std::vector<uint8_t>{1, 1, 0}));
  try {
    align_truth({10, 99}, {10, 20}, {1, 0}, "data.h5");
    FAIL() << "a missing id must be an error";
  } catch (const sieve::Error& e) {
    EXPECT_NE(std::string(e.what()).find("99"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("data.h5"), std::string::npos) << e.what();
  }
}
