// Noise detectors that share one interface: every detector gives each training sample a
// score (higher = more likely mislabelled or out of place) and a decision (flagged or
// not). They differ in what they look at:
//
//   dbscan     the paper's reference: DBSCAN per class on the 2-D embedding; the decision
//              is DBSCAN's noise label, the score the sample's core distance (distance to
//              its min_samples-1'th nearest same-class neighbour), the quantity DBSCAN
//              compares with eps.
//   knn        neighbour vote in feature space (deep k-NN / SimiFeat): the k nearest
//              training samples by cosine distance of the penultimate features (the
//              sample itself excluded) vote; score = fraction whose label differs from
//              the sample's; flagged when that fraction exceeds the threshold (default
//              0.7: at least 8 of 10 neighbours disagree).
//   confident  confident learning (Northcutt et al. 2021, cleanlab's 'confident_learning'
//              rule) on class probabilities: per-class thresholds t_j = mean p_j over the
//              samples labelled j; a sample whose confidently predicted class
//              argmax{p_j : p_j >= t_j} differs from its label sits off the diagonal of
//              the confident joint and is flagged; score = max_{j != y} p_j - p_y.
//
// Why these inputs: a network that has memorised noisy labels maps them where their wrong
// class lies, so the features and probabilities come from the early-learning checkpoint
// (pretrain's held-out peak, docs/detection.md), not from the memorised final model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cluster/calibrate.hpp"
#include "comm/comm.hpp"
#include "embed/knn_approx.hpp"

namespace sieve::cluster {

struct Detection {
  std::string method;
  std::vector<float> score;   // [n], higher = more suspicious
  std::vector<uint8_t> flag;  // [n], 1 = flagged as noise
  std::string inputs;         // what it looked at, for the report ("t-SNE embedding", ...)
  // Wall time of its score and decision (not of reading the inputs; the consensus reuses the
  // others' scores, so its own is the rank averaging and the per-class decision only).
  double seconds = 0;
};

// One rank's share of a row-distributed input [n, width] (features or probabilities), for
// inputs too large for every rank to hold whole (1 M x 512 features are 2 GB): the rows it
// holds and, for each, its global row number (the row of the labels and of the result).
// The shares of the ranks are disjoint and together cover all n rows, in any order. Sums
// over rows run in (rank, position) order, so results are the same on any rank count when
// the ranks hold consecutive pieces of one fixed sequence of rows (block_range over a
// file's rows, as cluster_filter reads them).
struct RowShare {
  std::vector<float> x;       // [rows.size(), width]
  std::vector<int64_t> rows;  // [m] global rows, 0 <= row < n
  int width = 0;
  int64_t size() const { return int64_t(rows.size()); }
};

// k-NN label vote over the L2-normalised features (normalised in place). No rank holds all
// features: each keeps its own rows as queries and meets every other rank's rows as
// references, streamed to it in pieces of a few MiB (shifted pairwise exchange, the next
// piece's transfer overlapping the current GEMM); each query keeps a running top-k. Ties
// in distance go to the smaller global row on every rank count. labels [n] and the result
// ([n] score and flag) are whole on every rank. Needs n > k. piece_bytes: the size of one
// message of reference rows (at least one row; tests pass a small one).
// search: exact, or the inverted file (embed/knn_ivf_blocks.hpp: each rank's cells over its
// own rows, `probes` cells probed a cell; approximate, and then the share's rows are also
// reordered in place); auto (the default) is exact below embed::kApproxKnnMinPoints rows,
// the inverted file from there on. Any other method counts as the inverted file.
inline constexpr int64_t kKnnPieceBytes = int64_t(16) << 20;
// Cells probed per query cell by the inverted file. At 1.28 M x 512 (one rank: 1,131 cells)
// a query then meets ~1.4 % of the rows; docs/detection.md has the flags' agreement with
// the exact search and the time.
inline constexpr int64_t kKnnIvfProbes = 16;
struct KnnSearch {
  embed::KnnMethod method = embed::KnnMethod::Auto;
  int64_t probes = kKnnIvfProbes;
  // Where given, receives this rank's neighbour lists [m, k] (global rows, nearest first) in
  // the share's order at the end (benchmarks measure the recall with it).
  std::vector<int32_t>* lists = nullptr;
  KnnSearch() = default;
  KnnSearch(embed::KnnMethod m, int64_t p = kKnnIvfProbes) : method(m), probes(p) {}  // NOLINT
};
Detection detect_knn_vote(const Comm& comm, RowShare& features, int64_t n, const int32_t* labels,
                          int k, double threshold, int64_t piece_bytes = kKnnPieceBytes,
                          const KnnSearch& search = {});
// The same over x [n, d] held whole by every rank (each rank takes its block of rows).
Detection detect_knn_vote(const Comm& comm, const float* x, int64_t n, int d, const int32_t* labels,
                          int k, double threshold, const KnnSearch& search = {});

// Confident learning over row-distributed probabilities (rows sum to 1): per-class
// thresholds from sums passed along the ranks in order, each rank decides its own rows;
// labels [n] and the result are whole on every rank.
// `estimate` (if non-null): the noise count per class from the confident joint
// (calibrate.hpp), whole on every rank. `heldout` (if non-null, [n], whole): the rows whose
// probabilities come from a model that never trained on them (pretrain.holdout); a class whose
// held-out samples' mean self-confidence lies more than two standard errors below all its
// samples' takes theirs as its threshold (in-sample probabilities are fitted; detect.cpp).
Detection detect_confident(const Comm& comm, const RowShare& probs, int64_t n,
                           const int32_t* labels, NoiseEstimate* estimate = nullptr,
                           const uint8_t* heldout = nullptr);
// Confident learning over probabilities p [n, classes] held whole (one process).
Detection detect_confident(const float* p, int64_t n, int classes, const int32_t* labels,
                           NoiseEstimate* estimate = nullptr, const uint8_t* heldout = nullptr);

// The posterior detector's score over row-distributed probabilities: each sample's
// wrong_label_posterior (calibrate.hpp) under the label `transition` [classes x classes]
// (label_transition: of the confident joint of the same probabilities, or of the test
// split's joint where that is precise, program.cpp). Score only: the flags follow the
// calibrated counts (flag_top_overall) once they are known. labels [n] and the score are
// whole on every rank.
Detection detect_posterior(const Comm& comm, const RowShare& probs, int64_t n,
                           const int32_t* labels, const std::vector<double>& transition);

// This rank's neighbour lists from the knn detector (KnnSearch::lists): row q of `lists`
// [rows.size(), k] holds the global rows nearest to global row rows[q], nearest first.
struct NeighbourLists {
  std::vector<int64_t> rows;
  std::vector<int32_t> lists;
  int k = 0;
};
// Half a vote per class: the neighbour shares never say a class is impossible, as the
// probabilities a softmax gives never do (ten neighbours all of label y leave the other
// classes 1/30 each with ten classes).
inline constexpr double kNeighbourVotePrior = 0.5;
// The knn_posterior detector's score: the knn vote read through the noise's label transition.
// Each sample's neighbours' labels, as shares (count + kNeighbourVotePrior) / (k + classes x
// kNeighbourVotePrior), stand where the class probabilities stand in wrong_label_posterior
// (calibrate.hpp). The plain vote counts a neighbour of any other label alike; under
// pairwise noise a T-shirt/top among Shirts is a likely flip, one among Bags a likely
// feature error. Score only (flags as the posterior's); labels [n] and the score are whole on
// every rank; every rank passes its own lists (any may have none).
Detection detect_knn_posterior(const Comm& comm, const NeighbourLists& neighbours, int64_t n,
                               const int32_t* labels, const std::vector<double>& transition,
                               int classes);

// DBSCAN's core distance per sample within its class (the score of the dbscan detector):
// distance to the (min_samples-1)'th nearest other sample of the same class. A class too
// small to hold a core point (DBSCAN calls all of it noise) scores the run's largest value.
std::vector<float> core_distance_per_class(const float* x, int64_t n, int d, const int32_t* labels,
                                           int min_samples);

// ---- scoring against ground truth ----

struct PrPoint {
  float threshold;  // flag score >= threshold
  double precision, recall;
};

struct DetectionScore {
  int64_t flagged = 0, truth = 0, hits = 0;
  double precision = 0, recall = 0, f1 = 0;
  double average_precision = 0;  // area under the step PR curve over the score
  double auroc = 0;              // P(a noisy sample scores above a clean one), ties counting half
  std::vector<PrPoint> curve;    // at most `max_points`, recall ascending
};

// truth [n] aligned with the detection's rows (1 = injected noise).
DetectionScore score_detection(const Detection& d, const std::vector<uint8_t>& truth,
                               size_t max_points = 200);

// Align ground-truth flags (by sample id) to `ids`; rows without a truth entry are an
// error naming `what`.
std::vector<uint8_t> align_truth(const std::vector<int64_t>& ids,
                                 const std::vector<int64_t>& truth_ids,
                                 const std::vector<uint8_t>& truth, const std::string& what);

}  // namespace sieve::cluster
