// Sections over the data stages: overview of the inputs, the per-class data reduction
// (the paper's Table I), the noise detectors compared, and the t-SNE embedding with the
// flagged samples (static + interactive).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unordered_map>

#include "report/interactive.hpp"
#include "report/sections.hpp"

namespace sieve::report {
namespace {

const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "×" : "") + std::to_string(s[i]);
  return out;
}

// The chosen detector in words: the registry's description, which filter.h5 carries
// (cluster/detectors.cpp); files written before it carried one name only the method.
std::string method_words(const FilterInfo& f) {
  for (const auto& d : f.detectors)
    if (d.method == f.method && !d.description.empty()) return d.description;
  return f.method == "dbscan" ? "t-SNE + DBSCAN per class (the paper's method)" : f.method;
}

// The classes the test split's count of their own label kept under filter.max_flagged, in one
// sentence ("" where none was).
std::string class_bounds_sentence(const SectionContext& c, const FilterInfo& f) {
  std::string list;
  size_t listed = 0;
  for (size_t k = 0; k < f.test_split_class_cap.size(); ++k) {
    if (f.test_split_class_cap[k] < 0) continue;
    list += cat(listed++ ? ", " : "", class_name(c.data, int64_t(k)), " at ",
                f.test_split_class_cap[k]);
  }
  if (listed == 0) return "";
  return cat(" Its count per given label bounded ", list,
             ": the confident joint and the knn vote counted more than filter.max_flagged "
             "allows there, its own estimate plus two standard errors is under that limit, "
             "and the run went on.");
}

// What both cautions about labels that follow the model observe (the raised count's and the
// plain one's), up to the colon before what it means.
constexpr const char* kHeldOutAgreeMore =
    "The held-out samples agree with their given labels more often than the test samples with "
    "their clean ones (the count above is plainly below zero), which no noise that depends on "
    "the class alone does:";

// The confident joint's estimate of wrong labels and what the calibrated decisions flag,
// beside the truth where there is one. Written with or without a truth: on real data, where
// no truth exists, it is the only figure of how noisy the labels are.
void noise_estimate_paragraph(SectionContext& c, const FilterInfo& f) {
  if (f.noise_estimate < 0) return;
  c.doc.paragraph(
      cat("Estimated wrong labels (confident joint",
          f.probs_source == "out_of_fold" ? ", on out-of-fold probabilities (pretrain.folds)"
                                          : std::string(),
          "): ", f.noise_estimate,
          f.noise_flag_total < 0 ? std::string()
          : f.noise_rate_given > 0
              ? cat("; the ranked decisions flag ", f.noise_flag_total, ", the share ",
                    f.noise_rate_given,
                    " given by filter.noise_rate (not estimated), the highest-scored over all "
                    "classes")
              : cat("; the calibrated decisions flag ", f.noise_flag_total,
                    f.test_split_cap >= 0 ? std::string(" (capped by the test split's count below)")
                    : f.test_split_raise >= 0
                        ? std::string(" (raised to the test split's count below zero, below)")
                        : std::string(" (the sum over classes of the larger of that estimate and "
                                      "the knn vote's count)"),
                    ", the highest-scored over all classes"),
          f.noise_truth >= 0 ? cat("; the ground truth has ", f.noise_truth) : std::string(), "."));
  if (!std::isnan(f.test_split_wrong))
    c.doc.paragraph(cat(
        "The early model's confusion on the test split (its labels taken as clean), against its "
        "predictions on the held-out training samples, puts ",
        fixed(f.test_split_wrong, 0), " ± ", fixed(2.0 * f.test_split_standard_error, 0),
        " labels wrong (two standard errors), if the noise depends on the true class and not on "
        "the image; noise that follows the model's own confusions pushes it below zero, and test "
        "labels as noisy as the training ones leave it near zero. ",
        f.test_split_cap >= 0
            ? cat("The calibrated decisions flag at most that estimate plus two standard errors, ",
                  f.test_split_cap, " (filter.test_bound).")
            : std::string("It bounds the count only where it is plainly above zero and below "
                          "the count."),
        class_bounds_sentence(c, f),
        f.transition_source == "test_split"
            ? std::string(" Its estimate being precise (two standard errors within a fifth of "
                          "it), the posterior detectors read the noise's label transition from "
                          "it rather than from the confident joint, whose flip routes hold the "
                          "model's own mistakes too.")
            : std::string()));
  if (f.test_split_follows_model && f.noise_rate_given == 0 && f.test_split_raise >= 0)
    c.doc.paragraph(cat(
        "**Caution: the count rests on the test split alone.** ", kHeldOutAgreeMore,
        " the wrong labels follow the model's own confusions (instance-dependent noise), which the "
        "confident joint and the knn vote barely see, or the test split is harder than the "
        "training data. The calibrated decisions flag ",
        f.test_split_raise,
        ", as many as the count is below zero (filter.follows_model_count): on the Fashion-MNIST "
        "runs measured with this kind of noise that came to 0.66-1.04 times the wrong labels "
        "(docs/detection.md). Where the test split is harder instead, the samples flagged "
        "beyond the joint's count are hard clean ones. Where the share of wrong labels is "
        "known, filter.noise_rate sets it."));
  else if (f.test_split_follows_model && f.noise_rate_given == 0)
    c.doc.paragraph(cat(
        "**Caution: the wrong labels may be far more than flagged.** ", kHeldOutAgreeMore,
        " the wrong labels, if any, follow the model's own confusions (instance-dependent "
        "noise), or the test split is harder than the training data. No count built on the "
        "model's beliefs sees such labels; on the Fashion-MNIST runs measured with this kind of "
        "noise the flagged were 2-33 % of the wrong labels (docs/detection.md). Where the share "
        "of wrong labels is known, filter.noise_rate sets it."));
  else if (f.estimate_in_doubt && f.noise_rate_given == 0 && f.noise_estimate >= 0 &&
           f.test_split_cap < 0)
    c.doc.paragraph(cat(
        "**Caution: this count may be far off.** The early model misses ",
        pct(1.0 - f.heldout_peak, 1),
        " % of its held-out samples' labels at its best epoch, more than "
        "the estimated share of wrong labels by at least that share again: its own mistakes are "
        "as many as the wrong labels it estimates, and the confident joint cannot tell the two "
        "apart (a weak model's confident errors count as flips; a model that learnt the wrong "
        "labels counts none). On most such runs measured the estimate was off by a quarter or "
        "more, either way (docs/detection.md). The filtered arm removes that count; "
        "where the share of wrong labels is known, filter.noise_rate sets it."));
}

// Every detector cluster_filter ran on the same samples, scored against the ground truth:
// one table row each and their precision-recall curves over each detector's score.
void detector_comparison(SectionContext& c, const FilterInfo& f) {
  noise_estimate_paragraph(c, f);
  std::vector<const DetectorInfo*> scored;
  for (const auto& d : f.detectors)
    if (d.hits >= 0) scored.push_back(&d);
  if (scored.empty()) return;
  std::vector<Row> table, csv, curve;
  for (const DetectorInfo* d : scored) {
    const std::string chosen = d->method == f.method ? " (used)" : "";
    table.push_back({d->method + chosen, d->inputs, std::to_string(d->flagged),
                     std::to_string(d->hits), pct(d->precision), pct(d->recall), fixed(d->f1, 3),
                     fixed(d->average_precision, 3), fixed(d->auroc, 3)});
    csv.push_back({d->method, d->inputs, std::to_string(d->flagged), std::to_string(d->hits),
                   std::to_string(d->truth), fmt(d->precision), fmt(d->recall), fmt(d->f1),
                   fmt(d->average_precision), fmt(d->auroc)});
    for (size_t i = 0; i + 2 < d->pr.size(); i += 3)
      curve.push_back({d->method, fmt(d->pr[i]), fmt(d->pr[i + 1]), fmt(d->pr[i + 2])});
  }
  c.doc.paragraph(
      cat("Every detector on the same ", scored.front()->truth,
          " noisy samples (ground truth). Precision: share of the flagged samples that are noise; "
          "recall: share of the noise flagged; average precision: area under the precision-recall "
          "curve over the detector's score, i.e. how well its ranking would do at any threshold; "
          "AUROC: the chance that a noisy sample scores above a clean one."));
  c.doc.table({"detector", "looks at", "flagged", "noise among them", "precision %", "recall %",
               "F1", "average precision", "AUROC"},
              table, "Noise detectors compared against the ground truth");
  write_csv(c.dir + "/data/detectors.csv",
            {"method", "inputs", "flagged", "hits", "truth", "precision", "recall", "f1",
             "average_precision", "auroc"},
            csv);
  write_csv(c.dir + "/data/detector_pr.csv", {"method", "threshold", "precision", "recall"}, curve);
  std::string gp = terminal_line(c.format, 760, 520) +
                   cat("set output ", gp_quote(c.figure_path("detector_pr")), "\n",
                       "set datafile separator ','\nset key bottom left\n"
                       "set xrange [0:1]\nset yrange [0:1.02]\nset grid\n"
                       "set xlabel 'recall (share of the noise flagged)'\n"
                       "set ylabel 'precision (share of flagged that is noise)'\n"
                       "set title 'Noise detectors: precision-recall over each score'\nplot ");
  for (size_t k = 0; k < scored.size(); ++k) {
    const DetectorInfo* d = scored[k];
    gp += cat(k ? ", " : "", "'data/detector_pr.csv' skip 1 using (strcol(1) eq ",
              gp_quote(d->method), " ? $4 : NaN):3 with lines lw 2 lc rgb '", kPalette[k % 10],
              "' title ", gp_quote(cat(d->method, " (AP ", fixed(d->average_precision, 3), ")")),
              ", '+' using (", fmt(d->recall), "):(", fmt(d->precision),
              ") every ::0::0 with points pt 7 ps 1.4 lc rgb '", kPalette[k % 10], "' notitle");
  }
  gp += "\n";
  run_gnuplot(c.dir, "detector_pr", gp, c.figure_path("detector_pr"));
  c.doc.figure(c.figure_path("detector_pr"),
               "Precision-recall of each detector over its score; the dot is its decision",
               {"data/detector_pr.csv", "data/detectors.csv"}, "fig-detectors");
}

// ", with noise ground truth (N of M training samples noisy; data.label_noise: ...)", or "":
// a config's title may name another noise than the run injected (--set overrides it), so
// the report says what the dataset carries.
std::string noise_description(const DatasetInfo& ds) {
  if (!ds.has_noise_truth) return "";
  int64_t noisy = 0;
  for (uint8_t v : ds.noise_truth) noisy += v != 0;
  return cat(", with noise ground truth (", noisy, " of ", ds.n_train, " training samples noisy",
             ds.injected_kind.empty()
                 ? std::string()
                 : cat("; data.label_noise: ", 100.0 * ds.injected_rate, " % ", ds.injected_kind),
             ")");
}

}  // namespace

void section_overview(SectionContext& c) {
  const RunData& d = c.data;
  c.doc.section("Run and inputs", "overview");
  c.doc.paragraph(cat("Run '", c.cfg.get_string("run.name"), "' in ", d.run_dir, "."));
  std::vector<Row> rows;
  auto status = [](bool p) { return p ? std::string("present") : std::string("missing"); };
  rows.push_back({"dataset.h5", status(d.dataset.present),
                  d.dataset.present
                      ? cat(d.dataset.kind, ", ", d.dataset.n_train, " train / ", d.dataset.n_test,
                            " test samples of ", shape_str(d.dataset.sample_shape), ", ",
                            d.dataset.num_classes, " classes", noise_description(d.dataset))
                      : ""});
  rows.push_back({"pretrain/metrics.jsonl", status(!d.pretrain_metrics.empty()),
                  d.pretrain_metrics.empty() ? "" : cat(d.pretrain_metrics.size(), " epochs")});
  rows.push_back({"features.h5", status(d.features.present),
                  d.features.present
                      ? cat(d.features.n, " × ", d.features.dim, " features",
                            d.features.layer.empty() ? "" : " from layer " + d.features.layer)
                      : ""});
  rows.push_back({"embedding.h5", status(d.embedding.present),
                  d.embedding.present
                      ? cat(d.embedding.n, " points in ", d.embedding.dims, "-D",
                            d.embedding.method.empty() ? "" : " (" + d.embedding.method + ")")
                      : ""});
  int64_t kept = 0;
  for (auto k : d.filter.keep) kept += k ? 1 : 0;
  rows.push_back({"filter.h5", status(d.filter.present),
                  d.filter.present
                      ? cat(kept, " of ", d.filter.keep.size(), " samples kept",
                            d.filter.method.empty() ? "" : " (" + d.filter.method + ")")
                      : ""});
  rows.push_back({"sweep/run-*/result.json", status(!d.runs.empty()),
                  cat(d.runs.empty() ? "" : cat(d.runs.size(), " finished runs"),
                      d.runs.empty() || d.stale.empty() ? "" : "; ",
                      d.stale.empty() ? "" : cat(d.stale.size(), " stale, not used"))});
  c.doc.table({"input", "status", "contents"}, rows);
  if (!d.notes.empty()) {
    c.doc.paragraph("Missing or partial inputs (their sections are left out or shortened):");
    c.doc.bullets(d.notes);
  }
  if (!d.stale.empty()) {
    // Results of an earlier sweep grid (or filter) left in the sweep directory: listed, never
    // pooled with the current grid's runs (docs/report.md, "Stale results").
    c.doc.paragraph(cat("Stale results: ", d.stale.size(), " result.json file",
                        d.stale.size() == 1 ? " is" : "s are",
                        " not a run of the current sweep grid and left out of every number:"));
    std::vector<Row> stale;
    for (auto& s : d.stale) {
      const std::string rel = std::filesystem::path(s.path).lexically_relative(d.run_dir).string();
      stale.push_back({rel.empty() || rel.rfind("..", 0) == 0 ? s.path : rel, s.why});
    }
    c.doc.table({"result", "why stale"}, stale);
  }
  if (d.embedding.present) {
    c.doc.paragraph(cat("Embedding quality: KL divergence ", fixed(d.embedding.kl_divergence, 4),
                        ", 10-NN preservation ", fixed(d.embedding.knn_preservation, 4),
                        ", trustworthiness ", fixed(d.embedding.trustworthiness, 4),
                        ", perplexity ", fixed(d.embedding.perplexity, 1), "."));
  }
}

void section_reduction(SectionContext& c) {
  const FilterInfo& f = c.data.filter;
  c.doc.section("Data reduction per class", "reduction");
  if (!f.present) {
    c.doc.note("No filter.h5: run cluster_filter to fill this section.");
    return;
  }
  const bool clusters = f.method == "dbscan" || f.method == "gmm" || f.method == "kmeans";
  c.doc.paragraph(
      cat("Detector: ", f.method.empty() ? "n/a" : f.method,
          f.method.empty() ? "" : cat(" — ", method_words(f)),
          f.method == "dbscan" ? cat(", eps ", fmt(f.eps, 4).empty() ? "n/a" : fmt(f.eps, 4),
                                     ", min_samples ", f.min_samples)
                               : std::string(),
          ". The samples it flags as noise are removed from the filtered arm; the random arm "
          "removes as many per class, chosen at random."));
  std::vector<Row> csv, table;
  int64_t ts = 0, tc = 0, tn = 0;
  for (auto& r : f.per_class) {
    const std::string name = class_name(c.data, r.cls);
    csv.push_back({std::to_string(r.cls), name, std::to_string(r.samples),
                   std::to_string(r.clusters), std::to_string(r.noise), fmt(r.removed_pct)});
    table.push_back({std::to_string(r.cls), name, std::to_string(r.samples),
                     std::to_string(r.clusters), std::to_string(r.noise), fixed(r.removed_pct, 2)});
    ts += r.samples, tc += r.clusters, tn += r.noise;
  }
  write_csv(c.dir + "/data/data_reduction.csv",
            {"class", "name", "samples", "clusters", "noise", "removed_pct"}, csv);
  if (!f.per_class.empty())
    table.push_back({"all", "total", std::to_string(ts), std::to_string(tc), std::to_string(tn),
                     fixed(ts ? 100.0 * double(tn) / double(ts) : 0.0, 2)});
  c.doc.table({"class", "name", "samples", "clusters", "noise", "removed %"}, table,
              clusters ? cat("Table I: ", f.method, " clusters and noise removed per class")
                       : cat("Table I: samples flagged by ", f.method,
                             " and removed per class (no clusters: the column is 0)"));
  c.doc.link("data/data_reduction.csv", "data/data_reduction.csv");
  if (!f.label_issues.empty()) {
    // Copied in, so that the report directory stands alone.
    std::filesystem::copy_file(f.label_issues, c.dir + "/data/label_issues.csv",
                               std::filesystem::copy_options::overwrite_existing);
    c.doc.paragraph(
        "Every sample with each detector's score and flag, the given and the "
        "suggested label, most suspicious first:");
    c.doc.link("data/label_issues.csv", "data/label_issues.csv");
  }
  if (!std::isnan(f.noise_precision) || !std::isnan(f.noise_recall)) {
    c.doc.paragraph(cat("Against the injected-noise ground truth: precision ",
                        pct(f.noise_precision), " %, recall ", pct(f.noise_recall),
                        " % (share of removed samples that were noise; share of noise removed)."));
  }
  const DatasetInfo& ds = c.data.dataset;
  if (ds.has_noise_truth) {
    // Recomputed here from dataset.h5 /train/noise_truth joined on sample_id: an
    // independent check of the figures cluster_filter stored.
    std::unordered_map<int64_t, uint8_t> truth;
    for (size_t i = 0; i < ds.train_sample_id.size(); ++i)
      truth[ds.train_sample_id[i]] = ds.noise_truth[i];
    int64_t removed = 0, noisy = 0, both = 0;
    for (size_t i = 0; i < f.sample_id.size(); ++i) {
      auto it = truth.find(f.sample_id[i]);
      if (it == truth.end()) continue;
      const bool rm = f.cluster[i] < 0, nz = it->second != 0;
      removed += rm, noisy += nz, both += rm && nz;
    }
    const double p = removed ? double(both) / double(removed) : kNaN;
    const double r = noisy ? double(both) / double(noisy) : kNaN;
    c.doc.table(
        {"removed", "noisy (truth)", "removed and noisy", "precision %", "recall %"},
        {{std::to_string(removed), std::to_string(noisy), std::to_string(both), pct(p), pct(r)}},
        "Removal vs ground truth, recomputed from dataset.h5");
    write_csv(
        c.dir + "/data/noise_truth.csv",
        {"removed", "noisy", "removed_and_noisy", "precision", "recall"},
        {{std::to_string(removed), std::to_string(noisy), std::to_string(both), fmt(p), fmt(r)}});
  } else if (std::isnan(f.noise_precision) && std::isnan(f.noise_recall)) {
    c.doc.note(
        "No noise ground truth (dataset.h5 has no /train/noise_truth): precision and "
        "recall of the removal cannot be given.");
  }
  detector_comparison(c, f);
}

void section_embedding(SectionContext& c) {
  const EmbeddingInfo& e = c.data.embedding;
  const FilterInfo& f = c.data.filter;
  c.doc.section("t-SNE embedding and the flagged noise", "embedding");
  const std::string who = f.present && !f.method.empty() ? f.method : "the filter";
  if (!e.present) {
    c.doc.note("No embedding.h5: run reduce_dims to fill this section.");
    return;
  }
  std::unordered_map<int64_t, int32_t> cluster_of;
  for (size_t i = 0; i < f.sample_id.size(); ++i) cluster_of[f.sample_id[i]] = f.cluster[i];
  std::vector<ScatterPoint> pts(size_t(e.n));
  int64_t joined = 0, noise = 0, num_classes = c.data.dataset.num_classes;
  std::vector<Row> csv;
  for (int64_t i = 0; i < e.n; ++i) {
    ScatterPoint& p = pts[size_t(i)];
    p.x = e.points[size_t(i * e.dims)];
    p.y = e.points[size_t(i * e.dims + 1)];
    p.label = e.labels[size_t(i)];
    p.sample_id = e.sample_id[size_t(i)];
    auto it = cluster_of.find(p.sample_id);
    if (it != cluster_of.end()) p.cluster = it->second, p.noise = it->second < 0, ++joined;
    noise += p.noise;
    num_classes = std::max<int64_t>(num_classes, p.label + 1);
    csv.push_back({std::to_string(p.sample_id), fmt(p.x), fmt(p.y), std::to_string(p.label),
                   std::to_string(p.cluster), p.noise ? "1" : "0"});
  }
  write_csv(c.dir + "/data/tsne_points.csv", {"sample_id", "x", "y", "label", "cluster", "noise"},
            csv);
  std::vector<Row> classes;
  std::vector<std::string> names;
  for (int64_t k = 0; k < num_classes; ++k) {
    names.push_back(class_name(c.data, k));
    classes.push_back({std::to_string(k), names.back()});
  }
  write_csv(c.dir + "/data/classes.csv", {"label", "name"}, classes);
  if (f.present && joined < e.n)
    c.doc.note(cat(e.n - joined, " embedding points have no entry in filter.h5 (by sample_id)."));
  c.doc.paragraph(cat(e.n, " points, ", noise, " flagged as noise by ", who, " (black crosses)."));

  // All classes in one scatter; a palette instead of a legend beyond 20 classes.
  const std::string src = "'data/tsne_points.csv' skip 1";
  std::string gp =
      terminal_line(c.format, 900, 800) +
      cat("set output ", gp_quote(c.figure_path("tsne_scatter")), "\n",
          "set datafile separator ','\nset size ratio -1\nset key outside right\n"
          "set offsets graph 0.03, graph 0.03, graph 0.03, graph 0.03\n"
          "set title ",
          gp_quote(cat("t-SNE embedding by class; noise flagged by ", who, " as black crosses")),
          "\n"
          "unset xtics\nunset ytics\n");
  if (num_classes <= 20) {
    gp += "plot ";
    for (int64_t k = 0; k < num_classes; ++k)
      gp += cat(k ? ", " : "", src, " using ($4==", k,
                " && $6==0 ? $2 : NaN):3 with points pt 7 "
                "ps 0.7 lc rgb '",
                k < 10 ? kPalette[k] : "#555555", "' title ", gp_quote(names[size_t(k)]));
  } else {
    gp += cat("set palette rgb 33,13,10\nunset colorbox\nplot ", src,
              " using ($6==0 ? $2 : NaN):3:4 with points pt 7 ps 0.3 lc palette title 'classes'");
  }
  gp += cat(", ", src,
            " using ($6==1 ? $2 : NaN):3 with points pt 2 ps 0.8 lw 1.5 lc rgb "
            "'black' title ",
            gp_quote(cat("flagged by ", who)), "\n");
  run_gnuplot(c.dir, "tsne_scatter", gp, c.figure_path("tsne_scatter"));
  c.doc.figure(c.figure_path("tsne_scatter"),
               cat("t-SNE embedding, colour = class, × = flagged by ", who),
               {"data/tsne_points.csv", "data/classes.csv"}, "fig-tsne");

  // One panel per class (its points coloured, its noise black, the rest grey).
  if (num_classes <= 25) {
    const int64_t cols = std::min<int64_t>(5, num_classes);
    const int64_t rows = (num_classes + cols - 1) / cols;
    std::string mp =
        terminal_line(c.format, int(cols * 260), int(rows * 250)) +
        cat("set output ", gp_quote(c.figure_path("tsne_per_class")), "\n",
            "set datafile separator ','\nunset xtics\nunset ytics\nunset key\n",
            "set offsets graph 0.03, graph 0.03, graph 0.03, graph 0.03\n", "set multiplot layout ",
            rows, ",", cols, " title 't-SNE per class (noise ×)'\n");
    for (int64_t k = 0; k < num_classes; ++k)
      mp += cat("set title ", gp_quote(names[size_t(k)]), "\nplot ", src, " using ($4!=", k,
                " ? $2 : NaN):3 with dots lc rgb '#dddddd', ", src, " using ($4==", k,
                " && $6==0 ? $2 : NaN):3 with points pt 7 ps 0.3 lc rgb '", kPalette[k % 10], "', ",
                src, " using ($4==", k,
                " && $6==1 ? $2 : NaN):3 with points pt 2 ps 0.7 lc rgb 'black'\n");
    mp += "unset multiplot\n";
    run_gnuplot(c.dir, "tsne_per_class", mp, c.figure_path("tsne_per_class"));
    c.doc.figure(c.figure_path("tsne_per_class"),
                 cat("t-SNE per class with the samples ", who, " flagged"),
                 {"data/tsne_points.csv"}, "fig-tsne-per-class");
  } else {
    c.doc.note(cat("Per-class panels omitted for ", num_classes, " classes (at most 25)."));
  }

  InteractiveOptions io;
  io.max_points = c.cfg.get_int("report.interactive.max_points");
  io.max_thumbnails = c.cfg.get_int("report.interactive.max_thumbnails");
  io.dataset_path = c.data.dataset.present ? c.data.dataset.path : "";
  io.title = cat("t-SNE embedding: ", c.cfg.get_string("run.name"));
  int64_t drawn = write_interactive(c.dir + "/tsne_interactive.html", pts, names, io);
  c.doc.link(cat("Interactive view (", drawn, " points; hover for image and labels)"),
             "tsne_interactive.html");
}

}  // namespace sieve::report
