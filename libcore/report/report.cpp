#include "report/report.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>

#include "comm/calibration.hpp"
#include "io/atomic_output.hpp"
#include "report/estimates.hpp"
#include "report/results.hpp"
#include "report/sections.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::report {
namespace {

// N, per-sample shape and classes of the training set: from dataset.h5 when present,
// else from what the config says shard_dataset will produce.
struct DataShape {
  bool known = false;
  int64_t n = 0, classes = 0, bytes_per_sample = 0;
  std::vector<int64_t> shape;
  std::string how;
};

DataShape data_shape(const Config& cfg, const RunData& d) {
  DataShape s;
  if (d.dataset.present) {
    return {true,
            d.dataset.n_train,
            d.dataset.num_classes,
            d.dataset.bytes_per_sample,
            d.dataset.sample_shape,
            "dataset.h5"};
  }
  const std::string src = cfg.get_string("data.source");
  if (src == "synthetic") {
    const int64_t k = cfg.get_int("data.synthetic.classes");
    std::vector<int64_t> shp{cfg.get_int("data.synthetic.height"),
                             cfg.get_int("data.synthetic.width"),
                             cfg.get_int("data.synthetic.channels")};
    return {true, k * cfg.get_int("data.synthetic.train_per_class"),
            k,    shp[0] * shp[1] * shp[2],
            shp,  "config data.synthetic.*"};
  }
  if (src == "cifar10" || src == "cifar100")
    return {true, 50000, src == "cifar10" ? 10 : 100, 3072, {32, 32, 3}, "CIFAR training set"};
  if (src == "mnist") return {true, 60000, 10, 784, {28, 28, 1}, "MNIST training set"};
  return s;
}

// Images/s of one rank: config, else measured in the sweep (median at the fewest ranks),
// else the last pretraining epoch.
double rank_rate(const Config& cfg, const RunData& d, std::string& how) {
  double r = cfg.get_float("report.estimate.images_per_s_per_rank");
  if (r > 0) {
    how = "config report.estimate.images_per_s_per_rank";
    return r;
  }
  std::vector<double> v;
  int64_t kmin = INT64_MAX;
  for (auto& run : d.runs)
    if (run.images_per_s_per_rank > 0) kmin = std::min(kmin, run.ranks);
  for (auto& run : d.runs)
    if (run.images_per_s_per_rank > 0 && run.ranks == kmin) v.push_back(run.images_per_s_per_rank);
  if (!v.empty()) {
    std::sort(v.begin(), v.end());
    how = cat("median of ", v.size(), " sweep runs at ", kmin, " rank(s)");
    return v[v.size() / 2];
  }
  for (auto it = d.pretrain_metrics.rbegin(); it != d.pretrain_metrics.rend(); ++it) {
    if (it->is_object() && it->contains("images_per_s_per_rank") &&
        (*it)["images_per_s_per_rank"].is_number() &&
        (*it)["images_per_s_per_rank"].get<double>() > 0) {
      how = "last pretraining epoch";
      return (*it)["images_per_s_per_rank"].get<double>();
    }
  }
  return 0;
}

// The estimate's inputs, and where each came from (the report shows both).
struct EstimateSetup {
  EstimateInputs in;
  double act_cfg = 0;    // report.estimate.activation_bytes_per_sample (0: estimated)
  std::string rate_how;  // where images/s per rank came from ("": nowhere)
  std::string net_how;   // where the network figures came from
  std::string arch;      // scaled.model.arch
  bool weak = false;     // weak scaling: report.estimate.per_rank_batch > 0
  double b1 = 0;         // the per-rank batch at p = 1
};

EstimateSetup estimate_setup(const SectionContext& c, const DataShape& ds) {
  const Config& cfg = c.cfg;
  EstimateSetup e;
  EstimateInputs& in = e.in;
  in.num_samples = ds.n;
  in.bytes_per_sample = ds.bytes_per_sample;
  in.num_params = model_param_count(cfg, "scaled", ds.shape, ds.classes);
  in.grad_bytes_per_param = cfg.get_string("report.estimate.grad_dtype") == "bf16" ? 2 : 4;
  e.act_cfg = cfg.get_float("report.estimate.activation_bytes_per_sample");
  in.activation_bytes_per_sample =
      e.act_cfg > 0 ? e.act_cfg : activation_bytes_estimate(cfg, "scaled", ds.shape);
  in.images_per_s_per_rank = rank_rate(cfg, c.data, e.rate_how);
  in.global_batch = cfg.get_int("scaled.global_batch");
  in.per_rank_batch = cfg.get_int("report.estimate.per_rank_batch");
  in.overlap = cfg.get_bool("report.estimate.overlap");
  in.net.bandwidth_gbps = cfg.get_float("report.network.bandwidth_gbps");
  in.net.latency_us = cfg.get_float("report.network.latency_us");
  e.net_how = "report.network.*";
  if (const std::string cal_path = cfg.get_string("report.network.calibration");
      !cal_path.empty()) {
    // Measured on the machine at hand (bench_core_allreduce), not assumed.
    const CommCalibration cal = read_calibration(cal_path);
    const RingEquivalent eq = ring_equivalent(cal);
    in.net.latency_us = eq.latency_s * 1e6;
    in.net.bandwidth_gbps = eq.bandwidth_bytes_per_s * 8e-9;
    e.net_how = cat("fitted allreduce calibration of ", cal.ranks, " ranks (", cal_path, ")");
  }
  in.max_ranks = cfg.get_int("report.estimate.max_ranks");

  e.weak = in.per_rank_batch > 0;
  e.b1 = e.weak ? double(in.per_rank_batch) : double(in.global_batch);
  e.arch = cfg.get_string("scaled.model.arch");
  return e;
}

// The inputs' table in the report and data/estimate_inputs.csv.
void write_estimate_inputs(SectionContext& c, const DataShape& ds, const EstimateSetup& e) {
  const Config& cfg = c.cfg;
  const EstimateInputs& in = e.in;
  const bool weak = e.weak;
  const double b1 = e.b1, act_cfg = e.act_cfg;
  const std::string &arch = e.arch, &rate_how = e.rate_how, &net_how = e.net_how;
  std::vector<Row> inputs = {
      {"training samples N", std::to_string(in.num_samples), ds.how},
      {"bytes per sample n", std::to_string(in.bytes_per_sample),
       ds.shape.size() == 3 ? "H×W×C uint8" : "F float32"},
      {"dataset bytes N·n", log::format_bytes(double(in.num_samples) * double(in.bytes_per_sample)),
       "one pass over the training set"},
      {"parameters M", std::to_string(in.num_params),
       cat(arch, " (scaled.model), via nn::make_model")},
      {"gradient bytes per step",
       log::format_bytes(double(in.grad_bytes_per_param * in.num_params)),
       cat(in.grad_bytes_per_param, "·M (", cfg.get_string("report.estimate.grad_dtype"), ")")},
      {"activation bytes per sample", log::format_bytes(in.activation_bytes_per_sample),
       act_cfg > 0 ? "config" : "estimated from layer shapes"},
      {"memory per rank at p=1", log::format_bytes(memory_per_rank(in, b1)),
       cat("params + grads + momentum + ", fmt(b1), " samples of activations")},
      {"network", cat(fmt(in.net.bandwidth_gbps), " Gbit/s, ", fmt(in.net.latency_us), " µs"),
       net_how},
      {"images/s per rank r",
       in.images_per_s_per_rank > 0 ? fixed(in.images_per_s_per_rank, 1) : "unknown",
       rate_how.empty() ? "not measured; set report.estimate.images_per_s_per_rank" : rate_how},
      {"batch",
       weak ? cat(in.per_rank_batch, " per rank (weak scaling)")
            : cat(in.global_batch, " global (strong scaling)"),
       weak ? "report.estimate.per_rank_batch" : "scaled.global_batch"},
  };
  c.doc.table({"quantity", "value", "source"}, inputs, "Inputs of the estimate");
  write_csv(c.dir + "/data/estimate_inputs.csv", {"quantity", "value", "source"},
            {{"num_samples", std::to_string(in.num_samples), ds.how},
             {"bytes_per_sample", std::to_string(in.bytes_per_sample), ""},
             {"dataset_bytes", fmt(double(in.num_samples) * double(in.bytes_per_sample), 15), ""},
             {"num_params", std::to_string(in.num_params), arch},
             {"grad_bytes", std::to_string(in.grad_bytes_per_param * in.num_params), ""},
             {"activation_bytes_per_sample", fmt(in.activation_bytes_per_sample), ""},
             {"memory_per_rank_bytes", fmt(memory_per_rank(in, b1), 15), ""},
             {"bandwidth_gbps", fmt(in.net.bandwidth_gbps), ""},
             {"latency_us", fmt(in.net.latency_us), ""},
             {"images_per_s_per_rank", fmt(in.images_per_s_per_rank), rate_how}});
}

// The predicted scaling over p ranks: data/predicted_scaling.csv, its table and its figure.
void write_predicted_scaling(SectionContext& c, const EstimateSetup& e) {
  const EstimateInputs& in = e.in;
  const std::string& arch = e.arch;
  Estimates est = estimate(in);
  std::vector<Row> csv, table;
  for (auto& r : est.rows) {
    csv.push_back({std::to_string(r.ranks), fmt(r.per_rank_batch), r.feasible ? "1" : "0",
                   fmt(r.comp_s), fmt(r.comm_s), fmt(r.step_s), fmt(r.images_per_s),
                   fmt(r.efficiency), fmt(memory_per_rank(in, r.per_rank_batch))});
    table.push_back({std::to_string(r.ranks),
                     fmt(r.per_rank_batch, 4) + (r.feasible ? "" : " (<1)"),
                     fixed(1e3 * r.comp_s, 3), fixed(1e3 * r.comm_s, 3), fixed(1e3 * r.step_s, 3),
                     fixed(r.images_per_s, 0), pct(r.efficiency, 1),
                     log::format_bytes(memory_per_rank(in, r.per_rank_batch))});
  }
  write_csv(c.dir + "/data/predicted_scaling.csv",
            {"ranks", "per_rank_batch", "feasible", "compute_s", "allreduce_s", "step_s",
             "images_per_s", "efficiency", "memory_per_rank_bytes"},
            csv);
  c.doc.paragraph(
      "Step time T = b/r + T_allreduce with a ring allreduce T_allreduce = 2(p−1)/p · G/BW + "
      "2(p−1)·α (G gradient bytes)" +
      std::string(in.overlap ? ", overlapped with compute (T = max)" : "") +
      "; efficiency = τ_p / (p·τ_1) = T_compute / T. Rows marked (<1) have less than one "
      "sample per rank.");
  c.doc.table({"ranks p", "per-rank batch", "compute ms", "allreduce ms", "step ms", "images/s",
               "efficiency %", "memory/rank"},
              table, "Predicted scaling");
  std::string gp =
      terminal_line(c.format, 900, 560) +
      cat("set output ", gp_quote(c.figure_path("predicted_scaling")), "\n",
          "set datafile separator ','\nset logscale x 2\nset logscale y2 10\n"
          "set grid\nset key bottom left\nset xlabel 'ranks p'\n"
          "set ylabel 'predicted efficiency (%)'\nset yrange [0:105]\n"
          "set y2label 'time per step (s)'\nset y2tics\nset format y2 '%g'\nset ytics nomirror\n"
          "set title 'Predicted scaling of ",
          arch,
          " (ring allreduce model)'\n"
          "plot 'data/predicted_scaling.csv' skip 1 using 1:($3==1 ? 100*$8 : NaN) "
          "with lp lw 2 pt 7 title 'efficiency', '' skip 1 using 1:($3==1 ? $4 : NaN) "
          "axes x1y2 with l dt 2 lw 2 title 'compute', '' skip 1 using 1:($5 > 0 ? "
          "$5 : NaN) axes x1y2 with l dt 3 lw 2 title 'allreduce'\n");
  run_gnuplot(c.dir, "predicted_scaling", gp, c.figure_path("predicted_scaling"));
  c.doc.figure(c.figure_path("predicted_scaling"), "Predicted scaling efficiency vs ranks",
               {"data/predicted_scaling.csv", "data/estimate_inputs.csv"}, "fig-predicted");
}

}  // namespace

// Phases: the dataset's shape -> the estimate's inputs -> their table -> the predicted scaling
// (where a rate per rank is known).
void section_estimates(SectionContext& c) {
  c.doc.section("A-priori estimates for the configured job", "estimates");
  DataShape ds = data_shape(c.cfg, c.data);
  if (!ds.known) {
    c.doc.note(
        "Dataset size unknown (no dataset.h5 and data.source gives no fixed size): "
        "estimates omitted.");
    return;
  }
  const EstimateSetup e = estimate_setup(c, ds);
  write_estimate_inputs(c, ds, e);
  if (e.in.images_per_s_per_rank <= 0) {
    c.doc.note(
        "No images/s per rank measured or configured: predicted scaling omitted (set "
        "report.estimate.images_per_s_per_rank).");
    return;
  }
  write_predicted_scaling(c, e);
}

void make_report(const Config& cfg, const ReportOptions& opt, const Comm& comm) {
  // Checks the output up front (exists without --overwrite -> error before any work).
  // Only a previous report is ever replaced, and never the run directory it reads.
  AtomicOutput out(opt.output, opt.overwrite, comm, /*is_dir=*/true, schema::kReport,
                   {opt.run_dir, opt.sweep_dir});
  check_resolved_config_path(config_sidecar_path(opt.output));
  on_root_agreed(comm, [&] {
    RunData data = load_run(opt.run_dir, opt.sweep_dir, &cfg);
    const std::string dir = out.tmp_path();
    fs::create_directories(dir + "/figures");
    fs::create_directories(dir + "/data");
    std::string title = cfg.get_string("report.title");
    if (title.empty()) title = cat("Sieve report: ", cfg.get_string("run.name"));
    Document doc(title);
    SectionContext c{cfg, data, dir, parse_figure_format(cfg.get_string("report.figure_format")),
                     doc};
    std::time_t now = std::time(nullptr);
    char stamp[64];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
    doc.paragraph(cat("Generated ", stamp, " by report (Sieve ", SIEVE_VERSION, ")."));
    // The one-sentence answer first; section "Accuracy vs global batch" has the details.
    doc.paragraph(analyze_results(data.runs).summary);
    using Fn = void (*)(SectionContext&);
    const std::pair<const char*, Fn> sections[] = {
        {"overview", section_overview},   {"accuracy", section_accuracy},
        {"reduction", section_reduction}, {"suspicious", section_suspicious},
        {"embedding", section_embedding}, {"throughput", section_throughput},
        {"comm", section_comm},           {"pretrain", section_pretrain},
        {"estimates", section_estimates}};
    log::Progress progress("sections", std::size(sections), "sections");
    int64_t done = 0;
    for (auto& [name, fn] : sections) {
      fn(c);
      progress.update(++done);
    }
    progress.finish();
    write_text_atomic(dir + "/index.html", doc.html());
    write_text_atomic(dir + "/index.md", doc.markdown());
    write_text_atomic(dir + "/report.config.yaml", cfg.to_yaml());
  });
  out.commit();
  // The resolved config also next to the directory, as for every Sieve output.
  if (comm.is_root()) write_resolved_config(config_sidecar_path(opt.output), cfg.to_yaml());
  log::info(cat("wrote ", opt.output, "/index.html (and index.md, figures/, data/)"));
}

}  // namespace sieve::report
