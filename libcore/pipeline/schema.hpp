// The pipeline's config schema: every section. One YAML file configures the whole pipeline
// (configs/quickstart.yaml); every tool validates all of it, so a typo in any section is
// caught by the first stage, not hours later by the last. Each section's keys are declared
// once, in its module's keys.cpp, beside the code that reads them:
//   run.*       config/sections.cpp     (run_paths, the seeds)
//   data.*      data/keys.cpp           (shard_dataset: data/shard.cpp, data/source.cpp)
//   pretrain.*, scaled.* and the keys they share, features.*
//               train/keys.cpp          (read_train_options in train/options.cpp; prog_*.cpp)
//   embed.*     embed/keys.cpp          (embed_options in embed/options.cpp)
//   filter.*    cluster/keys.cpp        (filter_options in cluster/options.cpp; program.cpp)
//   report.*    report/keys.cpp         (report/report.cpp)
//   slurm.*     pipeline/slurm_keys.cpp (read by the job scripts only, through --get)
// The keys.cpp files and this directory are built into sieve_core (libcore/CMakeLists.txt):
// declaring keys needs only the config module, and a program that links one module (e.g.
// shard_dataset: sieve_data) still knows every key without linking the others.
#pragma once
#include "config/config.hpp"

namespace sieve {

// All sections, built once, in the order --help-config lists them.
const ConfigSchema& pipeline_schema();

}  // namespace sieve
