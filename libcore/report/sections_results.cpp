// Sections over the train_scaled runs: accuracy and generalization gap vs global batch,
// throughput and scaling efficiency vs ranks; and the pretraining curve.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "report/sections.hpp"

namespace sieve::report {

Stats stats_of(const std::vector<double>& v) {
  Stats s;
  double sum = 0;
  for (double x : v) {
    if (std::isnan(x)) continue;
    sum += x;
    s.min = s.n == 0 ? x : std::min(s.min, x);
    s.max = s.n == 0 ? x : std::max(s.max, x);
    ++s.n;
  }
  if (s.n == 0) return s;
  s.mean = sum / double(s.n);
  double ss = 0;
  for (double x : v)
    if (!std::isnan(x)) ss += (x - s.mean) * (x - s.mean);
  s.std = s.n > 1 ? std::sqrt(ss / double(s.n - 1)) : 0.0;
  return s;
}

namespace {

const char* kArms[] = {"full", "filtered", "random"};
const char* kArmColor[] = {"#1f77b4", "#2ca02c", "#d62728"};

// One point of the accuracy curve: an arm at a batch size, over seeds, at the weight decay
// with the best mean accuracy there (the paper tunes weight decay per batch size).
struct Point {
  std::string arm;
  int64_t batch = 0;
  double wd = kNaN;
  Stats acc, best, gap;
  int64_t wd_tried = 1;
};

std::vector<Point> aggregate(const std::vector<RunResult>& runs) {
  // (arm, batch) -> wd -> runs
  std::map<std::pair<std::string, int64_t>, std::map<double, std::vector<const RunResult*>>> g;
  for (auto& r : runs)
    g[{r.arm, r.global_batch}][std::isnan(r.weight_decay) ? -1.0 : r.weight_decay].push_back(&r);
  std::vector<Point> out;
  for (const char* arm : kArms) {
    for (auto& [key, by_wd] : g) {
      if (key.first != arm) continue;
      Point best_pt;
      bool have = false;
      for (auto& [wd, rs] : by_wd) {
        std::vector<double> acc, best, gap;
        for (auto* r : rs)
          acc.push_back(r->final_test_acc), best.push_back(r->best_test_acc),
              gap.push_back(r->gen_gap);
        Point p{key.first,      key.second,    wd < 0 ? kNaN : wd,   stats_of(acc),
                stats_of(best), stats_of(gap), int64_t(by_wd.size())};
        if (!have || (!std::isnan(p.acc.mean) && !(p.acc.mean <= best_pt.acc.mean))) best_pt = p;
        have = true;
      }
      out.push_back(best_pt);
    }
  }
  return out;
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
  // Every run, as read.
  std::vector<Row> all;
  for (auto& r : runs)
    all.push_back({std::to_string(r.index), r.arm, std::to_string(r.global_batch),
                   std::to_string(r.ranks), std::to_string(r.per_rank_batch),
                   std::to_string(r.seed), fmt(r.weight_decay), fmt(r.lr), fmt(r.final_test_acc),
                   fmt(r.best_test_acc), fmt(r.train_acc), fmt(r.gen_gap), fmt(r.time_to_best_s),
                   fmt(r.images_per_s), std::to_string(r.samples)});
  write_csv(c.dir + "/data/runs.csv",
            {"index", "arm", "global_batch", "ranks", "per_rank_batch", "seed", "weight_decay",
             "lr", "final_test_acc", "best_test_acc", "train_acc", "gen_gap", "time_to_best_s",
             "images_per_s", "samples"},
            all);

  auto pts = aggregate(runs);
  std::vector<Row> rows, table;
  for (auto& p : pts) {
    rows.push_back({p.arm, std::to_string(p.batch), fmt(p.wd), std::to_string(p.acc.n),
                    fmt(p.acc.mean), fmt(p.acc.std), fmt(p.acc.min), fmt(p.acc.max),
                    fmt(p.best.mean), fmt(p.gap.mean), fmt(p.gap.std)});
    table.push_back({std::to_string(p.batch), p.arm, std::to_string(p.acc.n), pct(p.acc.mean),
                     pct(p.acc.std), pct(p.acc.min) + " – " + pct(p.acc.max), pct(p.best.mean),
                     pct(p.gap.mean), std::isnan(p.wd) ? "n/a" : fmt(p.wd, 4)});
  }
  write_csv(c.dir + "/data/accuracy_vs_batch.csv",
            {"arm", "global_batch", "weight_decay", "seeds", "mean_test_acc", "std_test_acc",
             "min_test_acc", "max_test_acc", "mean_best_test_acc", "mean_gen_gap", "std_gen_gap"},
            rows);
  c.doc.paragraph(cat(runs.size(), " runs read from ", c.data.sweep_dir,
                      ". Accuracies are final test accuracies in percent, mean ± sample std over "
                      "seeds; where several weight decays were tried, the row shows the one with "
                      "the best mean."));

  // Side by side per batch: the paper's headline comparison.
  std::set<int64_t> batches;
  for (auto& p : pts) batches.insert(p.batch);
  std::vector<Row> cmp;
  for (int64_t b : batches) {
    double m[3] = {kNaN, kNaN, kNaN};
    for (auto& p : pts)
      for (int a = 0; a < 3; ++a)
        if (p.batch == b && p.arm == kArms[a]) m[a] = p.acc.mean;
    cmp.push_back({std::to_string(b), pct(m[0]), pct(m[1]), pct(m[2]),
                   std::isnan(m[0]) || std::isnan(m[1]) ? "n/a" : fixed(100 * (m[1] - m[0]), 2),
                   std::isnan(m[2]) || std::isnan(m[1]) ? "n/a" : fixed(100 * (m[1] - m[2]), 2)});
  }
  c.doc.table(
      {"global batch", "full %", "filtered %", "random %", "filtered − full", "filtered − random"},
      cmp, "Mean test accuracy per arm");
  c.doc.table({"global batch", "arm", "seeds", "mean %", "std %", "range %", "best-epoch %",
               "gen. gap %", "weight decay"},
              table, "Accuracy and generalization gap per arm and batch");

  // Figures: one series per arm; strcol() filters the long-format CSV.
  std::string acc = terminal_line(c.format, 900, 560) +
                    cat("set output ", gp_quote(c.figure_path("accuracy_vs_batch")), "\n",
                        "set datafile separator ','\n"
                        "set logscale x 2\nset grid\nset key bottom left\n"
                        "set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05\n"
                        "set xlabel 'global batch size'\nset ylabel 'test accuracy (%)'\n"
                        "set title 'Test accuracy vs global batch (mean ± std over seeds)'\n"
                        "plot ");
  std::string gap = terminal_line(c.format, 900, 560) +
                    cat("set output ", gp_quote(c.figure_path("gen_gap_vs_batch")), "\n",
                        "set datafile separator ','\nset logscale x 2\nset grid\n"
                        "set xlabel 'global batch size'\nset ylabel 'train − test accuracy (%)'\n"
                        "set title 'Generalization gap vs global batch'\nplot ");
  bool first = true;
  for (int a = 0; a < 3; ++a) {
    bool any = false;
    for (auto& p : pts) any |= p.arm == kArms[a] && !std::isnan(p.acc.mean);
    if (!any) continue;
    std::string sel = cat("(strcol(1) eq '", kArms[a], "' ? ");
    acc += cat(first ? "" : ", ", "'data/accuracy_vs_batch.csv' skip 1 using 2:", sel,
               "100*$5 : NaN):(100*$6) with yerrorlines lw 2 pt 7 lc rgb '", kArmColor[a],
               "' title '", kArms[a], "'");
    gap += cat(first ? "" : ", ", "'data/accuracy_vs_batch.csv' skip 1 using 2:", sel,
               "100*$10 : NaN):(100*$11) with yerrorlines lw 2 pt 7 lc rgb '", kArmColor[a],
               "' title '", kArms[a], "'");
    first = false;
  }
  if (first) {
    c.doc.note("No run reported a test accuracy: figures omitted.");
    return;
  }
  run_gnuplot(c.dir, "accuracy_vs_batch", acc + "\n", c.figure_path("accuracy_vs_batch"));
  run_gnuplot(c.dir, "gen_gap_vs_batch", gap + "\n", c.figure_path("gen_gap_vs_batch"));
  c.doc.figure(c.figure_path("accuracy_vs_batch"),
               "Test accuracy vs global batch for full, filtered and random data",
               {"data/accuracy_vs_batch.csv", "data/runs.csv"}, "fig-accuracy");
  c.doc.figure(c.figure_path("gen_gap_vs_batch"), "Generalization gap (train − test) vs batch",
               {"data/accuracy_vs_batch.csv"}, "fig-gap");
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

void section_pretrain(SectionContext& c) {
  c.doc.section("Pretraining (feature extractor)", "pretrain");
  const auto& m = c.data.pretrain_metrics;
  if (m.empty()) {
    c.doc.note(cat("No pretraining metrics (", c.data.pretrain_metrics_path, ")."));
    return;
  }
  const char* keys[] = {"train_loss", "train_acc", "test_loss", "test_acc", "images_per_s"};
  std::vector<Row> rows;
  for (size_t i = 0; i < m.size(); ++i) {
    const Json& j = m[i];
    SIEVE_CHECK(j.is_object(), c.data.pretrain_metrics_path, ": line ", i + 1,
                ": expected a JSON object");
    Row r{j.contains("epoch") && j["epoch"].is_number() ? fmt(j["epoch"].get<double>())
                                                        : std::to_string(i + 1)};
    for (const char* k : keys) {
      auto it = j.find(k);
      if (it != j.end() && !it->is_null() && !it->is_number())
        throw Error(cat(c.data.pretrain_metrics_path, ": line ", i + 1, ": field '", k,
                        "': expected a number, found ", it->type_name()));
      r.push_back(it != j.end() && it->is_number() ? fmt(it->get<double>()) : "");
    }
    rows.push_back(r);
  }
  write_csv(c.dir + "/data/pretrain_metrics.csv",
            {"epoch", "train_loss", "train_acc", "test_loss", "test_acc", "images_per_s"}, rows);
  const Row& last = rows.back();
  c.doc.paragraph(cat(m.size(), " epochs logged; last epoch ", last[0], ": train accuracy ",
                      last[2].empty() ? "n/a" : pct(std::stod(last[2])), " %, test accuracy ",
                      last[4].empty() ? "n/a" : pct(std::stod(last[4])), " %."));
  std::string gp = terminal_line(c.format, 900, 480) +
                   cat("set output ", gp_quote(c.figure_path("pretrain_curve")), "\n",
                       "set datafile separator ','\nset grid\nset key bottom right\n"
                       "set xlabel 'epoch'\nset ylabel 'accuracy (%)'\nset y2label 'loss'\n"
                       "set ytics nomirror\nset y2tics\nset title 'Pretraining'\n"
                       "plot 'data/pretrain_metrics.csv' skip 1 using 1:(100*$3) with lp lw 2 "
                       "title 'train acc', '' skip 1 using 1:(100*$5) with lp lw 2 title 'test "
                       "acc', '' skip 1 using 1:2 axes x1y2 with l dt 2 title 'train loss'\n");
  run_gnuplot(c.dir, "pretrain_curve", gp, c.figure_path("pretrain_curve"));
  c.doc.figure(c.figure_path("pretrain_curve"), "Pretraining accuracy and loss per epoch",
               {"data/pretrain_metrics.csv"}, "fig-pretrain");
}

}  // namespace sieve::report
