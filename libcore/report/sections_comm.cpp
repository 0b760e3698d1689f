// Section "Communication strategies": the traced benchmark runs of scripts/bench_comm.sh
// (report.comm.bench_dir) side by side, their step timeline summarised (report/timeline.hpp),
// the allreduce calibration fitted on this machine, and the per-strategy step-time model
// (report/estimates.hpp predict_strategies) to report.estimate.max_ranks beside the
// measured points.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "comm/calibration.hpp"
#include "report/estimates.hpp"
#include "report/sections.hpp"
#include "report/timeline.hpp"

namespace sieve::report {
namespace fs = std::filesystem;

namespace {

std::vector<CommCalibration> read_calibrations(const std::string& dir) {
  std::vector<CommCalibration> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("calibration-", 0) == 0 && e.path().extension() == ".json")
      out.push_back(read_calibration(e.path().string()));
  }
  std::sort(out.begin(), out.end(),
            [](const CommCalibration& a, const CommCalibration& b) { return a.ranks < b.ranks; });
  return out;
}

void timeline_figure(SectionContext& c, const std::vector<StepSplit>& runs) {
  std::vector<Row> rows, table;
  for (const auto& r : runs) {
    rows.push_back({cat(r.strategy, " ", r.ranks, "r"), r.strategy, std::to_string(r.ranks),
                    fmt(1e3 * r.step_s), fmt(1e3 * r.compute_s), fmt(1e3 * r.exposed_comm_s),
                    fmt(1e3 * r.negotiate_s), fmt(1e3 * r.data_s), fmt(1e3 * r.optimizer_s),
                    fmt(1e3 * std::max(0.0, r.other_s))});
    table.push_back({r.strategy, std::to_string(r.ranks), fixed(1e3 * r.step_s, 1),
                     fixed(1e3 * r.compute_s, 1), fixed(1e3 * r.exposed_comm_s, 1),
                     fixed(1e3 * r.negotiate_s, 1), fixed(1e3 * r.data_s, 2),
                     fixed(1e3 * r.optimizer_s, 2), pct(r.exposed_comm_s / r.step_s, 1)});
  }
  write_csv(c.dir + "/data/comm_timeline.csv",
            {"label", "strategy", "ranks", "step_ms", "compute_ms", "exposed_comm_ms",
             "negotiate_ms", "data_ms", "optimizer_ms", "other_ms"},
            rows);
  const StepSplit& any = runs.front();
  c.doc.paragraph(
      cat("Traced pretrain runs (", any.arch, " width ", fmt(any.width), ", ",
          any.ranks > 0 ? fmt(double(any.global_batch) / any.ranks) : std::string("?"),
          " samples per rank): the mean step on the main thread of each rank, split by the "
          "trainer's own spans "
          "into compute (forward/backward), exposed communication (time blocked in a reduction, "
          "the BN broadcast or the step statistics; for fusion-queue the agreement rounds "
          "included), waiting for data and the optimizer. Communication that overlaps backward "
          "is not counted: only what the step waits for. First step (warm-up) excluded."));
  c.doc.table({"strategy", "ranks", "step ms", "compute ms", "exposed comm ms",
               "of which negotiation", "data ms", "optimizer ms", "exposed %"},
              table, "Step time per communication strategy (timeline summary)");
  std::string gp =
      terminal_line(c.format, 900, 520) +
      cat("set output ", gp_quote(c.figure_path("comm_timeline")), "\n",
          "set datafile separator ','\nset style data histogram\n"
          "set style histogram rowstacked\nset style fill solid 0.85 border -1\n"
          "set boxwidth 0.7\nset grid y\nset key outside right top\nset xtics rotate by -30\n"
          "set ylabel 'ms per step (mean over ranks)'\n"
          "set title 'Where a step goes, per strategy and rank count (from --trace)'\n"
          "plot 'data/comm_timeline.csv' skip 1 using 5:xtic(1) title 'compute', "
          "'' skip 1 using ($6-$7) title 'exposed comm', '' skip 1 using 7 title "
          "'negotiation', '' skip 1 using 8 title 'data wait', '' skip 1 using 9 title "
          "'optimizer', '' skip 1 using 10 title 'other'\n");
  run_gnuplot(c.dir, "comm_timeline", gp, c.figure_path("comm_timeline"));
  c.doc.figure(c.figure_path("comm_timeline"), "Step timeline summary per strategy",
               {"data/comm_timeline.csv"}, "fig-comm-timeline");
}

void calibration_table(SectionContext& c, const std::vector<CommCalibration>& cals) {
  std::vector<Row> table;
  for (const auto& k : cals) {
    const RingEquivalent r = ring_equivalent(k);
    table.push_back({std::to_string(k.ranks), fixed(k.alpha_s * 1e6, 2),
                     fixed(k.beta_s_per_byte * 1e9, 3), fixed(1e-9 / k.beta_s_per_byte, 2),
                     fixed(k.r2_relative, 3), fixed(r.latency_s * 1e6, 2),
                     fixed(r.bandwidth_bytes_per_s * 8e-9, 2), k.machine});
  }
  c.doc.paragraph(
      "MPI_Allreduce on this machine (bench_core_allreduce, OSU-style sizes 4 B to 16 MiB), "
      "fitted t = α + n·β by least squares weighted 1/t; the ring-equivalent latency and link "
      "bandwidth are what the scaling model below uses.");
  c.doc.table({"ranks", "α µs", "β ns/B", "GB/s", "R² (weighted)", "ring latency µs",
               "ring link Gbit/s", "machine"},
              table, "Allreduce calibration");
}

void prediction(SectionContext& c, const std::vector<StepSplit>& runs, const CommCalibration& cal,
                const std::string& cal_how) {
  // Compute per sample from the least-oversubscribed buckets run.
  const StepSplit* ref = nullptr;
  for (const auto& r : runs)
    if (r.strategy == "buckets" && (!ref || r.ranks < ref->ranks)) ref = &r;
  if (!ref || ref->global_batch <= 0 || ref->ranks <= 0) {
    c.doc.note("No traced buckets run with a global batch: strategy prediction omitted.");
    return;
  }
  StrategyModelInputs in;
  in.per_rank_batch = double(ref->global_batch) / ref->ranks;
  in.compute_s_per_sample = ref->compute_s / in.per_rank_batch;
  in.tensors = ref->tensors;
  const RingEquivalent eq = ring_equivalent(cal);
  in.latency_s = eq.latency_s;
  in.bandwidth_bytes_per_s = eq.bandwidth_bytes_per_s;
  in.grad_bytes = 4.0 * ref->params;
  in.bucket_bytes = ref->bucket_mb * 1048576.0;
  in.cycle_s = ref->cycle_ms * 1e-3;
  in.fusion_bytes = ref->fusion_mb * 1048576.0;
  in.servers = ref->servers;
  auto pts = predict_strategies(in, c.cfg.get_int("report.estimate.max_ranks"));
  // Anchoring: what the model does not explain at the reference rank count (the measured
  // non-compute time minus the modelled exposed time: progress only inside MPI calls, rank
  // imbalance, time slicing) is carried as a constant to every p, so each curve passes
  // through its measured point and the model supplies only the growth with p.
  std::map<std::string, double> residual;
  for (const auto& r : runs)
    if (r.ranks == ref->ranks)
      for (const auto& p : pts)
        if (p.ranks == r.ranks && p.strategy == r.strategy)
          residual[r.strategy] = (r.step_s - r.compute_s) - p.exposed_s;
  for (auto& p : pts) {
    p.exposed_s += residual[p.strategy];
    p.step_s = p.compute_s + p.exposed_s;
    p.efficiency = p.compute_s / p.step_s;
  }
  // The figure compares the non-compute part of a step (step - compute): more ranks than
  // cores multiply the measured compute (4 ranks on 2 cores: twice), not the communication.
  std::map<int64_t, std::map<std::string, double>> pred, meas;
  for (const auto& p : pts) pred[p.ranks][p.strategy] = p.exposed_s;
  for (const auto& r : runs) meas[r.ranks][r.strategy] = r.step_s - r.compute_s;
  std::vector<Row> rows;
  auto cell = [](const std::map<std::string, double>& m, const char* k) {
    auto it = m.find(k);
    return it == m.end() ? std::string("NaN") : fmt(it->second);
  };
  std::map<int64_t, int> all;
  for (auto& [p, _] : pred) all[p];
  for (auto& [p, _] : meas) all[p];
  for (auto& [p, _] : all) {
    const auto& pr = pred[p];
    const auto& me = meas[p];
    rows.push_back({std::to_string(p), cell(pr, "buckets"), cell(pr, "fusion-queue"),
                    cell(pr, "parameter-server"), cell(me, "buckets"), cell(me, "fusion-queue"),
                    cell(me, "parameter-server")});
  }
  write_csv(
      c.dir + "/data/comm_prediction.csv",
      {"ranks", "pred_buckets_noncompute_s", "pred_fusion_noncompute_s", "pred_ps_noncompute_s",
       "meas_buckets_noncompute_s", "meas_fusion_noncompute_s", "meas_ps_noncompute_s"},
      rows);
  std::vector<Row> table;
  for (const auto& p : pts)
    if (p.ranks == 2 || p.ranks == 4 || p.ranks == 64 || p.ranks == 256 ||
        p.ranks == pts.back().ranks)
      table.push_back({p.strategy, std::to_string(p.ranks), fixed(1e3 * p.compute_s, 2),
                       fixed(1e3 * (p.exposed_s - residual[p.strategy]), 2),
                       fixed(1e3 * residual[p.strategy], 2), fixed(1e3 * p.step_s, 2),
                       pct(p.efficiency, 1)});
  c.doc.paragraph(cat(
      "Predicted step time per strategy (weak scaling: ", fmt(in.per_rank_batch),
      " samples per rank as in the traced runs, ", fmt(in.grad_bytes / 1048576.0, 3),
      " MiB of gradients), with the ", cal_how, " and the compute per sample measured in the ",
      ref->ranks,
      "-rank buckets trace. Model (report/estimates.hpp): buckets overlap all but the last "
      "bucket with backward; fusion-queue pays half a cycle and an agreement round after "
      "backward and starts its reductions a cycle late; the parameter server's pull is never "
      "overlapped and its tree reduce/broadcast grow with log2 p. The measured non-compute time "
      "the model does not explain at ",
      ref->ranks,
      " ranks (MPI progress only inside MPI calls, rank imbalance, time slicing) is added to "
      "every p, so each curve passes through its measured point. The figure shows the step time "
      "beyond compute (more ranks than cores multiply the measured compute, not the "
      "communication); points: measured."));
  c.doc.table({"strategy", "ranks", "compute ms", "modelled exposed ms", "unexplained ms (added)",
               "step ms", "efficiency %"},
              table, "Predicted step time per strategy");
  std::string gp =
      terminal_line(c.format, 1100, 560) +
      cat("set output ", gp_quote(c.figure_path("comm_prediction")), "\n",
          "set datafile separator ','\nset logscale xy 2\nset grid\nset key outside right top\n"
          "set xlabel 'ranks p'\nset ylabel 'non-compute time per step (s)'\nset format y '%g'\n"
          "set title 'Step time beyond compute per strategy: model (lines), this machine "
          "(points)'\n"
          "plot 'data/comm_prediction.csv' skip 1 using 1:2 with l lw 2 lc 1 title 'buckets', "
          "'' skip 1 using 1:3 with l lw 2 lc 2 title 'fusion-queue', '' skip 1 using 1:4 "
          "with l lw 2 lc 3 title 'parameter-server', '' skip 1 using 1:5 with p pt 7 ps 1.5 "
          "lc 1 title 'buckets (measured)', '' skip 1 using 1:6 with p pt 5 ps 1.5 lc 2 title "
          "'fusion-queue (measured)', '' skip 1 using 1:7 with p pt 9 ps 1.5 lc 3 title "
          "'parameter-server (measured)'\n");
  run_gnuplot(c.dir, "comm_prediction", gp, c.figure_path("comm_prediction"));
  c.doc.figure(c.figure_path("comm_prediction"),
               "Predicted and measured step time beyond compute, per strategy",
               {"data/comm_prediction.csv", "data/comm_timeline.csv"}, "fig-comm-prediction");
}

}  // namespace

void section_comm(SectionContext& c) {
  c.doc.section("Communication strategies side by side", "comm");
  const std::string dir = c.cfg.get_string("report.comm.bench_dir");
  if (dir.empty() || !fs::is_directory(dir)) {
    c.doc.note(cat("No communication benchmark (report.comm.bench_dir ",
                   dir.empty() ? "unset" : cat("'", dir, "' missing"),
                   "; scripts/bench_comm.sh writes one): section omitted."));
    return;
  }
  const std::vector<StepSplit> runs = summarize_traces(dir);
  const std::vector<CommCalibration> cals = read_calibrations(dir);
  if (runs.empty())
    c.doc.note(cat("No trace-*.json in ", dir, ": timeline summary omitted."));
  else
    timeline_figure(c, runs);
  if (!cals.empty()) calibration_table(c, cals);
  // The model uses report.network.calibration when given, else the widest benchmark fit.
  const std::string cfg_cal = c.cfg.get_string("report.network.calibration");
  if (!runs.empty() && (!cfg_cal.empty() || !cals.empty())) {
    const CommCalibration cal = cfg_cal.empty() ? cals.back() : read_calibration(cfg_cal);
    prediction(c, runs, cal,
               cat("allreduce fit of ", cal.ranks, " ranks (",
                   cfg_cal.empty() ? "benchmark directory" : cfg_cal, ")"));
  }
}

}  // namespace sieve::report
