// The pipeline's config schema: every section, assembled above the modules that declare
// them. One YAML file configures the whole pipeline (configs/quickstart.yaml); every tool
// validates all of it, so a typo in any section is caught by the first stage, not hours
// later by the last. Each section's keys are declared beside the code that reads them:
//   run.*       config/sections.cpp      (run_paths, the seeds)
//   data.*      data/options.cpp         (shard_dataset)
//   pretrain.*, scaled.* and the keys they share, features.*
//               train/options.cpp        (read_train_options, the training programs)
//   embed.*     embed/options.cpp        (reduce_dims)
//   filter.*    cluster/options.cpp      (cluster_filter)
//   report.*    report/options.cpp       (report)
//   slurm.*     pipeline/slurm_options.cpp (read by the job scripts only, through --get)
#pragma once
#include "config/config.hpp"

namespace sieve {

void add_slurm_keys(ConfigSchema& s);  // slurm.*: resources for the job scripts

// All sections, built once, in the order --help-config lists them.
const ConfigSchema& pipeline_schema();

}  // namespace sieve
