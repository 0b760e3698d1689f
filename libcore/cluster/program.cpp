#include "cluster/program.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <utility>

#include "cluster/calibrate.hpp"
#include "cluster/confusion_count.hpp"
#include "cluster/detect.hpp"
#include "cluster/detectors.hpp"
#include "cluster/filter.hpp"
#include "cluster/inputs.hpp"
#include "cluster/options.hpp"
#include "config/sections.hpp"
#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/lineage.hpp"
#include "io/schemas.hpp"
#include "util/clock.hpp"
#include "util/log.hpp"

namespace sieve::cluster {

namespace {

std::vector<ClassRow> table_of(const std::vector<uint8_t>& flag, const std::vector<int32_t>& lab) {
  std::map<int32_t, ClassRow> rows;
  for (size_t i = 0; i < flag.size(); ++i) {
    ClassRow& r = rows[lab[i]];
    r.cls = lab[i];
    ++r.samples;
    r.noise += flag[i] != 0;
  }
  std::vector<ClassRow> out;
  for (auto& [c, r] : rows) {
    r.removed_pct = r.samples ? 100.0 * double(r.noise) / double(r.samples) : 0.0;
    out.push_back(r);
  }
  return out;
}

template <typename T>
void put(h5::File& f, const std::string& name, const std::vector<T>& v) {
  f.create_dataset<T>(name, {hsize_t(v.size())});
  f.write_rows<T>(name, 0, v.size(), v.data());
}

void write_detector(h5::File& f, const Detection& d, const DetectionScore* s) {
  const std::string g = "/detectors/" + d.method;
  f.create_group(g);
  put(f, g + "/score", d.score);
  put(f, g + "/flag", d.flag);
  f.set_attr(g, "inputs", d.inputs);
  f.set_attr(g, "description", detector(d.method).description);
  int64_t flagged = 0;
  for (auto v : d.flag) flagged += v != 0;
  f.set_attr(g, "flagged", flagged);
  f.set_attr(g, "seconds", d.seconds);
  if (!s) return;
  f.set_attr(g, "precision", s->precision);
  f.set_attr(g, "recall", s->recall);
  f.set_attr(g, "f1", s->f1);
  f.set_attr(g, "average_precision", s->average_precision);
  f.set_attr(g, "auroc", s->auroc);
  f.set_attr(g, "hits", s->hits);
  f.set_attr(g, "truth", s->truth);
  std::vector<float> pr;
  for (const auto& p : s->curve)
    pr.insert(pr.end(), {p.threshold, float(p.precision), float(p.recall)});
  f.create_dataset<float>(g + "/pr", {hsize_t(s->curve.size()), 3});
  if (!s->curve.empty()) f.write_rows<float>(g + "/pr", 0, s->curve.size(), pr.data());
}

// The table a person opens: one row per sample, the most suspicious (by the chosen
// detector's score) first; every detector's score and flag, the given and the suggested
// label (the model's most likely class; empty without probabilities) and whether it is kept.
std::string label_issues_csv(const std::vector<Detection>& dets, const Detection& chosen,
                             const std::vector<int64_t>& ids, const std::vector<int32_t>& labels,
                             const std::vector<int32_t>& suggested,
                             const std::vector<uint8_t>& keep) {
  std::ostringstream os;
  const std::string head = kLabelIssuesHeader;  // ends in a comma: the detectors follow
  os << head.substr(0, head.size() - 1);
  for (const auto& d : dets) os << "," << d.method << "_score," << d.method << "_flag";
  os << ",kept\n";
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return chosen.score[a] > chosen.score[b]; });
  char num[32];
  for (size_t i : order) {
    os << ids[i] << "," << labels[i] << ",";
    if (suggested[i] >= 0) os << suggested[i];
    for (const auto& d : dets) {
      std::snprintf(num, sizeof num, "%.6g", double(d.score[i]));
      os << "," << num << "," << int(d.flag[i]);
    }
    os << "," << int(keep[i]) << "\n";
  }
  return os.str();
}

// The state cluster_filter's phases share: what it reads, the detections made so far and the
// noise-rate estimate they follow.
struct FilterRun {
  ToolContext& ctx;
  FilterOptions opt;
  std::string input, output, dataset, truth, features, dynamics_file, issues_csv;
  int knn_k = 0;
  double knn_threshold = 0, max_flagged = 0, noise_rate = 0;
  Input in;
  lineage::Lineage from;
  std::vector<uint8_t> truth_flags;  // empty: no ground truth
  std::vector<std::string> class_names;  // the dataset file's, for messages; may be empty
  int64_t true_count = 0;
  bool compare = false;
  std::vector<Detection> dets;
  FilterResult clustered;  // of the chosen cluster method, or of the dbscan reference
  bool have_clusters = false;
  NoiseEstimate estimate;
  // This rank's knn neighbour lists, kept for knn_posterior (k = 0: not kept).
  NeighbourLists neighbours;
  // Per class, the counts whose sum the calibrated decisions flag (where: flag_top_overall).
  std::vector<int64_t> flag_counts;
  std::vector<int32_t> suggested;    // the model's most likely class; -1 without probabilities
  bool had_probs = false;
  std::string probs_source;  // in_sample or out_of_fold (cross-fitting); "" for older files
  // The early model's held-out peak accuracy from the dynamics file (NaN: none recorded), and
  // whether its own error is as large as the estimate (log_estimate_in_doubt).
  double heldout_peak = std::numeric_limits<double>::quiet_NaN();
  bool estimate_in_doubt = false;
  // filter.test_bound: the count from the test split's confusion (empty: not estimated) and
  // the cap it put on flag_counts (-1: none).
  bool test_bound = true;
  std::optional<ConfusionCount> confusion;
  int64_t confusion_cap_applied = -1;
  // filter.follows_model_count: the count the test split's magnitude raised flag_counts to
  // where it is plainly below zero (raise_to_follows_model_count; -1: none).
  bool follows_model_count = true;
  int64_t follows_model_raise = -1;
  // The label transition the posteriors read (choose_label_transition) and its source:
  // "test_split" or "confident_joint"; empty before the estimate.
  std::vector<double> transition;
  std::string transition_source;
  // Per class, the test split's own bound where it kept the class under filter.max_flagged
  // (bound_classes_over_max_flagged); -1 elsewhere. Empty: none applied.
  std::vector<int64_t> class_cap_applied;
  std::optional<DynamicsFile> dynamics_read;  // dynamics(): empty until first asked for

  explicit FilterRun(ToolContext& c) : ctx(c), opt(filter_options(c.cfg)) {}
  int64_t flag_total() const {
    return std::accumulate(flag_counts.begin(), flag_counts.end(), int64_t(0));
  }
  bool runs(const DetectorInfo& d) const {
    return d.name == opt.method || (compare && d.reference);
  }
  const Detection* find(const std::string& m) const {
    for (const auto& d : dets)
      if (d.method == m) return &d;
    return nullptr;
  }
  Detection* find_mutable(const std::string& m) {
    return const_cast<Detection*>(std::as_const(*this).find(m));
  }
  // Lineage: every file joined here by sample_id comes from the input's dataset.
  void same_dataset(const std::string& other) {
    h5::File of = h5::File::open(other);
    const std::string fp = lineage::dataset_fingerprint_of(of);
    const bool other_is_dataset =
        of.has_attr("/", "schema") && of.attr_string("/", "schema") == schema::kDataset;
    if (other_is_dataset)
      lineage::require_same_dataset(input, from.dataset_fingerprint, other, fp);
    else
      lineage::require_same_dataset(other, fp, input, from.dataset_fingerprint);
    if (from.dataset_fingerprint.empty()) from.dataset_fingerprint = fp;
    from.inputs.push_back({other, lineage::fingerprint_of(of)});
  }
  // pretrain's dynamics file, read on first use, its dataset checked (and listed) once.
  const DynamicsFile& dynamics() {
    if (!dynamics_read) {
      same_dataset(dynamics_file);
      dynamics_read.emplace(dynamics_file);
    }
    return *dynamics_read;
  }
};

// Flags and config into paths and settings; every usage error before any work.
void resolve_paths(FilterRun& r) {
  ToolContext& ctx = r.ctx;
  const RunPaths paths = run_paths(ctx.cfg);
  auto if_exists = [](const std::string& p) { return std::filesystem::exists(p) ? p : ""; };
  r.input = ctx.path_flag("input", paths.embedding());
  r.output = ctx.path_flag("output", paths.filter());
  r.dataset = ctx.has_flag("input-dataset") ? ctx.flag("input-dataset")
                                            : ctx.cfg.get_string("filter.input_dataset");
  if (r.dataset.empty() || r.dataset[0] != '/') r.dataset = "/" + r.dataset;
  r.truth = ctx.path_flag("truth", if_exists(paths.dataset()), true);
  r.features = ctx.path_flag("features", if_exists(paths.features()), true);
  r.dynamics_file = ctx.path_flag("dynamics", if_exists(paths.dynamics()), true);
  r.knn_k = int(ctx.cfg.get_int("filter.knn.k"));
  r.knn_threshold = ctx.cfg.get_float("filter.knn.threshold");
  r.max_flagged = ctx.cfg.get_float("filter.max_flagged");
  r.noise_rate = ctx.cfg.get_float("filter.noise_rate");
  r.test_bound = ctx.cfg.get_bool("filter.test_bound");
  r.follows_model_count = ctx.cfg.get_bool("filter.follows_model_count");
  if (!detector(r.opt.method).clusters && r.features.empty())
    throw UsageError(cat("filter.method=", r.opt.method, ": needs the features file (",
                         paths.features(), " or --features FILE)"));
  r.issues_csv = label_issues_path(r.output);
}

// The ground truth (/train/noise_truth of the dataset file), aligned to the input's rows.
void read_truth(FilterRun& r) {
  if (r.truth.empty()) return;
  if (r.truth != r.input) r.same_dataset(r.truth);
  h5::File tf = h5::File::open(r.truth);
  if (tf.has_attr("/", "class_names")) r.class_names = tf.attr_strings("/", "class_names");
  if (!tf.exists("/train/noise_truth")) {
    log::infof(r.truth, " has no /train/noise_truth: detectors are not scored");
    return;
  }
  tf.require<uint8_t>("/train/noise_truth", 1);
  tf.require<int64_t>("/train/sample_id", 1);
  r.truth_flags = align_truth(r.in.ids, tf.read_all<int64_t>("/train/sample_id"),
                              tf.read_all<uint8_t>("/train/noise_truth"), r.truth);
  for (auto t : r.truth_flags) r.true_count += t != 0;
}

// The detectors on the embedding (dbscan, gmm, kmeans): the chosen one, and the compared.
void run_cluster_methods(FilterRun& r) {
  for (const DetectorInfo& info : detectors()) {
    if (!info.clusters || !r.runs(info)) continue;
    FilterOptions o = r.opt;
    o.method = info.name;
    const auto t0 = Clock::now();
    FilterResult res = run_filter(r.ctx.comm, r.in.x.data(), r.in.n, r.in.d, r.in.labels.data(), o);
    Detection d;
    d.method = info.name;
    d.inputs = cat(r.dataset == "/embedding" ? "t-SNE embedding" : r.dataset, ", per class");
    d.flag.resize(size_t(r.in.n));
    for (int64_t i = 0; i < r.in.n; ++i) d.flag[size_t(i)] = !res.keep[size_t(i)];
    if (info.name == "dbscan") {
      d.score = core_distance_per_class(r.in.x.data(), r.in.n, r.in.d, r.in.labels.data(),
                                        int(o.dbscan.min_samples));
    } else {
      d.score.assign(d.flag.begin(), d.flag.end());  // decision only: a one-point curve
    }
    d.seconds = seconds_since(t0);
    if (!r.have_clusters || info.name == r.opt.method) {
      r.clustered = std::move(res);
      r.have_clusters = true;
    }
    r.dets.push_back(std::move(d));
  }
}

// Which classes' confident-joint thresholds came from their held-out samples, in one line.
void log_heldout_thresholds(const FilterRun& r) {
  const NoiseEstimate& e = r.estimate;
  constexpr int kListed = 5;  // one line, however many classes
  std::string list;
  int moved = 0;
  for (size_t c = 0; c < e.threshold_from_heldout.size(); ++c) {
    if (!e.threshold_from_heldout[c] || ++moved > kListed) continue;
    char t[16];
    std::snprintf(t, sizeof t, "%.3f", e.threshold[c]);
    list += cat(moved > 1 ? ", " : "", class_and_name(int64_t(c), r.class_names), " ", t);
  }
  if (moved == 0) return;
  if (moved > kListed) list += cat(" and ", moved - kListed, " more");
  log::infof("confident joint: ", moved, " of ", e.classes,
             " classes take their held-out samples' mean self-confidence as threshold, plainly "
             "below their in-sample mean (",
             list, ")");
}

// A caution where the early model's own error is as large as the estimate (estimate_in_doubt),
// with both figures; filter.h5 keeps them (/noise_estimate attrs).
void log_estimate_in_doubt(FilterRun& r) {
  if (r.dynamics_file.empty()) return;
  r.heldout_peak = r.dynamics().heldout_peak();
  const double share = double(r.estimate.total()) / double(r.in.n);
  r.estimate_in_doubt = estimate_in_doubt(r.heldout_peak, share);
  // A given rate replaces the count; a cap from the test split (apply_confusion_cap) has
  // replaced it with an estimate that does not rest on the model's own mistakes; where the
  // labels follow the model's confusions, its caution says more.
  const bool said = r.confusion && labels_follow_model(*r.confusion);
  if (!r.estimate_in_doubt || r.noise_rate > 0 || r.confusion_cap_applied >= 0 || said) return;
  char line[160];
  std::snprintf(line, sizeof line,
                "the early model misses %.1f %% of its held-out samples' labels at its best "
                "epoch, %.1f %% more than the %.1f %% estimated wrong",
                100.0 * (1.0 - r.heldout_peak), 100.0 * own_error_share(r.heldout_peak, share),
                100.0 * share);
  log::infof("caution: ", line,
             ": its own mistakes are as many as the wrong labels it estimates, and the count may "
             "be far off either way (by a quarter or more on most such runs measured, "
             "docs/detection.md); set filter.noise_rate where the rate is known");
}

// filter.test_bound: the wrong labels the early model's confusion on the test split implies
// (confusion_count.hpp), from the held-out samples' predictions (the suggested labels) and the
// test split's. In-sample probabilities only: out of fold, the held-out rows' model is not the
// test split's. Nothing where the features file has no test probabilities.
void estimate_from_confusion(FilterRun& r, const std::vector<uint8_t>& heldout, int classes) {
  const TestPredictions test = read_test_predictions(r.ctx.comm, r.features, classes);
  if (test.label.empty()) return;
  ConfusionSamples s;
  s.classes = classes;
  s.test_label = test.label;
  s.test_predicted = test.predicted;
  for (size_t i = 0; i < heldout.size(); ++i) {
    if (!heldout[i]) continue;
    s.heldout_label.push_back(r.in.labels[i]);
    s.heldout_predicted.push_back(r.suggested[i]);
  }
  r.confusion = count_from_confusion(s, r.estimate.class_size, r.opt.seed);
}

// filter.follows_model_count: where the test split's count is plainly below zero
// (labels_follow_model), its magnitude is the count. Why: where the model predicts the given
// label of the flips it follows, the held-out samples of the class that lost them agree with
// their label more often than that class's test samples with theirs (the test split, clean,
// shows the same images predicted as the other class), and the linear estimator counts that
// agreement as wrong labels below zero: as many as the flips where the model follows all of
// them and errs nowhere else (test_cluster_confusion). On every stored Fashion-MNIST run with
// instance-dependent noise it was 0.66-1.04x the wrong labels where the joint and the vote
// counted 0.14-0.30x (docs/detection.md, thirty-first session). It only raises, per class
// within filter.max_flagged (counts_raised_within_limit); the score says which samples.
void raise_to_follows_model_count(FilterRun& r) {
  if (!r.follows_model_count || r.flag_counts.empty()) return;
  const auto mirrored = int64_t(std::llround(-r.confusion->wrong));
  if (mirrored <= r.flag_total()) return;
  r.flag_counts =
      counts_raised_within_limit(mirrored, r.flag_counts, r.estimate.class_size, r.max_flagged);
  r.follows_model_raise = r.flag_total();
}

// The label transition the posteriors read (label_transition): the test split's joint where
// its estimate is precise (test_split_joint: the model's own mistakes on hard clean images
// taken out of the flip routes), else the confident joint's, as before the thirty-first session.
void choose_label_transition(FilterRun& r) {
  const std::vector<double> joint =
      r.confusion ? test_split_joint(*r.confusion, r.estimate.class_size) : std::vector<double>();
  r.transition_source = joint.empty() ? "confident_joint" : "test_split";
  r.transition =
      joint.empty() ? label_transition(r.estimate) : label_transition(joint, r.estimate.classes);
  if (!joint.empty())
    log::infof(
        "the posteriors read the label transition from the test split's count (its two "
        "standard errors within ",
        int(100 * kTransitionPrecision),
        " % of it), not the confident joint's, whose flip routes hold the model's own "
        "mistakes too (filter.test_bound)");
}

// The test split's count (estimate_from_confusion) in one line, and the cap it puts on the
// calibrated decisions' count where it plainly says fewer are wrong (confusion_cap), the
// per-class counts scaled down alike (counts_for_rate). A known filter.noise_rate replaces
// the count, so nothing is capped then.
void apply_confusion_cap(FilterRun& r) {
  if (!r.confusion) return;
  const ConfusionCount& c = *r.confusion;
  if (!c.usable) {
    log::infof("test split's count: none (", c.why_not, ")");
    return;
  }
  const std::optional<int64_t> cap = confusion_cap(c);
  char figures[96];
  // Signed: plainly below zero says the labels follow the model (labels_follow_model). "SE",
  // not spelt out: a line with "error" in it reads as a failure to whoever greps the log (the
  // bench's failure reason did, naming this line instead of the refusal).
  std::snprintf(figures, sizeof figures, "%.0f +- %.0f", c.wrong, 2.0 * c.standard_error);
  log::infof(
      "test split's count: ", figures,
      " wrong labels (2 bootstrap SE), from the early model's confusion on the ", c.test,
      " test samples (labels taken as clean) against its ", c.heldout,
      " held-out samples, if the noise depends on the class and not the image",
      cap ? std::string() : std::string("; no shift plainly above zero, so it bounds nothing"));
  if (labels_follow_model(c) && r.noise_rate == 0) {
    const int64_t counted = r.flag_total();
    raise_to_follows_model_count(r);
    log::infof(
        "caution: the held-out samples agree with their given labels more often than the "
        "test samples with their clean ones, so the wrong labels, if any, follow the "
        "model's own confusions (instance-dependent noise; or the test split is harder "
        "than the training data), which no count from its beliefs can see: ",
        r.follows_model_raise >= 0
            ? cat("the calibrated decisions flag ", r.follows_model_raise,
                  ", as many as the test split's count is below zero, not the ", counted,
                  " the confident joint and the knn vote count (filter.follows_model_count; "
                  "where the test split is harder instead, these are hard clean samples)")
            : cat("the ", counted, " flagged may be far fewer than the wrong labels"),
        "; set filter.noise_rate where the rate is known (docs/detection.md)");
  }
  if (!cap || r.noise_rate > 0 || r.flag_total() <= *cap) return;
  const int64_t counted = r.flag_total();
  r.flag_counts =
      counts_for_rate(double(*cap) / double(r.in.n), r.flag_counts, r.estimate.class_size);
  r.confusion_cap_applied = *cap;
  log::infof("the calibrated decisions flag at most that estimate plus 2 SE, ", *cap, ", not the ",
             counted, " the confident joint and the knn vote count (filter.test_bound)");
}

// A class whose count alone would take it past filter.max_flagged, and so refuse the run, is
// bounded by the test split's count for its label where that plainly says fewer are wrong: its
// estimate plus two of its standard errors, under the limit. Why: the confident joint and the
// vote count the model's own mistakes on the class's hard clean images with its flips, and a
// small or hard class is where those are a large share of it (a long tail under symmetric
// 20 %: the twenty-fourth session's default counted Shirt 812 of 1,573 wrong where 518 were,
// and the run was refused; docs/detection.md). Where the
// test split agrees that over the limit are wrong, or sees no shift, or the labels follow the
// model's confusions (which it cannot see), the count stands and so does the refusal.
void bound_classes_over_max_flagged(FilterRun& r) {
  if (!r.confusion || !r.confusion->usable || labels_follow_model(*r.confusion) || r.noise_rate > 0)
    return;
  for (size_t c = 0; c < r.flag_counts.size(); ++c) {
    const int64_t size = r.estimate.class_size[c];
    const auto limit = int64_t(std::floor(r.max_flagged * double(size)));
    if (r.flag_counts[c] <= limit) continue;
    const std::optional<int64_t> bound = label_confusion_cap(*r.confusion, int32_t(c));
    if (!bound || *bound > limit) continue;
    if (r.class_cap_applied.empty()) r.class_cap_applied.assign(r.flag_counts.size(), -1);
    r.class_cap_applied[c] = *bound;
    char figures[64];
    std::snprintf(figures, sizeof figures, "%.0f +- %.0f", r.confusion->wrong_by_label[c],
                  2.0 * r.confusion->standard_error_by_label[c]);
    log::infof(class_and_name(int64_t(c), r.class_names), ": counted ", r.flag_counts[c], " of ",
               size, " wrong, past filter.max_flagged = ", r.max_flagged,
               "; the test split's count for its label is ", figures,
               " (2 bootstrap SE), so the calibrated decisions flag at most ", *bound,
               " of it (filter.test_bound)");
    r.flag_counts[c] = *bound;
  }
}

// The detectors on pretrain's features and probabilities (knn, confident), the confident
// joint's noise estimate, and the suggested labels.
void run_feature_detectors(FilterRun& r) {
  const DetectorInfo& chosen = detector(r.opt.method);
  const DetectorInfo& consensus = detector("consensus");
  const bool want_knn_posterior = r.runs(detector("knn_posterior")) || r.runs(consensus);
  const bool want_knn = r.runs(detector("knn")) || want_knn_posterior;
  const bool want_confident =
      r.runs(detector("confident")) || r.runs(detector("posterior")) || want_knn_posterior;
  // The features and probabilities are row-distributed (inputs.hpp); only what a detector
  // that runs needs is read.
  FeatureShares fin;
  if (!r.features.empty() && (want_knn || want_confident)) {
    if (r.features != r.input) r.same_dataset(r.features);
    fin = read_feature_shares(r.ctx.comm, r.features, r.in.ids, r.in.labels, want_knn,
                              want_confident);
  }
  if (chosen.needs_features && fin.feats.width == 0)
    throw UsageError(cat(r.features, ": no /train/features for filter.method=", r.opt.method));
  if (chosen.needs_dynamics && r.dynamics_file.empty())
    throw UsageError(cat("filter.method=", r.opt.method, ": needs pretrain's training dynamics (",
                         run_paths(r.ctx.cfg).dynamics(),
                         " or --dynamics FILE; pretrain.dynamics: true)"));
  if (chosen.needs_probs && fin.probs.width == 0)
    throw UsageError(cat(r.features, ": no /train/probs for filter.method=", r.opt.method,
                         " (written by extract_features)"));
  if (want_knn && fin.feats.width > 0) {
    const auto t0 = Clock::now();
    KnnSearch search;
    if (want_knn_posterior) search.lists = &r.neighbours.lists;
    r.dets.push_back(detect_knn_vote(r.ctx.comm, fin.feats, r.in.n, r.in.labels.data(), r.knn_k,
                                     r.knn_threshold, kKnnPieceBytes, search));
    r.dets.back().seconds = seconds_since(t0);
    if (want_knn_posterior) {
      r.neighbours.rows = fin.feats.rows;  // the lists' order (the inverted file reorders)
      r.neighbours.k = r.knn_k;
    }
    fin.feats = RowShare();  // the largest input: free it for the rest
  }
  // The suggested label: the class the model finds most likely; -1 without probabilities.
  r.had_probs = fin.probs.width > 0;
  r.suggested = r.had_probs ? most_likely_class(r.ctx.comm, fin.probs, r.in.n)
                            : std::vector<int32_t>(size_t(r.in.n), -1);
  if (r.had_probs) {
    // Out-of-fold probabilities (pretrain.folds) move the noise estimate (docs/detection.md):
    // the log and filter.h5 say which kind the decisions followed.
    r.probs_source = fin.probs_source;
    log::infof(
        "class probabilities of ", r.features, ": ",
        r.probs_source.empty() ? std::string("in sample (no probs_source)") : r.probs_source);
  }
  if (want_confident && r.had_probs) {
    // In-sample probabilities: the samples pretrain held out say what a class's self-
    // confidence is on samples not trained as that class (detect.hpp). Out of fold, every
    // row is such a sample already.
    std::vector<uint8_t> heldout;
    if (!r.dynamics_file.empty() && r.probs_source != "out_of_fold")
      heldout = r.dynamics().heldout_of(r.in.ids);
    const auto t0 = Clock::now();
    r.dets.push_back(detect_confident(r.ctx.comm, fin.probs, r.in.n, r.in.labels.data(),
                                      &r.estimate, heldout.empty() ? nullptr : heldout.data()));
    r.dets.back().seconds = seconds_since(t0);
    log_heldout_thresholds(r);
    if (r.test_bound && !heldout.empty()) estimate_from_confusion(r, heldout, fin.probs.width);
    if (!r.estimate.empty()) choose_label_transition(r);
    if (!r.estimate.empty() && (r.runs(detector("posterior")) || r.runs(consensus))) {
      const auto t1 = Clock::now();
      r.dets.push_back(
          detect_posterior(r.ctx.comm, fin.probs, r.in.n, r.in.labels.data(), r.transition));
      r.dets.back().seconds = seconds_since(t1);  // its flags follow the counts, below
    }
    if (!r.estimate.empty() && r.neighbours.k > 0) {
      const auto t1 = Clock::now();
      r.dets.push_back(detect_knn_posterior(r.ctx.comm, r.neighbours, r.in.n, r.in.labels.data(),
                                            r.transition, r.estimate.classes));
      r.dets.back().seconds = seconds_since(t1);  // its flags follow the counts, below
    }
  }
  r.neighbours = NeighbourLists();  // 48 bytes a row at k = 10: not kept past their use
  if (r.compare && !r.had_probs)
    log::infof("no class probabilities in ", r.features.empty() ? "(no features file)" : r.features,
               ": the confident and consensus detectors are not compared");
}

// filter.noise_rate: the user's share of wrong labels replaces the estimated amount
// (counts_for_rate: the estimate's per-class counts kept, the rest spread by class size; those
// counts bound each class, the score says where, flag_top_overall).
void apply_known_noise_rate(FilterRun& r) {
  const size_t k = size_t(*std::max_element(r.in.labels.begin(), r.in.labels.end())) + 1;
  std::vector<int64_t> size(std::max(k, r.flag_counts.size()), 0);
  for (int32_t y : r.in.labels) ++size[size_t(y)];
  const std::vector<int64_t> estimated = r.flag_counts;
  r.flag_counts = counts_for_rate(
      r.noise_rate, estimated.empty() ? std::vector<int64_t>(size.size(), 0) : estimated, size);
  log::infof("filter.noise_rate ", r.noise_rate, ": the ranked decisions flag ", r.flag_total(),
             " of ", r.in.labels.size(), " samples",
             estimated.empty()
                 ? std::string(" (no estimate; the highest-scored over all classes)")
                 : cat(" (the data's estimate: ",
                       std::accumulate(estimated.begin(), estimated.end(), int64_t(0)),
                       "; the highest-scored over all classes, none past "
                       "filter.max_flagged where its share of the rate was not)"));
}

// A ranked detector's flags: the highest-scored over all classes, as many as the calibrated
// counts say (flag_top_overall); without counts (no class probabilities), the samples scored
// above `above`.
std::vector<uint8_t> ranked_flags(const FilterRun& r, const std::vector<float>& score,
                                  float above) {
  if (!r.flag_counts.empty())
    return flag_top_overall(score, r.in.labels.data(), r.flag_counts, r.max_flagged,
                            r.class_cap_applied);
  std::vector<uint8_t> flag(score.size());
  for (size_t i = 0; i < score.size(); ++i) flag[i] = score[i] > above;
  return flag;
}

// Training dynamics: the negated area under the margin (NaN: no epoch recorded; held-out
// samples have one from evaluation in files written since they are recorded). Returns the
// scores with their NaNs for the consensus (empty where no dynamics were read).
std::vector<float> run_dynamics_detector(FilterRun& r) {
  std::vector<float> neg_aum;
  if (r.dynamics_file.empty() || !(r.runs(detector("dynamics")) || r.runs(detector("consensus"))))
    return neg_aum;
  const auto t0 = Clock::now();
  neg_aum = r.dynamics().aum_of(r.in.ids);
  for (auto& v : neg_aum) v = -v;
  Detection d;
  d.method = "dynamics";
  d.inputs = detector("dynamics").looks_at;
  d.score = neg_aum;
  // Unrecorded samples score the median (neither suspicious nor clean) so that the
  // detector ranks every sample; the consensus leaves them out of this score instead.
  std::vector<float> finite;
  for (float v : neg_aum)
    if (!std::isnan(v)) finite.push_back(v);
  std::nth_element(finite.begin(), finite.begin() + finite.size() / 2, finite.end());
  const float median = finite.empty() ? 0.0f : finite[finite.size() / 2];
  for (auto& v : d.score)
    if (std::isnan(v)) v = median;
  d.flag = ranked_flags(r, d.score, 0.0f);  // else AUM < 0
  d.seconds = seconds_since(t0);            // reading the margins included: its input is the file
  r.dets.push_back(std::move(d));
  return neg_aum;
}

// The training-dynamics and posterior detectors and the consensus of the scores, all flagging
// their highest-scored samples over all classes, as many as the noise estimate says, per class
// or the knn vote where it flags more (combined_counts), in all (flag_top_overall).
void run_ranked_detectors(FilterRun& r) {
  const DetectorInfo& consensus = detector("consensus");
  if (!r.estimate.empty()) {
    const Detection* knn = r.find("knn");
    r.flag_counts = knn ? combined_counts(r.estimate.per_class, knn->flag, r.in.labels.data())
                        : r.estimate.per_class;
    log::infof("estimated wrong labels (confident joint): ", r.estimate.total(), " of ", r.in.n,
               " (", 100.0 * double(r.estimate.total()) / double(r.in.n), " %)",
               r.truth_flags.empty() ? std::string() : cat("; ground truth: ", r.true_count));
    apply_confusion_cap(r);
    bound_classes_over_max_flagged(r);
    log_estimate_in_doubt(r);
  }
  if (r.noise_rate > 0) apply_known_noise_rate(r);
  const std::vector<float> neg_aum = run_dynamics_detector(r);
  // The posteriors run only where the confident joint gave an estimate, so their counts exist.
  for (const char* name : {"posterior", "knn_posterior"})
    if (Detection* d = r.find_mutable(name)) {
      const auto t0 = Clock::now();
      d->flag = flag_top_overall(d->score, r.in.labels.data(), r.flag_counts, r.max_flagged,
                                 r.class_cap_applied);
      d->seconds += seconds_since(t0);
    }
  // The features and the probabilities enter read through the label transition (both run
  // wherever the consensus and probabilities do): a disagreement counts by how often the
  // other class's samples carry the label, where the plain vote and confident learning's
  // margin weigh every other class alike.
  if (r.runs(consensus) && r.find("knn_posterior") && r.find("posterior")) {
    Detection d;
    d.method = "consensus";
    d.inputs = consensus.looks_at;
    std::vector<const std::vector<float>*> scores = {&r.find("knn_posterior")->score,
                                                     &r.find("posterior")->score};
    if (!neg_aum.empty()) scores.push_back(&neg_aum);
    const auto t0 = Clock::now();
    d.score = rank_average(scores);
    d.flag = flag_top_overall(d.score, r.in.labels.data(), r.flag_counts, r.max_flagged,
                              r.class_cap_applied);
    d.seconds = seconds_since(t0);
    r.dets.push_back(std::move(d));
  }
  if (!r.estimate.empty() && r.noise_rate == 0)
    log::infof("calibrated decisions flag the ", r.flag_total(), " highest-scored samples (",
               r.confusion_cap_applied >= 0 ? std::string("the test split's cap")
               : r.follows_model_raise >= 0
                   ? std::string("the test split's count below zero, its magnitude")
                   : std::string("the sum over classes of the larger of the joint's estimate "
                                 "and the knn vote's count"),
               "; the score says which classes, none past filter.max_flagged where its own count "
               "was not)");
}

// What the chosen detector's flags make of the data: the keep mask, the per-class table, the
// random control removing as many per class, and the cluster ids.
struct Decision {
  const Detection* chosen = nullptr;
  std::vector<uint8_t> keep, random_keep;
  std::vector<ClassRow> table;
  std::vector<int32_t> cluster_ids;
};

Decision decide(const FilterRun& r) {
  Decision dec;
  dec.chosen = r.find(r.opt.method);
  SIEVE_CHECK(dec.chosen, "filter.method=", r.opt.method, ": detector did not run");
  // filter.max_flagged: the chosen detector may not empty a class; a compared one that would
  // is reported, and its figures stay in the table.
  for (const auto& d : r.dets) {
    const std::string why =
        over_max_flagged(d.method, d.flag, r.in.labels.data(), r.max_flagged, r.class_names);
    if (why.empty()) continue;
    if (&d == dec.chosen) throw UsageError(why);
    log::infof("note: ", why);
  }
  const int64_t n = r.in.n;
  dec.keep.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) dec.keep[size_t(i)] = !dec.chosen->flag[size_t(i)];
  const bool method_clusters = detector(r.opt.method).clusters;
  dec.table = method_clusters ? r.clustered.table : table_of(dec.chosen->flag, r.in.labels);
  dec.random_keep = random_keep_mask(r.in.labels.data(), n, dec.table, r.opt.seed);
  dec.cluster_ids = r.have_clusters ? r.clustered.cluster : std::vector<int32_t>();
  if (!method_clusters) {  // no clusters: -1 marks the flagged samples, 0 the kept ones
    dec.cluster_ids.assign(size_t(n), 0);
    for (int64_t i = 0; i < n; ++i)
      if (!dec.keep[size_t(i)]) dec.cluster_ids[size_t(i)] = -1;
  }
  int64_t removed = 0;
  for (auto k : dec.keep) removed += !k;
  log::infof("detector ", r.opt.method, ": ", removed, " of ", n, " samples flagged as noise (",
             100.0 * double(removed) / double(n), " %)");
  log::info("per-class table:\n" + format_table(dec.table));
  return dec;
}

// Every detector against the ground truth (empty without one). A truth that marks no sample
// (a dataset whose label_noise rate is 0) leaves recall, AP and AUROC undefined: the
// detectors are then not scored, rather than written as zeros a reader takes for "found
// nothing", and the log says what each flag is.
std::vector<DetectionScore> score_all(const FilterRun& r) {
  std::vector<DetectionScore> scores;
  if (r.truth_flags.empty()) return scores;
  if (r.true_count == 0) {
    log::infof("ground truth: no sample of ", r.truth,
               " carries injected noise, so the detectors are not scored (every flag is a "
               "false alarm)");
    return scores;
  }
  for (const auto& d : r.dets) {
    scores.push_back(score_detection(d, r.truth_flags));
    const auto& s = scores.back();
    log::infof("detector ", d.method, " vs ground truth: precision ", s.precision, ", recall ",
               s.recall, ", F1 ", s.f1, ", average precision ", s.average_precision, ", AUROC ",
               s.auroc, " (", s.hits, " of ", s.flagged, " flagged are noise; ", s.truth,
               " noisy; ", log::format_duration(d.seconds), ")");
  }
  return scores;
}

void write_per_class(h5::File& f, const std::vector<ClassRow>& table) {
  f.create_group("/per_class");
  std::vector<int32_t> cls;
  std::vector<int64_t> samples, clusters, noise;
  std::vector<double> pct;
  for (const auto& row : table) {
    cls.push_back(row.cls);
    samples.push_back(row.samples);
    clusters.push_back(row.clusters);
    noise.push_back(row.noise);
    pct.push_back(row.removed_pct);
  }
  put(f, "/per_class/class", cls);
  put(f, "/per_class/samples", samples);
  put(f, "/per_class/clusters", clusters);
  put(f, "/per_class/noise", noise);
  put(f, "/per_class/removed_pct", pct);
}

// The noise rate the calibrated decisions follow, beside the truth where it exists.
void write_noise_estimate(h5::File& f, const FilterRun& r) {
  const NoiseEstimate& e = r.estimate;
  if (e.empty()) return;
  f.create_group("/noise_estimate");
  put(f, "/noise_estimate/per_class", e.per_class);
  put(f, "/noise_estimate/class_size", e.class_size);
  put(f, "/noise_estimate/threshold", e.threshold);
  put(f, "/noise_estimate/threshold_from_heldout", e.threshold_from_heldout);
  f.create_dataset<int64_t>("/noise_estimate/confident_joint",
                            {hsize_t(e.classes), hsize_t(e.classes)});
  f.write_rows<int64_t>("/noise_estimate/confident_joint", 0, size_t(e.classes), e.joint.data());
  if (!r.transition.empty()) {  // what the posteriors read, and from which joint
    f.create_dataset<double>("/noise_estimate/label_transition",
                             {hsize_t(e.classes), hsize_t(e.classes)});
    f.write_rows<double>("/noise_estimate/label_transition", 0, size_t(e.classes),
                         r.transition.data());
    f.set_attr("/noise_estimate", "transition_source", r.transition_source);
  }
  f.set_attr("/noise_estimate", "total", e.total());
  // What the calibrated detectors flagged per class (the estimate, or the knn vote's count).
  put(f, "/noise_estimate/flag_counts", r.flag_counts);
  f.set_attr("/noise_estimate", "flag_total", r.flag_total());
  f.set_attr("/noise_estimate", "noise_rate", r.noise_rate);  // 0: the amount was estimated
  if (!std::isnan(r.heldout_peak)) {
    f.set_attr("/noise_estimate", "heldout_peak_accuracy", r.heldout_peak);
    f.set_attr("/noise_estimate", "in_doubt", int64_t(r.estimate_in_doubt));
  }
  if (r.confusion && r.confusion->usable) {
    f.set_attr("/noise_estimate", "test_split_wrong", r.confusion->wrong);
    f.set_attr("/noise_estimate", "test_split_standard_error", r.confusion->standard_error);
    f.set_attr("/noise_estimate", "test_split_cap", r.confusion_cap_applied);
    f.set_attr("/noise_estimate", "test_split_raise", r.follows_model_raise);
    f.set_attr("/noise_estimate", "test_split_follows_model",
               int64_t(labels_follow_model(*r.confusion)));
    put(f, "/noise_estimate/test_split_wrong_by_label", r.confusion->wrong_by_label);
    put(f, "/noise_estimate/test_split_standard_error_by_label",
        r.confusion->standard_error_by_label);
    if (!r.class_cap_applied.empty())
      put(f, "/noise_estimate/test_split_class_cap", r.class_cap_applied);
  }
  if (!r.truth_flags.empty()) f.set_attr("/noise_estimate", "truth", r.true_count);
}

// filter.h5 (sieve.filter/1, docs/formats.md) into `path`.
void write_filter_file(const std::string& path, const FilterRun& r, const Decision& dec,
                       const std::vector<DetectionScore>& scores) {
  const FilterOptions& opt = r.opt;
  h5::File f = h5::File::create(path);
  put(f, "/cluster", dec.cluster_ids);
  put(f, "/keep", dec.keep);
  put(f, "/random_keep", dec.random_keep);
  put(f, "/sample_id", r.in.ids);
  put(f, "/labels", r.in.labels);
  if (r.had_probs) put(f, "/suggested_label", r.suggested);  // the model's most likely class
  write_per_class(f, dec.table);
  write_noise_estimate(f, r);
  f.create_group("/detectors");
  std::vector<std::string> names;
  for (size_t k = 0; k < r.dets.size(); ++k) {
    write_detector(f, r.dets[k], scores.empty() ? nullptr : &scores[k]);
    names.push_back(r.dets[k].method);
  }
  f.set_attr("/", "detectors", names);  // the groups under /detectors, in run order
  f.set_attr("/", "method", opt.method);
  f.set_attr("/", "eps", r.have_clusters ? r.clustered.eps : 0.0);
  f.set_attr("/", "eps_auto", int64_t(r.have_clusters && opt.auto_eps));
  f.set_attr("/", "min_samples", opt.dbscan.min_samples);
  f.set_attr("/", "per_class", int64_t(opt.per_class));
  f.set_attr("/", "input", r.input);
  f.set_attr("/", "input_dataset", r.dataset);
  f.set_attr("/", "features", r.features);
  f.set_attr("/", "probs_source", r.probs_source);
  f.set_attr("/", "dynamics", r.dynamics_file);
  if (opt.method == "knn") {
    f.set_attr("/", "knn_k", int64_t(r.knn_k));
    f.set_attr("/", "knn_threshold", r.knn_threshold);
  }
  if (opt.method == "gmm") f.set_attr("/", "log_likelihood", r.clustered.log_likelihood);
  for (size_t k = 0; k < scores.size(); ++k) {
    if (r.dets[k].method != opt.method) continue;
    f.set_attr("/", "noise_precision", scores[k].precision);
    f.set_attr("/", "noise_recall", scores[k].recall);
    f.set_attr("/", "noise_f1", scores[k].f1);
  }
  h5::stamp(f, schema::kFilter, r.ctx.cfg.to_yaml());
  lineage::stamp_derived(f, schema::kFilter, r.ctx.cfg.to_yaml(), r.from);
  f.close();
}

}  // namespace

void add_filter_flags(po::options_description& o) {
  o.add_options()("input,i", po::value<std::string>(),
                  "embedding file (default: run.dir/embedding.h5)")(
      "input-dataset", po::value<std::string>(),
      "float [N,d] dataset to cluster (default: filter.input_dataset)")(
      "dynamics", po::value<std::string>(),
      "training dynamics (pretrain's per-epoch margins) for the dynamics detector and the "
      "consensus (default: run.dir/pretrain/dynamics.h5 when it exists)")(
      "features", po::value<std::string>(),
      "features file with /train/features and /train/probs for the knn and confident "
      "detectors (default: run.dir/features.h5 when it exists)")(
      "output,o", po::value<std::string>(), "filter file (default: run.dir/filter.h5)")(
      "truth", po::value<std::string>(),
      "dataset file with /train/noise_truth and /train/sample_id (default: run.dir/dataset.h5 "
      "when it exists)");
}

void cluster_filter_main(ToolContext& ctx) {
  FilterRun r(ctx);
  resolve_paths(r);
  AtomicOutput out(r.output, ctx.overwrite, ctx.comm);  // fails before any work
  check_output_path(r.issues_csv, ctx.overwrite, schema::kLabelIssues);
  check_resolved_config_path(config_sidecar_path(r.output));

  r.in = read_input(r.input, r.dataset);
  log::infof("read ", r.in.n, " points of dimension ", r.in.d, " from ", r.input, ":", r.dataset);
  r.from = lineage::lineage_of(r.input);
  read_truth(r);
  r.compare = !r.truth_flags.empty() && ctx.cfg.get_bool("filter.compare");

  run_cluster_methods(r);
  run_feature_detectors(r);
  run_ranked_detectors(r);
  const Decision dec = decide(r);
  const std::vector<DetectionScore> scores = score_all(r);

  on_root_agreed(ctx.comm, [&] {
    write_filter_file(out.tmp_path(), r, dec, scores);
    write_text_atomic(r.issues_csv, label_issues_csv(r.dets, *dec.chosen, r.in.ids, r.in.labels,
                                                     r.suggested, dec.keep));
    write_resolved_config(config_sidecar_path(r.output), ctx.cfg.to_yaml());
  });
  out.commit();
  log::infof("wrote ", r.output, " and ", r.issues_csv);
}

}  // namespace sieve::cluster
