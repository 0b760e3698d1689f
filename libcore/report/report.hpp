// The report program's work: read a run directory, write report/ with index.html,
// index.md, figures (gnuplot), the CSV behind every figure, and the interactive t-SNE page.
//
// Layout of the report directory:
//   index.html, index.md            the report (same tables and numbers in both)
//   figures/<name>.png|svg          figures; gnuplot/<name>.gp the scripts that drew them
//   data/<name>.csv                 the numbers behind every figure and table
//   tsne_interactive.html           self-contained interactive embedding view
//   report.config.yaml              the resolved config (config sidecar)
// The directory is written under a temporary name and renamed into place when complete.
#pragma once
#include <string>

#include "comm/comm.hpp"
#include "config/config.hpp"

namespace sieve::report {

struct ReportOptions {
  std::string run_dir;    // inputs (run.dir)
  std::string sweep_dir;  // run-<index>/ directories (run_dir/sweep)
  std::string output;     // the report directory (run_dir/report)
  bool overwrite = false;
};

// Builds the report on rank 0 (other ranks only take part in the atomic commit).
void make_report(const Config& cfg, const ReportOptions& opt, const Comm& comm);

}  // namespace sieve::report
