#include "config/sections.hpp"

namespace sieve {

void add_run_keys(ConfigSchema& s) {
  s.add_string("run.name", "sieve", "name of the run (used in job names and reports)");
  s.add_string("run.dir", "runs/sieve", "directory that holds every stage's outputs");
  s.add_int("run.seed", 1234, "master random seed (every stage derives its own from it)", 0);
}

const ConfigSchema& pipeline_schema() {
  static const ConfigSchema schema = [] {
    ConfigSchema s;
    add_run_keys(s);
    add_data_keys(s);
    add_pretrain_keys(s);
    add_features_keys(s);
    add_embed_keys(s);
    add_filter_keys(s);
    add_scaled_keys(s);
    add_report_keys(s);
    add_slurm_keys(s);
    return s;
  }();
  return schema;
}

RunPaths run_paths(const Config& cfg) { return RunPaths{cfg.get_string("run.dir")}; }

}  // namespace sieve
