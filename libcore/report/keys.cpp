#include "report/keys.hpp"

namespace sieve {

// Keys of the 'report' section: the report program (tools/report) and its a-priori
// estimates (docs/report.md has the cost model these feed).
void add_report_keys(ConfigSchema& s) {
  s.add_string("report.title", "", "report title (\"\": 'Sieve report: <run.name>')");
  s.add_string("report.figure_format", "png", "figure files written by gnuplot", {"png", "svg"});
  s.add_int("report.interactive.max_points", 20000,
            "interactive t-SNE page: at most this many points (noise always kept)", 100);
  s.add_int("report.interactive.max_thumbnails", 2000,
            "interactive t-SNE page: points that carry an image thumbnail", 0);
  s.add_float("report.network.bandwidth_gbps", 100.0,
              "allreduce model: link bandwidth per rank in Gbit/s (100: EDR InfiniBand)", 1e-6);
  s.add_float("report.network.latency_us", 5.0,
              "allreduce model: per-message latency alpha in microseconds", 0.0);
  s.add_string("report.network.calibration", "",
               "allreduce calibration JSON (bench_core_allreduce / scripts/bench_comm.sh): when "
               "set, its fitted latency and bandwidth replace network.bandwidth_gbps and "
               "latency_us in the scaling model (\"\": use those)");
  s.add_string("report.comm.bench_dir", "",
               "output of scripts/bench_comm.sh (traces per strategy, calibrations): the "
               "'Communication strategies' section (\"\": omitted)");
  s.add_float("report.estimate.images_per_s_per_rank", 0.0,
              "compute model: images/s of one rank (0: measured from the sweep runs, else "
              "from pretrain/metrics.jsonl)",
              0.0);
  s.add_string("report.estimate.grad_dtype", "fp32", "gradient precision on the wire",
               {"fp32", "bf16"});
  s.add_int("report.estimate.per_rank_batch", 0,
            "0: strong scaling of scaled.global_batch over p ranks; > 0: weak scaling with this "
            "per-rank batch",
            0);
  s.add_bool("report.estimate.overlap", false,
             "step time max(compute, allreduce) (backward overlaps the reduction) instead of "
             "their sum");
  s.add_int("report.estimate.max_ranks", 1536, "largest rank count of the predicted table", 1,
            1 << 20);
  s.add_float("report.estimate.activation_bytes_per_sample", 0.0,
              "activation memory per sample for the memory estimate (0: estimated from the "
              "model's layer shapes)",
              0.0);
}

}  // namespace sieve
