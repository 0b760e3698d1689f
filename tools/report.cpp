// report: turn a run directory into report/index.html + index.md with figures, tables,
// the CSV behind each figure, an interactive t-SNE page and a-priori scaling estimates.
#include "report/report.hpp"
#include "config/sections.hpp"
#include "pipeline/schema.hpp"
#include "run/tool.hpp"

int main(int argc, char** argv) {
  sieve::ToolSpec spec{
      "report",
      "write the run's report (accuracy vs batch, data reduction, t-SNE, throughput, estimates)",
      "  report --config run.yaml\n"
      "  report --run-dir runs/quick --output /tmp/quick-report --overwrite\n"
      "  report --config run.yaml --set report.network.bandwidth_gbps=200\n"};
  auto flags = [](sieve::po::options_description& d) {
    d.add_options()("run-dir", sieve::po::value<std::string>(), "run directory (default: run.dir)")(
        "sweep-dir", sieve::po::value<std::string>(),
        "directory of the run-<index>/ results (default: <run-dir>/sweep)")(
        "output,o", sieve::po::value<std::string>(),
        "report directory (default: <run-dir>/report)");
  };
  return sieve::run_tool(argc, argv, spec, sieve::pipeline_schema(), flags,
                         [](sieve::ToolContext& ctx) {
                           sieve::RunPaths paths = sieve::run_paths(ctx.cfg);
                           paths.dir = ctx.path_flag("run-dir", paths.dir);
                           sieve::report::ReportOptions o;
                           o.run_dir = paths.dir;
                           o.sweep_dir = ctx.path_flag("sweep-dir", paths.sweep_dir());
                           o.output = ctx.path_flag("output", paths.report_dir());
                           o.overwrite = ctx.overwrite;
                           sieve::report::make_report(ctx.cfg, o, ctx.comm);
                         });
}
