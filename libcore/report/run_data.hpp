// What the report reads from a run directory (docs/formats.md), loaded once.
//
// Every input is optional: a missing file becomes a note in the report ("no filter.h5:
// data-reduction table omitted") so a report can be made after any prefix of the pipeline.
// A file that IS present but malformed (wrong schema, missing dataset, wrong JSON type) is
// a sieve::Error naming the file and what was expected: a half-written or foreign file
// must not silently turn into an empty section.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "config/sweep.hpp"
#include "io/metrics.hpp"

namespace sieve::report {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One train_scaled run: <sweep>/run-<index>/result.json (+ metrics.jsonl epochs).
struct RunResult {
  std::string path;  // result.json
  int64_t index = -1;
  std::string arm;  // "full" | "filtered" | "random"
  int64_t seed = 0, ranks = 1, global_batch = 0, per_rank_batch = 0, samples = -1;
  double final_test_acc = kNaN, best_test_acc = kNaN, train_acc = kNaN, gen_gap = kNaN;
  // train_acc and gen_gap are against the labels trained on (noisy where the data is);
  // train_acc_clean against the dataset's clean labels where it has them (NaN: not known).
  double train_acc_clean = kNaN;
  double time_to_best_s = kNaN, images_per_s = kNaN, images_per_s_per_rank = kNaN;
  double weight_decay = kNaN, lr = kNaN;
  size_t epochs_logged = 0;  // lines of metrics.jsonl (0 when absent)
  // The global batch the sweep asked for (result.json "sweep"/"global_batch"); equals
  // global_batch when the sweep did not vary it. They differ when train_scaled capped the
  // batch at the data size: such runs are a batch of their own, never pooled with others.
  int64_t requested_batch = 0;
  std::string dataset_fingerprint;  // the dataset the run trained on ("" when not recorded)
  std::string filter_fingerprint;   // the filter.h5 of arms filtered/random ("" likewise)
  std::string precision;            // result.json "precision": fp32 | bf16 ("" not written)
  int64_t epochs = 0;               // result.json "epochs" (0: not written)
  int64_t steps = 0;                // result.json "steps": optimizer steps (0: not written)
  // The config keys that decide the result (result.json "config", config/sweep.hpp); empty
  // for a result of an older train_scaled, which is matched on the fields above instead.
  ResultKeys recorded;
  // train_scaled stopped on a non-finite loss/gradient (result.json "diverged": true):
  // final_test_acc is NaN, last_eval_test_acc the last evaluation before it (NaN if none).
  bool diverged = false;
  int64_t diverged_at_step = -1;
  double last_eval_test_acc = kNaN;
  int64_t num_classes = 0;  // result.json "num_classes" (0: not written)
  // Final test accuracy <= kCollapseFactor / classes (set by load_run, see mark_runs).
  bool collapsed = false;
  double chance = kNaN;  // 1 / classes when known
  // "diverged", "collapsed (near chance)" or "".
  std::string mark() const;
};

// A run whose final test accuracy is at most this many times chance learned (almost)
// nothing: it is flagged, not hidden (it stays in the means, diverged runs do not).
inline constexpr double kCollapseFactor = 1.5;

// Sets collapsed/chance of every run from the class count (dataset.h5's when `classes` > 0,
// else the run's own num_classes); runs without either are not checked.
void mark_runs(std::vector<RunResult>& runs, int64_t classes);

// Parse one result.json text; `path` names the file in errors.
RunResult parse_result(const Json& j, const std::string& path);

struct DatasetInfo {
  bool present = false;
  std::string path, kind, source;
  std::string fingerprint;  // io/lineage.hpp; "" for a file without one
  int64_t n_train = 0, n_test = 0, num_classes = 0;
  std::vector<std::string> class_names;
  std::vector<int64_t> sample_shape;  // [H,W,C] for images, [F] for tabular
  int64_t bytes_per_sample = 0;       // H*W*C (uint8) or 4F (float32)
  bool has_noise_truth = false;
  std::vector<uint8_t> noise_truth;      // [n_train] when has_noise_truth
  std::vector<int64_t> train_sample_id;  // [n_train] when has_noise_truth
  // data.label_noise as applied by shard_dataset (root attributes label_noise_*); kind "":
  // none (the noise, if any, came with the source, e.g. synthetic data's own).
  std::string injected_kind;
  double injected_rate = 0;
};

struct ClassRow {  // one row of the paper's Table I
  int64_t cls = 0, samples = 0, clusters = 0, noise = 0;
  double removed_pct = 0;
};

// One detector's decisions scored against the ground truth (filter.h5 /detectors/<method>,
// written by cluster_filter when the dataset has /train/noise_truth).
struct DetectorInfo {
  std::string method, inputs, description;  // description: the registry's (cluster/detectors.cpp)
  int64_t flagged = 0, hits = -1, truth = -1;  // hits/truth -1: not scored
  double precision = kNaN, recall = kNaN, f1 = kNaN, average_precision = kNaN, auroc = kNaN;
  std::vector<float> pr;  // [points, 3]: threshold, precision, recall (recall ascending)
};

struct FilterInfo {
  bool present = false;
  std::vector<DetectorInfo> detectors;  // every detector cluster_filter ran, chosen first
  std::string path, method;
  std::string fingerprint;  // io/lineage.hpp; "" for a file without one
  double eps = kNaN;
  int64_t min_samples = 0;
  double noise_precision = kNaN, noise_recall = kNaN;  // NaN: no ground truth
  // The confident joint's estimate of wrong labels, and the truth's count (-1: absent).
  int64_t noise_estimate = -1, noise_truth = -1;
  int64_t noise_flag_total = -1;  // what the calibrated decisions flagged (-1: older file)
  double noise_rate_given = 0;    // filter.noise_rate that set that count (0: the estimate did)
  // The early model's held-out peak accuracy (NaN: not recorded) and whether its own error is
  // as large as the estimate (cluster/calibrate.hpp, estimate_in_doubt; false: not, or older).
  double heldout_peak = kNaN;
  bool estimate_in_doubt = false;
  // The count from the early model's confusion on the test split (cluster/confusion_count.hpp;
  // NaN: not estimated) and the cap it put on the calibrated decisions (-1: none).
  double test_split_wrong = kNaN, test_split_standard_error = kNaN;
  int64_t test_split_cap = -1;
  // Per class, where its label's own estimate kept it under filter.max_flagged, the count it
  // was bounded at (-1 for the others); empty: none was.
  std::vector<int64_t> test_split_class_cap;
  bool test_split_follows_model = false;  // confusion_count.hpp, labels_follow_model
  // Where it was plainly below zero, the count its magnitude raised the decisions to
  // (filter.follows_model_count; -1: none, or a file from before it).
  int64_t test_split_raise = -1;
  // Which joint the posteriors' label transition came from: "test_split" or "confident_joint"
  // ("" for files from before the thirty-first session).
  std::string transition_source;
  std::string probs_source;       // in_sample / out_of_fold ("" before cross-fitting)
  std::string label_issues;       // label_issues.csv beside the filter file ("" if absent)
  std::vector<ClassRow> per_class;
  std::vector<int32_t> cluster;  // [N], -1 = noise
  std::vector<uint8_t> keep;     // [N]
  std::vector<int64_t> sample_id;
};

struct EmbeddingInfo {
  bool present = false;
  std::string path, method;
  int64_t n = 0, dims = 0;
  std::vector<float> points;  // [n, dims]
  std::vector<int32_t> labels;
  std::vector<int64_t> sample_id;
  double perplexity = kNaN, kl_divergence = kNaN, knn_preservation = kNaN, trustworthiness = kNaN;
};

// A result.json that is not a result of the current sweep grid: left out of every number.
struct StaleResult {
  int64_t index = -1;
  std::string path;  // result.json
  std::string why;   // "run 1 is outside the current grid (1 run)", "scaled.epochs 1 (grid: 3)"
};

struct FeaturesInfo {
  bool present = false;
  std::string path, layer, model;
  int64_t n = 0, dim = 0;
};

// pretrain/model_early.json: the early-learning model the features come from (numbers NaN
// where not recorded).
struct EarlyModelInfo {
  bool present = false;
  double epoch = kNaN, holdout_acc = kNaN, peak_acc = kNaN, peak_epoch = kNaN, train_acc = kNaN;
  // Where the held-out accuracy last rose measurably (the guarded pick) and the training
  // accuracy then: the memorisation test's second part (train/crossfit.hpp; NaN: not recorded).
  double guarded_epoch = kNaN, guarded_train_acc = kNaN;
  std::string pick = "peak";           // peak or guarded
  std::string loss = "cross_entropy";  // pretrain.loss (files before the field: cross-entropy)
  int memorised = -1;                  // -1: not recorded (the run had not finished), 0, 1
  // pretrain.loss auto's first run, where it trained a second ("first_pass"): its last
  // training accuracy, held-out peak and pretraining seconds (NaN: no second run).
  double first_train_acc = kNaN, first_peak_acc = kNaN, first_elapsed_s = kNaN;
  double first_guarded_epoch = kNaN, first_guarded_train_acc = kNaN;
};

struct RunData {
  std::string run_dir;
  DatasetInfo dataset;
  FeaturesInfo features;
  EmbeddingInfo embedding;
  FilterInfo filter;
  std::vector<Json> pretrain_metrics;  // pretrain/metrics.jsonl
  std::string pretrain_metrics_path;
  // pretrain/metrics_first_pass.jsonl: pretrain.loss auto's first run, where it trained twice.
  std::vector<Json> pretrain_first_metrics;
  std::string pretrain_first_metrics_path;
  EarlyModelInfo pretrain_early;
  std::vector<RunResult> runs;     // sorted by index; only results of the current grid
  std::vector<StaleResult> stale;  // results of an earlier grid or filter, by index
  std::string sweep_dir;
  std::vector<std::string> notes;  // "what is missing" lines for the report
};

// Load everything under run_dir (sweep_dir: where the run-<index> directories are). With
// `grid` (the report's config: the pipeline's, scaled.sweep included), a result belongs to
// run <index> of that grid only if its recorded config is that point's (result_keys) and,
// for arms filtered/random, it trained on the present filter.h5; the others go to `stale`.
RunData load_run(const std::string& run_dir, const std::string& sweep_dir,
                 const Config* grid = nullptr);

// Why result `r` is not run r.index of the grid `sweep` over `cfg` ("" when it is);
// `filter_fingerprint` is the present filter.h5's ("" when unknown: not compared).
std::string why_stale(const RunResult& r, const Sweep& sweep, const Config& cfg,
                      const std::string& filter_fingerprint);

// Class name of class k (dataset names when present, else "class k").
std::string class_name(const RunData& d, int64_t k);

}  // namespace sieve::report
