// cluster_filter's inputs: the points to cluster (held whole by every rank) and the features
// file's large matrices (row-distributed over the ranks).
//
// What a rank holds, and why: the per-sample things are small and every rank needs them
// whole — labels and ids (N int32 + N int64), the 2-D t-SNE embedding that the per-class
// DBSCAN clusters (N x 2 floats; DBSCAN deals classes or space to ranks and wants them all),
// the detectors' scores and flags and the keep masks (N floats/bytes each): about 40 MB at
// 1 M samples. The features ([N, F] floats: 2 GB at 1 M x 512) and the class probabilities
// are read in blocks of rows, one block a rank, and never gathered (detect.hpp, RowShare).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cluster/detect.hpp"
#include "comm/comm.hpp"

namespace sieve::cluster {

// The points to cluster with their labels and ids, whole on every rank.
struct Input {
  std::vector<float> x;  // [n, d]
  std::vector<int32_t> labels;
  std::vector<int64_t> ids;
  int64_t n = 0;
  int d = 0;
};

// `dataset` (float [N,d]) of an embedding, features or dataset file, with the `labels` and
// `sample_id` next to it. Errors name the file and dataset (missing, wrong shape, empty,
// mismatched lengths, NaN, negative labels).
Input read_input(const std::string& path, const std::string& dataset);

// This rank's share of the features file's /train/features and /train/probs.
struct FeatureShares {
  RowShare feats, probs;  // width 0: not asked for, or absent from the file
  // The file's probs_source attribute (in_sample, or out_of_fold from pretrain.folds); ""
  // when the probabilities were not asked for or the file predates cross-fitting.
  std::string probs_source;
};

// Reads the features file at `path` for the samples `ids`/`labels` (the input's, whole on
// every rank): rank r reads rows block_range(N, r, size) of each dataset asked for, keeps
// the rows whose sample is in the input (in file order) and numbers them by the input's row
// of that sample. The file's ids and labels are read whole (joined on sample id); a missing
// or twice-present id, a label that differs from the input's, a wrong shape or a NaN is an
// Error naming the file and dataset, raised alike on every rank (one line, once).
FeatureShares read_feature_shares(const Comm& comm, const std::string& path,
                                  const std::vector<int64_t>& ids,
                                  const std::vector<int32_t>& labels, bool want_features,
                                  bool want_probs);

// The test split's labels and the model's most likely class for each of its samples
// (/test/labels, and the argmax of /test/probs: `classes` columns, as /train/probs), whole on
// every rank (each reads a block of rows of the probabilities). Empty where the file has no
// /test/probs (features.test: false). A wrong shape, a label outside the classes or a NaN is
// an Error naming the file and dataset, raised alike on every rank.
struct TestPredictions {
  std::vector<int32_t> label, predicted;
};
TestPredictions read_test_predictions(const Comm& comm, const std::string& path, int classes);

// The argmax column of row-distributed probabilities [n rows]: each rank its rows, then the
// whole column on every rank; -1 for a row no rank holds (rows are disjoint across ranks).
std::vector<int32_t> most_likely_class(const Comm& comm, const RowShare& p, int64_t n);

// pretrain's dynamics.h5 (train/dynamics.hpp, docs/formats.md), read once: cluster_filter
// takes from it the held-out marks (the confident joint's thresholds), the areas under the
// margin (the dynamics detector) and the held-out peak accuracy (the estimate's caution).
// The margin table is reduced on reading and not kept (it is [epochs, N]). A wrong schema or
// shape is an Error naming the file; so is an id of the input missing from the file.
class DynamicsFile {
 public:
  explicit DynamicsFile(const std::string& path);
  // The area under the margin (mean margin over the recorded epochs) of each of the input's
  // samples `ids`; NaN for a sample with no recorded epoch. Where the file marks held-out
  // samples (/heldout: margins from evaluation, not training) their areas are put on the
  // trained samples' scale by align_heldout_areas.
  std::vector<float> aum_of(const std::vector<int64_t>& ids) const;
  // Which of `ids` pretrain held out (never trained on): 1 held out, 0 trained; empty where
  // the file predates the mark.
  std::vector<uint8_t> heldout_of(const std::vector<int64_t>& ids) const;
  // heldout_peak_accuracy over all the file's samples; NaN where it predates the mark.
  double heldout_peak() const { return heldout_peak_; }

 private:
  std::vector<size_t> columns_of(const std::vector<int64_t>& ids) const;
  std::string path_;
  std::vector<int64_t> ids_;
  std::vector<float> aum_;        // per file column, held-out areas aligned
  std::vector<uint8_t> heldout_;  // per file column; empty: no marks
  double heldout_peak_;
};

// The early model's held-out accuracy against the given labels at its best recorded epoch:
// per epoch, the share of held-out samples (`heldout` 1) whose margin is positive (the model
// predicts their label), the highest over the epochs of a margin table [epochs, n] (NaN: not
// recorded that epoch). NaN where no held-out sample has a recorded margin.
double heldout_peak_accuracy(const std::vector<float>& margin, int64_t epochs, int64_t n,
                             const std::vector<uint8_t>& heldout);
// Held-out samples' areas come from a model that never fitted them, so they sit lower than
// the trained samples' (by how much depends on the data, the class and the epoch count):
// compared as they are, the held-out share would be flagged first. The held-out part is a
// stratified random share of every class with the same noise in expectation, so within each
// class (`labels`) each held-out area is replaced by the trained areas' value at the same
// quantile (quantile mapping; ties share their mean rank). A class without trained or without
// held-out samples is left as it is; NaN entries stay NaN.
void align_heldout_areas(std::vector<float>& aum, const std::vector<uint8_t>& heldout,
                         const std::vector<int32_t>& labels);

// The area under the margin of each column of a margin table [epochs, n] (NaN entries are
// epochs not recorded; NaN where none is).
std::vector<float> area_under_margin(const std::vector<float>& margin, int64_t epochs, int64_t n);

}  // namespace sieve::cluster
