#include "cluster/program.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <numeric>
#include <cstdio>
#include <map>

#include "cluster/calibrate.hpp"
#include "cluster/detect.hpp"
#include "cluster/detectors.hpp"
#include "cluster/filter.hpp"
#include "cluster/inputs.hpp"
#include "config/sections.hpp"
#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/lineage.hpp"
#include "io/schemas.hpp"
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
  const RunPaths paths = run_paths(ctx.cfg);
  auto path_flag = [&](const char* name, const std::string& def, bool must_exist) {
    std::string v = ctx.flag(name);
    if (!v.empty() && must_exist && !std::filesystem::exists(v))
      throw UsageError(cat("--", name, " ", v, ": no such file"));
    return v.empty() ? def : v;
  };
  const std::string input = path_flag("input", paths.embedding(), false);
  const std::string output = path_flag("output", paths.filter(), false);
  std::string dataset = ctx.has_flag("input-dataset") ? ctx.flag("input-dataset")
                                                      : ctx.cfg.get_string("filter.input_dataset");
  if (dataset.empty() || dataset[0] != '/') dataset = "/" + dataset;
  const std::string truth =
      path_flag("truth", std::filesystem::exists(paths.dataset()) ? paths.dataset() : "", true);
  const std::string features = path_flag(
      "features", std::filesystem::exists(paths.features()) ? paths.features() : "", true);
  const std::string dynamics_file = path_flag(
      "dynamics", std::filesystem::exists(paths.dynamics()) ? paths.dynamics() : "", true);
  FilterOptions opt = filter_options(ctx.cfg);
  const DetectorInfo& chosen_info = detector(opt.method);
  const int knn_k = int(ctx.cfg.get_int("filter.knn.k"));
  const double knn_threshold = ctx.cfg.get_float("filter.knn.threshold");
  const double max_flagged = ctx.cfg.get_float("filter.max_flagged");
  const bool method_clusters = chosen_info.clusters;
  if (!method_clusters && features.empty())
    throw UsageError(cat("filter.method=", opt.method, ": needs the features file (",
                         paths.features(), " or --features FILE)"));
  AtomicOutput out(output, ctx.overwrite, ctx.comm);  // fails before any work
  const std::string issues_csv = label_issues_path(output);
  check_output_path(issues_csv, ctx.overwrite, schema::kLabelIssues);
  check_resolved_config_path(config_sidecar_path(output));

  Input in = read_input(input, dataset);
  log::infof("read ", in.n, " points of dimension ", in.d, " from ", input, ":", dataset);
  // Lineage: every file joined here by sample_id comes from the input's dataset.
  lineage::Lineage from = lineage::lineage_of(input);
  auto same_dataset = [&](const std::string& other) {
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
  };

  std::vector<uint8_t> truth_flags;
  if (!truth.empty()) {
    if (truth != input) same_dataset(truth);
    h5::File tf = h5::File::open(truth);
    if (tf.exists("/train/noise_truth")) {
      tf.require<uint8_t>("/train/noise_truth", 1);
      tf.require<int64_t>("/train/sample_id", 1);
      truth_flags = align_truth(in.ids, tf.read_all<int64_t>("/train/sample_id"),
                                tf.read_all<uint8_t>("/train/noise_truth"), truth);
    } else {
      log::infof(truth, " has no /train/noise_truth: detectors are not scored");
    }
  }
  const bool compare = !truth_flags.empty() && ctx.cfg.get_bool("filter.compare");
  int64_t true_count = 0;
  for (auto t : truth_flags) true_count += t != 0;
  auto runs = [&](const DetectorInfo& d) {
    return d.name == opt.method || (compare && d.reference);
  };
  const DetectorInfo &knn_info = detector("knn"), &confident_info = detector("confident"),
                     &consensus_info = detector("consensus");
  const bool want_knn = runs(knn_info) || runs(consensus_info);
  const bool want_confident = runs(confident_info) || runs(consensus_info);
  // The features and probabilities are row-distributed (inputs.hpp); only what a detector
  // that runs needs is read.
  FeatureShares fin;
  if (!features.empty() && (want_knn || want_confident)) {
    if (features != input) same_dataset(features);
    fin = read_feature_shares(ctx.comm, features, in.ids, in.labels, want_knn, want_confident);
  }

  // The detectors to run: the chosen one, and with ground truth the reference set.
  std::vector<Detection> dets;
  FilterResult clustered;  // of the chosen cluster method, or of the dbscan reference
  bool have_clusters = false;
  auto run_cluster_method = [&](const std::string& method) {
    FilterOptions o = opt;
    o.method = method;
    FilterResult r = run_filter(ctx.comm, in.x.data(), in.n, in.d, in.labels.data(), o);
    Detection d;
    d.method = method;
    d.inputs = cat(dataset == "/embedding" ? "t-SNE embedding" : dataset, ", per class");
    d.flag.resize(size_t(in.n));
    for (int64_t i = 0; i < in.n; ++i) d.flag[size_t(i)] = !r.keep[size_t(i)];
    if (method == "dbscan") {
      d.score = core_distance_per_class(in.x.data(), in.n, in.d, in.labels.data(),
                                        int(o.dbscan.min_samples));
    } else {
      d.score.assign(d.flag.begin(), d.flag.end());  // decision only: a one-point curve
    }
    if (!have_clusters || method == opt.method) {
      clustered = std::move(r);
      have_clusters = true;
    }
    dets.push_back(std::move(d));
  };
  for (const DetectorInfo& d : detectors())
    if (d.clusters && runs(d)) run_cluster_method(d.name);
  if (chosen_info.needs_features && fin.feats.width == 0)
    throw UsageError(cat(features, ": no /train/features for filter.method=", opt.method));
  if (chosen_info.needs_dynamics && dynamics_file.empty())
    throw UsageError(cat("filter.method=", opt.method, ": needs pretrain's training dynamics (",
                         paths.dynamics(), " or --dynamics FILE; pretrain.dynamics: true)"));
  if (chosen_info.needs_probs && fin.probs.width == 0)
    throw UsageError(cat(features, ": no /train/probs for filter.method=", opt.method,
                         " (written by extract_features)"));
  if (want_knn && fin.feats.width > 0) {
    dets.push_back(
        detect_knn_vote(ctx.comm, fin.feats, in.n, in.labels.data(), knn_k, knn_threshold));
    fin.feats = RowShare();  // the largest input: free it for the rest
  }
  // The suggested label: the class the model finds most likely (each rank its rows).
  std::vector<int32_t> suggested(size_t(in.n), 0);
  if (fin.probs.width > 0) {
    const RowShare& p = fin.probs;
    for (int64_t q = 0; q < p.size(); ++q) {
      const float* row = p.x.data() + q * p.width;
      suggested[size_t(p.rows[size_t(q)])] = int32_t(std::max_element(row, row + p.width) - row) + 1;
    }
    ctx.comm.allreduce_sum(suggested.data(), suggested.size());  // disjoint rows
  }
  for (auto& v : suggested) v -= 1;  // -1: no probabilities
  const bool fin_had_probs = fin.probs.width > 0;
  NoiseEstimate estimate;
  if (want_confident && fin.probs.width > 0)
    dets.push_back(detect_confident(ctx.comm, fin.probs, in.n, in.labels.data(), &estimate));
  if (compare && fin.probs.width == 0)
    log::infof("no class probabilities in ", features.empty() ? "(no features file)" : features,
               ": the confident and consensus detectors are not compared");
  auto find = [&](const std::string& m) -> const Detection* {
    for (const auto& d : dets)
      if (d.method == m) return &d;
    return nullptr;
  };
  // Training dynamics: the negated area under the margin (NaN: never trained, i.e. held out).
  std::vector<float> neg_aum;
  if (!dynamics_file.empty() && (runs(detector("dynamics")) || runs(consensus_info))) {
    same_dataset(dynamics_file);
    neg_aum = read_aum(dynamics_file, in.ids);
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
    if (!estimate.empty()) {
      d.flag = flag_top_per_class(d.score, in.labels.data(), estimate.per_class);
    } else {
      d.flag.resize(d.score.size());
      for (size_t i = 0; i < d.score.size(); ++i) d.flag[i] = d.score[i] > 0;  // AUM < 0
    }
    dets.push_back(std::move(d));
  }
  if (runs(consensus_info) && find("knn") && find("confident")) {
    Detection d;
    d.method = "consensus";
    d.inputs = consensus_info.looks_at;
    std::vector<const std::vector<float>*> scores = {&find("knn")->score,
                                                     &find("confident")->score};
    if (!neg_aum.empty()) scores.push_back(&neg_aum);
    d.score = rank_average(scores);
    d.flag = flag_top_per_class(d.score, in.labels.data(), estimate.per_class);
    dets.push_back(std::move(d));
  }
  if (!estimate.empty()) {
    log::infof("estimated wrong labels (confident joint): ", estimate.total(), " of ", in.n, " (",
               100.0 * double(estimate.total()) / double(in.n), " %)",
               truth_flags.empty() ? std::string() : cat("; ground truth: ", true_count));
  }

  const Detection* chosen = find(opt.method);
  SIEVE_CHECK(chosen, "filter.method=", opt.method, ": detector did not run");
  // filter.max_flagged: the chosen detector may not empty a class; a compared one that would
  // is reported, and its figures stay in the table.
  for (const auto& d : dets) {
    const std::string why = over_max_flagged(d.method, d.flag, in.labels.data(), max_flagged);
    if (why.empty()) continue;
    if (&d == chosen) throw UsageError(why);
    log::infof("note: ", why);
  }
  std::vector<uint8_t> keep(size_t(in.n));
  for (int64_t i = 0; i < in.n; ++i) keep[size_t(i)] = !chosen->flag[size_t(i)];
  std::vector<ClassRow> table =
      method_clusters ? clustered.table : table_of(chosen->flag, in.labels);
  std::vector<uint8_t> random_keep = random_keep_mask(in.labels.data(), in.n, table, opt.seed);
  std::vector<int32_t> cluster_ids = have_clusters ? clustered.cluster : std::vector<int32_t>();
  if (!method_clusters) {  // no clusters: -1 marks the flagged samples, 0 the kept ones
    cluster_ids.assign(size_t(in.n), 0);
    for (int64_t i = 0; i < in.n; ++i)
      if (!keep[size_t(i)]) cluster_ids[size_t(i)] = -1;
  }
  int64_t removed = 0;
  for (auto k : keep) removed += !k;
  log::infof("detector ", opt.method, ": ", removed, " of ", in.n, " samples flagged as noise (",
             100.0 * double(removed) / double(in.n), " %)");
  log::info("per-class table:\n" + format_table(table));

  std::vector<DetectionScore> scores;
  for (const auto& d : dets) {
    if (truth_flags.empty()) break;
    scores.push_back(score_detection(d, truth_flags));
    const auto& s = scores.back();
    log::infof("detector ", d.method, " vs ground truth: precision ", s.precision, ", recall ",
               s.recall, ", F1 ", s.f1, ", average precision ", s.average_precision, ", AUROC ",
               s.auroc, " (", s.hits,
               " of ", s.flagged, " flagged are noise; ", s.truth, " noisy)");
  }

  on_root_agreed(ctx.comm, [&] {
    h5::File f = h5::File::create(out.tmp_path());
    put(f, "/cluster", cluster_ids);
    put(f, "/keep", keep);
    put(f, "/random_keep", random_keep);
    put(f, "/sample_id", in.ids);
    put(f, "/labels", in.labels);
    if (fin_had_probs) put(f, "/suggested_label", suggested);  // the model's most likely class
    f.create_group("/per_class");
    std::vector<int32_t> cls;
    std::vector<int64_t> samples, clusters, noise;
    std::vector<double> pct;
    for (const auto& r : table) {
      cls.push_back(r.cls);
      samples.push_back(r.samples);
      clusters.push_back(r.clusters);
      noise.push_back(r.noise);
      pct.push_back(r.removed_pct);
    }
    put(f, "/per_class/class", cls);
    put(f, "/per_class/samples", samples);
    put(f, "/per_class/clusters", clusters);
    put(f, "/per_class/noise", noise);
    put(f, "/per_class/removed_pct", pct);
    if (!estimate.empty()) {
      // The noise rate the calibrated decisions follow, beside the truth where it exists.
      f.create_group("/noise_estimate");
      put(f, "/noise_estimate/per_class", estimate.per_class);
      put(f, "/noise_estimate/class_size", estimate.class_size);
      f.create_dataset<int64_t>("/noise_estimate/confident_joint",
                                {hsize_t(estimate.classes), hsize_t(estimate.classes)});
      f.write_rows<int64_t>("/noise_estimate/confident_joint", 0, size_t(estimate.classes),
                            estimate.joint.data());
      f.set_attr("/noise_estimate", "total", estimate.total());
      if (!truth_flags.empty()) f.set_attr("/noise_estimate", "truth", true_count);
    }
    f.create_group("/detectors");
    std::vector<std::string> names;
    for (size_t k = 0; k < dets.size(); ++k) {
      write_detector(f, dets[k], scores.empty() ? nullptr : &scores[k]);
      names.push_back(dets[k].method);
    }
    f.set_attr("/", "detectors", names);  // the groups under /detectors, in run order
    f.set_attr("/", "method", opt.method);
    f.set_attr("/", "eps", have_clusters ? clustered.eps : 0.0);
    f.set_attr("/", "eps_auto", int64_t(have_clusters && opt.auto_eps));
    f.set_attr("/", "min_samples", opt.dbscan.min_samples);
    f.set_attr("/", "per_class", int64_t(opt.per_class));
    f.set_attr("/", "input", input);
    f.set_attr("/", "input_dataset", dataset);
    f.set_attr("/", "features", features);
    f.set_attr("/", "dynamics", dynamics_file);
    if (opt.method == "knn") {
      f.set_attr("/", "knn_k", int64_t(knn_k));
      f.set_attr("/", "knn_threshold", knn_threshold);
    }
    if (opt.method == "gmm") f.set_attr("/", "log_likelihood", clustered.log_likelihood);
    for (size_t k = 0; k < scores.size(); ++k) {
      if (dets[k].method != opt.method) continue;
      f.set_attr("/", "noise_precision", scores[k].precision);
      f.set_attr("/", "noise_recall", scores[k].recall);
      f.set_attr("/", "noise_f1", scores[k].f1);
    }
    h5::stamp(f, schema::kFilter, ctx.cfg.to_yaml());
    lineage::stamp_derived(f, schema::kFilter, ctx.cfg.to_yaml(), from);
    f.close();
    write_text_atomic(issues_csv,
                      label_issues_csv(dets, *chosen, in.ids, in.labels, suggested, keep));
    write_resolved_config(config_sidecar_path(output), ctx.cfg.to_yaml());
  });
  out.commit();
  log::infof("wrote ", output, " and ", issues_csv);
}

}  // namespace sieve::cluster
