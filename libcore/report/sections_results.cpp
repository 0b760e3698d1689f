// Sections over the train_scaled runs: accuracy vs global batch (the numbers and the
// verdicts come from results.hpp; this file only renders them), throughput and scaling
// efficiency vs ranks; and the pretraining curve.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>

#include "report/results.hpp"
#include "report/sections.hpp"
#include "util/log.hpp"

namespace sieve::report {

namespace {

const char* kArmColor[] = {"#1f77b4", "#2ca02c", "#d62728"};

// "83.20 ± 1.10" (95 % half-width), "83.20 (n=1, no interval)", "n/a".
std::string acc_cell(const MeanCI& m) {
  if (m.n == 0) return "n/a";
  if (!m.has_ci()) return pct(m.mean) + " (n=1, no interval)";
  return pct(m.mean) + " ± " + pct(m.half);
}

std::string signed_points(double fraction) {
  if (std::isnan(fraction)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f", 100 * fraction);
  return buf;
}

// Three cells of one comparison: mean difference, 95 % interval, pairs.
Row diff_cells(const Comparison& c) {
  if (!c.available) return {"n/a", cat("no ", c.missing, " runs"), "0"};
  const MeanCI& d = c.pd.diff;
  if (d.n == 0) return {"n/a", "no shared seed", "0"};
  return {signed_points(d.mean),
          d.has_ci() ? signed_points(d.lo) + " to " + signed_points(d.hi) : "n=1, no interval",
          std::to_string(d.n)};
}

std::string verdict_key(const Comparison& c) {
  if (!c.available || c.pd.diff.n == 0) return "not_compared";
  switch (c.verdict) {
    case Verdict::Higher: return "helped";
    case Verdict::Lower: return "hurt";
    case Verdict::NoDifference: return "no_difference";
    case Verdict::TooFew: break;
  }
  return "too_few";
}

// Every run as read, marks included, and the dtype it trained in; epochs and optimizer steps
// last (scaled.budget decides which of the two the arms share; empty where result.json has
// none).
void write_runs_csv(const SectionContext& c) {
  auto count = [](int64_t v) { return v > 0 ? std::to_string(v) : std::string(); };
  std::vector<Row> all;
  for (auto& r : c.data.runs)
    all.push_back({std::to_string(r.index),
                   r.arm,
                   std::to_string(r.global_batch),
                   std::to_string(r.requested_batch),
                   std::to_string(r.ranks),
                   std::to_string(r.per_rank_batch),
                   std::to_string(r.seed),
                   fmt(r.weight_decay),
                   fmt(r.lr),
                   fmt(r.final_test_acc),
                   fmt(r.best_test_acc),
                   fmt(r.train_acc),
                   fmt(r.gen_gap),
                   fmt(r.time_to_best_s),
                   fmt(r.images_per_s),
                   std::to_string(r.samples),
                   r.diverged ? "1" : "0",
                   r.diverged ? std::to_string(r.diverged_at_step) : "",
                   fmt(r.last_eval_test_acc),
                   r.mark(),
                   fmt(r.train_acc_clean),
                   r.precision,
                   count(r.epochs),
                   count(r.steps)});
  write_csv(c.dir + "/data/runs.csv",
            {"index",
             "arm",
             "global_batch",
             "requested_global_batch",
             "ranks",
             "per_rank_batch",
             "seed",
             "weight_decay",
             "lr",
             "final_test_acc",
             "best_test_acc",
             "train_acc",
             "gen_gap",
             "time_to_best_s",
             "images_per_s",
             "samples",
             "diverged",
             "diverged_at_step",
             "last_eval_test_acc",
             "mark",
             "train_acc_clean",
             "precision",
             "epochs",
             "steps"},
            all);
}

// precision: auto decides by the machine and, where the CPU has bf16, by a timing that
// train_scaled records once per network in its sweep directory (docs/engine.md); runs of one
// batch can still train in different dtypes (nodes of different CPUs, results gathered from
// other sweep directories, an explicit precision in some runs): one note per such batch,
// since its paired differences then mix two numerics.
void mixed_precision_note(SectionContext& c) {
  std::map<int64_t, std::map<std::string, int>> by_batch;
  for (const RunResult& r : c.data.runs)
    if (!r.precision.empty()) ++by_batch[r.global_batch][r.precision];
  for (const auto& [batch, counts] : by_batch) {
    if (counts.size() < 2) continue;
    std::string mix;
    for (const auto& [p, n] : counts) mix += cat(mix.empty() ? "" : " and ", p, " (", n, " runs)");
    c.doc.note(cat("The runs at global batch ", batch, " trained in ", mix,
                   ": their differences mix two numerics; set scaled.precision to fp32 or bf16 "
                   "to compare like with like."));
  }
}

// The small table of diverged and collapsed runs (or a sentence saying there are none).
void marked_runs(SectionContext& c, const ResultsAnalysis& a) {
  if (a.marked.empty()) {
    c.doc.paragraph(cat("No run diverged, and no run collapsed to near chance (final test "
                        "accuracy ≤ ",
                        fmt(kCollapseFactor), " × 1/classes)."));
  } else {
    std::vector<Row> rows;
    for (const RunResult* r : a.marked) {
      std::string detail =
          r->diverged
              ? cat("non-finite loss/gradient at step ", r->diverged_at_step, "; ",
                    std::isnan(r->last_eval_test_acc)
                        ? std::string("no test evaluation before it")
                        : cat("last evaluated test accuracy ", pct(r->last_eval_test_acc),
                              " % (not used in any mean)"))
              : cat("final test accuracy ", pct(r->final_test_acc), " % ≤ ", fmt(kCollapseFactor),
                    " × chance (", pct(r->chance), " %)");
      rows.push_back({std::to_string(r->index), r->arm, std::to_string(r->global_batch),
                      std::to_string(r->seed), std::isnan(r->weight_decay) ? "n/a" : fmt(r->weight_decay, 4),
                      r->mark(), detail});
    }
    c.doc.table({"run", "arm", "global batch", "seed", "weight decay", "mark", "detail"}, rows,
                "Marked runs: diverged runs are left out of the means, collapsed ones kept");
  }
  if (a.unchecked > 0)
    c.doc.note(cat(a.unchecked, " run(s) not checked for collapse: the class count is unknown "
                                "(no dataset.h5 and no num_classes in result.json)."));
  mixed_precision_note(c);
}

void accuracy_figures(SectionContext& c, const ResultsAnalysis& a) {
  // One series per arm; strcol() filters the long-format CSV. Rows of a capped batch
  // (requested $15 != trained $2) are drawn as separate open points, not joined to the line.
  // A one-seed point has no interval (ci95_half empty): column error_bar ($18) is 0 there,
  // because gnuplot drops a whole row whose referenced column is empty.
  std::string acc = terminal_line(c.format, 900, 560) +
                    cat("set output ", gp_quote(c.figure_path("accuracy_vs_batch")), "\n",
                        "set datafile separator ','\n"
                        "set logscale x 2\nset grid\nset key bottom left\n"
                        "set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05\n"
                        "set xlabel 'global batch size'\nset ylabel 'test accuracy (%)'\n"
                        "set title 'Test accuracy vs global batch (mean, bars: 95 % t-interval "
                        "over seeds)'\nplot ");
  std::string gap = terminal_line(c.format, 900, 560) +
                    cat("set output ", gp_quote(c.figure_path("gen_gap_vs_batch")), "\n",
                        "set datafile separator ','\nset logscale x 2\nset grid\n"
                        "set xlabel 'global batch size'\nset ylabel 'train − test accuracy (%)'\n"
                        "set title 'Train acc. on the given (noisy) labels − test acc. (mean ± "
                        "std over seeds)'\n"
                        "plot ");
  // Where the runs know their train accuracy on the clean labels: that gap too, dashed.
  bool clean = false;
  for (auto& p : a.points) clean |= p.clean_gap.n > 0;
  bool first = true;
  for (int k = 0; k < 3; ++k) {
    bool any = false, capped = false;
    for (auto& p : a.points)
      if (p.arm == kArmNames[k] && !std::isnan(p.acc.mean)) any = true, capped |= p.key.capped();
    if (!any) continue;
    const std::string arm = kArmNames[k], col = kArmColor[k];
    std::string sel = cat("((strcol(1) eq '", arm, "' && $15 == $2) ? ");
    // The arms sit side by side around their batch (x * 0.96, 1, 1.04 on the log axis) so
    // that their error bars do not hide each other.
    const std::string x = cat("($2*", fmt(1.0 + 0.04 * (k - 1), 3), ")");
    acc += cat(first ? "" : ", ", "'data/accuracy_vs_batch.csv' skip 1 using ", x, ":", sel,
               "100*$5 : NaN):(100*$18) with yerrorlines lw 2 pt 7 lc rgb '", col,
               "' title '", arm, "'");
    if (capped)
      acc += cat(", 'data/accuracy_vs_batch.csv' skip 1 using ", x, ":((strcol(1) eq '", arm,
                 "' && $15 != $2) ? 100*$5 : NaN):(100*$18) with yerrorbars "
                 "pt 6 ps 1.5 lc rgb '",
                 col, "' title '", arm, " (trained below the batch asked for)'");
    gap += cat(first ? "" : ", ", "'data/accuracy_vs_batch.csv' skip 1 using ", x, ":", sel,
               "100*$10 : NaN):(100*$11) with yerrorlines lw 2 pt 7 lc rgb '", col, "' title '",
               arm, "'");
    if (clean)
      gap += cat(", 'data/accuracy_vs_batch.csv' skip 1 using ", x, ":", sel,
                 "100*$19 : NaN):(100*$20) with yerrorlines lw 2 dt 2 pt 6 lc rgb '", col,
                 "' title '", arm, ", clean labels'");
    first = false;
  }
  if (first) {
    c.doc.note("No run reported a test accuracy: figures omitted.");
    return;
  }
  run_gnuplot(c.dir, "accuracy_vs_batch", acc + "\n", c.figure_path("accuracy_vs_batch"));
  run_gnuplot(c.dir, "gen_gap_vs_batch", gap + "\n", c.figure_path("gen_gap_vs_batch"));
  c.doc.figure(c.figure_path("accuracy_vs_batch"),
               "Test accuracy vs global batch for full, filtered and random data (error bars: "
               "95 % t-interval of the mean over seeds; a single-seed point has none)",
               {"data/accuracy_vs_batch.csv", "data/runs.csv"}, "fig-accuracy");
  c.doc.figure(c.figure_path("gen_gap_vs_batch"),
               clean ? "Generalization gap vs batch: train accuracy on the given (noisy) labels "
                       "− test accuracy (solid), and train accuracy on the clean labels − test "
                       "accuracy (dashed)"
                     : "Generalization gap vs batch: train accuracy on the given labels − test "
                       "accuracy",
               {"data/accuracy_vs_batch.csv"}, "fig-gap");
}

// How many ranks the runs trained on: a run's result depends on it (batch norm normalises
// over each rank's share of the batch; train_scaled --ranks-per-run), so the report says it.
std::map<int64_t, int64_t> runs_per_rank_count(const std::vector<RunResult>& runs) {
  std::map<int64_t, int64_t> n;
  for (const RunResult& r : runs) ++n[r.ranks];
  return n;
}

// `n`: runs_per_rank_count.
std::string describe_run_ranks(const std::map<int64_t, int64_t>& n) {
  if (n.size() == 1)
    return cat("each trained on ", n.begin()->first, " rank(s) (per-rank batch = global / ",
               n.begin()->first, ")");
  std::string parts;
  for (auto& [ranks, count] : n) parts += cat(parts.empty() ? "" : ", ", count, " on ", ranks);
  return cat("trained on different numbers of ranks (", parts, ")");
}

// What the arms held equal (scaled.budget, recorded in each result.json's config): the
// filtered and random arms have fewer samples, so at equal epochs they take fewer optimizer
// steps, and a difference between the arms is then partly one of steps.
std::string describe_budget(const std::vector<RunResult>& runs) {
  if (std::all_of(runs.begin(), runs.end(), [](const RunResult& r) { return r.arm == "full"; }))
    return "";
  std::set<std::string> budgets;
  for (const RunResult& r : runs) {
    auto it = r.recorded.find("scaled.budget");
    budgets.insert(it == r.recorded.end() ? "epochs" : it->second);
  }
  if (budgets.size() > 1)
    return " The runs differ in scaled.budget (some held epochs equal, some steps): the arms "
           "are not compared like with like; runs.csv has each run's epochs and steps.";
  if (*budgets.begin() == "steps")
    return " Every arm trained about as many optimizer steps as the full arm (scaled.budget: "
           "steps; the smaller arms ran more epochs, runs.csv: epochs, steps).";
  return " Every arm trained the same epochs (scaled.budget: epochs), so the filtered and "
         "random arms, with fewer samples, took fewer optimizer steps (runs.csv: steps); the "
         "random arm takes as many as the filtered one.";
}

// Runs of different rank counts are not the same runs: a warning where the sweep mixes them
// (e.g. a --resume with another --ranks-per-run kept the finished runs). `n`:
// runs_per_rank_count.
std::string mixed_ranks_warning(const std::map<int64_t, int64_t>& n) {
  if (n.size() < 2) return "";
  return "the sweep's runs trained on different numbers of ranks: batch norm normalises over "
         "each rank's share of the batch, so a run's accuracy depends on its ranks and the arms "
         "compared here may differ by that too (runs.csv: ranks); rerun the sweep with one "
         "--ranks-per-run (train_scaled --overwrite) to compare like with like";
}

}  // namespace

void section_accuracy(SectionContext& c) {
  c.doc.section("Accuracy vs global batch", "accuracy");
  const auto& runs = c.data.runs;
  if (runs.empty()) {
    c.doc.note(cat("No train_scaled results under ", c.data.sweep_dir,
                   ": run the sweep (train_scaled) to fill this section."));
    return;
  }
  write_runs_csv(c);
  const ResultsAnalysis a = analyze_results(runs);

  // The verdicts first: what the intervals say, per batch.
  const std::map<int64_t, int64_t> rank_counts = runs_per_rank_count(runs);
  c.doc.paragraph(
      cat(runs.size(), " runs read from ", c.data.sweep_dir, ", ", describe_run_ranks(rank_counts),
          ". Per global batch, the paired difference of final test accuracy (filtered minus the "
          "other arm, in percentage points, over the seeds run in both arms) with its 95 % "
          "Student-t interval: filtering helped or hurt only where the whole interval lies above "
          "or below 0.",
          describe_budget(runs)));
  if (std::string mixed = mixed_ranks_warning(rank_counts); !mixed.empty()) {
    log::warn(mixed);
    c.doc.note(mixed);
  }
  std::vector<std::string> heads;
  for (auto& b : a.batches) heads.push_back(b.headline);
  c.doc.bullets(heads);

  std::vector<Row> cmp, cmp_csv;
  for (auto& b : a.batches) {
    Row r{b.key.label()};
    for (int k = 0; k < 3; ++k)
      r.push_back(b.point[k] < 0 ? "—" : acc_cell(a.points[size_t(b.point[k])].acc));
    for (const Comparison* cm : {&b.vs_full, &b.vs_random}) {
      for (auto& cell : diff_cells(*cm)) r.push_back(cell);
      const MeanCI& d = cm->pd.diff;
      std::string seeds;
      for (int64_t s : cm->pd.seeds) seeds += cat(seeds.empty() ? "" : " ", s);
      cmp_csv.push_back({std::to_string(b.key.batch), std::to_string(b.key.requested),
                         "filtered-" + cm->other, std::to_string(d.n), fmt(d.mean), fmt(d.lo),
                         fmt(d.hi), fmt(d.half), verdict_key(*cm), seeds});
    }
    cmp.push_back(r);
  }
  write_csv(c.dir + "/data/paired_differences.csv",
            {"global_batch", "requested_global_batch", "comparison", "pairs", "mean_diff",
             "ci95_low", "ci95_high", "ci95_half", "verdict", "seeds"},
            cmp_csv);
  c.doc.table({"global batch", "full %", "filtered %", "random %", "filtered − full",
               "95 % CI", "pairs", "filtered − random", "95 % CI", "pairs"},
              cmp,
              "Mean test accuracy per arm (± 95 % CI half-width) and paired differences in "
              "points");

  std::vector<Row> rows, table;
  bool dup = false, clean = false;
  for (auto& p : a.points) clean |= p.clean_gap.n > 0;
  for (auto& p : a.points) {
    dup |= p.duplicate_seeds > 0;
    rows.push_back({p.arm, std::to_string(p.key.batch), fmt(p.wd), std::to_string(p.acc.n),
                    fmt(p.acc.mean), fmt(p.acc_range.std), fmt(p.acc_range.min),
                    fmt(p.acc_range.max), fmt(p.best.mean), fmt(p.gap.mean), fmt(p.gap.std),
                    fmt(p.acc.half), fmt(p.acc.lo), fmt(p.acc.hi), std::to_string(p.key.requested),
                    std::to_string(p.diverged), std::to_string(p.collapsed),
                    fmt(p.acc.has_ci() ? p.acc.half : 0.0), fmt(p.clean_gap.mean),
                    fmt(p.clean_gap.std)});
    Row row{p.key.label(), p.arm, std::to_string(p.acc.n), acc_cell(p.acc),
            pct(p.acc_range.min) + " – " + pct(p.acc_range.max), pct(p.best.mean),
            pct(p.gap.mean)};
    if (clean) row.push_back(pct(p.clean_gap.mean));
    for (std::string cell : {p.diverged ? cat(p.diverged, " diverged") : std::string("0"),
                             std::to_string(p.collapsed),
                             std::isnan(p.wd) ? std::string("n/a")
                                              : cat(fmt(p.wd, 4), " (of ", p.wd_tried, ")")})
      row.push_back(cell);
    table.push_back(row);
  }
  write_csv(c.dir + "/data/accuracy_vs_batch.csv",
            {"arm", "global_batch", "weight_decay", "seeds", "mean_test_acc", "std_test_acc",
             "min_test_acc", "max_test_acc", "mean_best_test_acc", "mean_gen_gap", "std_gen_gap",
             "ci95_half", "ci95_low", "ci95_high", "requested_global_batch", "diverged_excluded",
             "collapsed", "error_bar", "mean_gen_gap_clean", "std_gen_gap_clean"},
            rows);
  c.doc.paragraph(
      "Per arm and batch: final test accuracy in percent, mean ± half-width of the 95 % "
      "Student-t interval over the seeds (t_{0.975, n−1} · sd / √n; one seed gives no "
      "interval). Diverged runs are left out and counted; collapsed runs stay in. Where several "
      "weight decays were run, each arm shows the one with the best mean: a choice made after "
      "seeing the results, so the intervals are somewhat optimistic.");
  // The gap is measured against the labels trained on: say so, since with label noise it
  // is negative for a model that does not memorise the wrong ones (issue 30, item 4).
  c.doc.paragraph(
      clean ? "Gen. gap (given labels): train accuracy on the labels the run trained on − "
              "test accuracy. Some of those labels are wrong, and a model that does not "
              "memorise them is scored wrong on them, so this gap can be negative, and the "
              "filtered arm's looks better only because its wrong labels are gone. Gen. gap "
              "(clean labels): train accuracy on the dataset's clean labels (/train/clean_labels, "
              "counted on the same training passes) − test accuracy. Both are running "
              "accuracies over the last epoch's augmented batches in training mode (and "
              "outlier images have no class to learn), so the second can stay below zero too."
            : "Gen. gap: train accuracy on the labels the run trained on (running accuracy of "
              "the last epoch) − test accuracy.");
  std::vector<std::string> head{"global batch", "arm", "seeds", "mean % ± 95 % CI", "range %",
                                "best-epoch %", clean ? "gen. gap % (given labels)" : "gen. gap %"};
  if (clean) head.push_back("gen. gap % (clean labels)");
  for (const char* h : {"excluded", "collapsed", "weight decay"}) head.push_back(h);
  c.doc.table(head, table, "Accuracy and generalization gap per arm and batch");
  if (dup)
    c.doc.note("Some seeds were run more than once in one arm at one batch and weight decay "
               "(another swept key): they are in the means but not paired.");
  marked_runs(c, a);
  accuracy_figures(c, a);
}

void section_throughput(SectionContext& c) {
  c.doc.section("Throughput and scaling efficiency", "throughput");
  std::map<int64_t, std::vector<double>> by_k;
  for (auto& r : c.data.runs)
    if (!std::isnan(r.images_per_s) && r.images_per_s > 0) by_k[r.ranks].push_back(r.images_per_s);
  if (by_k.empty()) {
    c.doc.note("No run reported images_per_s: throughput section omitted.");
    return;
  }
  const int64_t k_ref = by_k.begin()->first;
  const double tau_ref = stats_of(by_k.begin()->second).mean;
  std::vector<Row> rows, table;
  for (auto& [k, v] : by_k) {
    Stats s = stats_of(v);
    const double ideal = double(k) / double(k_ref) * tau_ref;
    rows.push_back({std::to_string(k), std::to_string(s.n), fmt(s.mean), fmt(s.std),
                    fmt(s.mean / double(k)), fmt(ideal), fmt(s.mean / ideal)});
    table.push_back({std::to_string(k), std::to_string(s.n), fixed(s.mean, 1), fixed(s.std, 1),
                     fixed(s.mean / double(k), 1), fixed(ideal, 1), pct(s.mean / ideal, 1)});
  }
  write_csv(c.dir + "/data/throughput.csv",
            {"ranks", "runs", "images_per_s", "std_images_per_s", "images_per_s_per_rank",
             "ideal_images_per_s", "efficiency"},
            rows);
  c.doc.paragraph(
      cat("Measured training throughput τ_K (images/s of the whole job) against the "
          "ideal K·τ_ref/K_ref, with K_ref = ",
          k_ref, " rank(s), τ_ref = ", fixed(tau_ref, 1), " images/s. Efficiency = τ_K / ideal."));
  c.doc.table({"ranks K", "runs", "τ_K img/s", "std", "per rank", "ideal", "efficiency %"}, table,
              "Throughput vs ranks");
  std::string gp =
      terminal_line(c.format, 900, 560) +
      cat("set output ", gp_quote(c.figure_path("throughput_vs_ranks")), "\n",
          "set datafile separator ','\nset logscale xy 2\nset grid\nset key top left\n"
          "set xlabel 'ranks K'\nset ylabel 'images/s'\n"
          "set title 'Throughput τ_K vs ranks (measured) and K·τ_ref (ideal)'\n"
          "set xrange [*:*]\n"
          "plot 'data/throughput.csv' using 1:3:4 skip 1 with yerrorlines lw 2 pt 7 "
          "title 'measured τ_K', '' using 1:6 skip 1 with lines dt 2 lw 2 title 'ideal "
          "K·τ_{ref}'\n");
  run_gnuplot(c.dir, "throughput_vs_ranks", gp, c.figure_path("throughput_vs_ranks"));
  c.doc.figure(c.figure_path("throughput_vs_ranks"), "Throughput vs ranks, measured and ideal",
               {"data/throughput.csv"}, "fig-throughput");
}

namespace {

// The figures the memorisation test judged by (train/crossfit.hpp, memorised): the last
// training accuracy against the held-out peak, and (where recorded: a negative training
// accuracy is "not recorded") the training accuracy where the held-out curve last rose.
std::string memorisation_figures(double train_acc, double peak_acc, double stall_epoch,
                                 double stall_train_acc) {
  std::string f = cat(" (last training accuracy ", pct(train_acc), " % against the held-out peak ",
                      pct(peak_acc), " %");
  if (!std::isnan(stall_epoch) && stall_train_acc >= 0)  // false for NaN too
    f += cat("; ", pct(stall_train_acc), " % at epoch ", fmt(stall_epoch),
             ", where the held-out accuracy last rose measurably");
  return f + ")";
}

// What the early-learning model (the features' source) was and whether the run memorised
// its labels, from pretrain/model_early.json; where a cross-entropy run memorised, the advice
// measured in docs/detection.md (thirteenth session).
void early_model_paragraph(SectionContext& c) {
  const EarlyModelInfo& e = c.data.pretrain_early;
  if (!e.present || std::isnan(e.epoch) || std::isnan(e.holdout_acc)) return;  // no evaluation yet
  std::string p =
      cat("The features come from the early-learning model (pretrain/model_early.h5): epoch ",
          fmt(e.epoch), ", held-out accuracy ", pct(e.holdout_acc),
          " % (against the given labels, wrong ones included)");
  if (e.pick == "guarded" && !std::isnan(e.peak_acc))
    p += cat(", the guarded pick (the highest: ", pct(e.peak_acc), " % at epoch ",
             fmt(e.peak_epoch), ")");
  p += ".";
  if (!std::isnan(e.first_train_acc))
    p +=
        cat(" It is the second pretraining of this run: the first, with the cross-entropy, "
            "memorised its training labels",
            memorisation_figures(e.first_train_acc, e.first_peak_acc, e.first_guarded_epoch,
                                 e.first_guarded_train_acc),
            ", so pretrain.loss: auto trained again with ", e.loss,
            " (the generalized cross-entropy, measured to find more of the wrong labels on such "
            "data; docs/detection.md)",
            std::isnan(e.first_elapsed_s)
                ? std::string()
                : cat("; the first took ", std::lround(e.first_elapsed_s), " s"),
            ".");
  if (e.memorised >= 0 && !std::isnan(e.peak_acc) && !std::isnan(e.train_acc)) {
    const std::string figures =
        memorisation_figures(e.train_acc, e.peak_acc, e.guarded_epoch, e.guarded_train_acc);
    if (e.memorised) {
      p +=
          cat(" The run memorised its training labels", figures,
              ": its later epochs fit the wrong labels too, which is why the early model is used.");
      if (e.loss == "cross_entropy")
        p += " Where a cross-entropy run memorised, a second run with pretrain.loss: gce (the "
             "generalized cross-entropy) found more of the wrong labels in 14 of the 15 cells "
             "measured (F1 -0.01 to +0.22, docs/detection.md): pretrain.loss: auto (the "
             "default) does that by itself.";
    } else {
      p += cat(" The run did not memorise its training labels", figures, ".");
    }
  }
  c.doc.paragraph(p);
}

}  // namespace

namespace {

// The pretraining curve's columns, one row per line of a metrics.jsonl (`path` in errors).
const char* const kPretrainColumns[] = {"epoch",     "train_loss", "train_acc",
                                        "test_loss", "test_acc",   "images_per_s"};

std::vector<Row> pretrain_rows(const std::vector<Json>& m, const std::string& path) {
  std::vector<Row> rows;
  for (size_t i = 0; i < m.size(); ++i) {
    const Json& j = m[i];
    SIEVE_CHECK(j.is_object(), path, ": line ", i + 1, ": expected a JSON object");
    Row r{j.contains("epoch") && j["epoch"].is_number() ? fmt(j["epoch"].get<double>())
                                                        : std::to_string(i + 1)};
    for (size_t k = 1; k < std::size(kPretrainColumns); ++k) {
      const char* key = kPretrainColumns[k];
      auto it = j.find(key);
      if (it != j.end() && !it->is_null() && !it->is_number())
        throw Error(cat(path, ": line ", i + 1, ": field '", key, "': expected a number, found ",
                        it->type_name()));
      r.push_back(it != j.end() && it->is_number() ? fmt(it->get<double>()) : "");
    }
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

void section_pretrain(SectionContext& c) {
  c.doc.section("Pretraining (feature extractor)", "pretrain");
  const auto& m = c.data.pretrain_metrics;
  if (m.empty()) {
    c.doc.note(cat("No pretraining metrics (", c.data.pretrain_metrics_path, ")."));
    return;
  }
  const Row columns(std::begin(kPretrainColumns), std::end(kPretrainColumns));
  const std::vector<Row> rows = pretrain_rows(m, c.data.pretrain_metrics_path);
  write_csv(c.dir + "/data/pretrain_metrics.csv", columns, rows);
  const Row& last = rows.back();
  c.doc.paragraph(cat(m.size(), " epochs logged; last epoch ", last[0], ": train accuracy ",
                      last[2].empty() ? "n/a" : pct(std::stod(last[2])), " %, test accuracy ",
                      last[4].empty() ? "n/a" : pct(std::stod(last[4])), " %."));
  early_model_paragraph(c);
  // pretrain.loss auto's first run (where it trained twice), beside the kept one: the
  // memorisation that made it retrain shows as its training accuracy running away.
  std::vector<std::string> csvs{"data/pretrain_metrics.csv"};
  std::string first_lines;
  if (!c.data.pretrain_first_metrics.empty()) {
    write_csv(c.dir + "/data/pretrain_first_pass_metrics.csv", columns,
              pretrain_rows(c.data.pretrain_first_metrics, c.data.pretrain_first_metrics_path));
    csvs.push_back("data/pretrain_first_pass_metrics.csv");
    first_lines =
        ", 'data/pretrain_first_pass_metrics.csv' skip 1 using 1:(100*$3) with l lc 1 dt 3 lw 2 "
        "title 'first run (cross-entropy): train acc', '' skip 1 using 1:(100*$5) with l lc 2 "
        "dt 3 lw 2 title 'first run: test acc'";
  }
  std::string gp = terminal_line(c.format, 900, 480) +
                   cat("set output ", gp_quote(c.figure_path("pretrain_curve")), "\n",
                       "set datafile separator ','\nset grid\nset key bottom right\n"
                       "set xlabel 'epoch'\nset ylabel 'accuracy (%)'\nset y2label 'loss'\n"
                       "set ytics nomirror\nset y2tics\nset title 'Pretraining'\n"
                       "plot 'data/pretrain_metrics.csv' skip 1 using 1:(100*$3) with lp lw 2 "
                       "title 'train acc', '' skip 1 using 1:(100*$5) with lp lw 2 title 'test "
                       "acc', '' skip 1 using 1:2 axes x1y2 with l dt 2 title 'train loss'",
                       first_lines, "\n");
  run_gnuplot(c.dir, "pretrain_curve", gp, c.figure_path("pretrain_curve"));
  c.doc.figure(c.figure_path("pretrain_curve"),
               first_lines.empty() ? "Pretraining accuracy and loss per epoch"
                                   : "Pretraining accuracy and loss per epoch (dotted: the "
                                     "first run, which memorised, before the kept one)",
               csvs, "fig-pretrain");
}

}  // namespace sieve::report
