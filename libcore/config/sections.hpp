// The config keys and paths every stage shares: the run.* section (name, directory,
// seed), the default file locations inside run.dir, and the config a Sieve file records.
// The other sections are declared beside their readers (each module's keys.cpp) and
// assembled by pipeline_schema() (pipeline/schema.hpp).
#pragma once
#include <optional>
#include <string>

#include "config/config.hpp"

namespace sieve {

void add_run_keys(ConfigSchema& s);  // run.*: name, output directory, seed

// Default file locations inside run.dir, shared by the tools and the pipeline runners
// (each tool also takes explicit path flags that override these).
struct RunPaths {
  std::string dir;
  std::string dataset() const { return dir + "/dataset.h5"; }
  std::string pretrain_dir() const { return dir + "/pretrain"; }
  std::string model() const { return dir + "/pretrain/model.h5"; }
  // The model at the peak of held-out accuracy (pretrain.holdout > 0): the early-learning
  // checkpoint that extract_features uses by default (docs/detection.md).
  std::string early_model() const { return dir + "/pretrain/model_early.h5"; }
  // Every training sample's margin at every epoch (pretrain.dynamics; train/dynamics.hpp).
  std::string dynamics() const { return dir + "/pretrain/dynamics.h5"; }
  std::string features() const { return dir + "/features.h5"; }
  std::string embedding() const { return dir + "/embedding.h5"; }
  std::string filter() const { return dir + "/filter.h5"; }
  std::string sweep_dir() const { return dir + "/sweep"; }
  std::string report_dir() const { return dir + "/report"; }
};
RunPaths run_paths(const Config& cfg);

// The resolved config a Sieve file records (its `config` attribute), read under `schema`
// (the schema of the config at hand: cfg.schema(), which must cover every key the file's
// config has, as pipeline_schema() does); nullopt when the file or the attribute is missing
// or does not parse under it.
std::optional<Config> stored_config(const std::string& path, const ConfigSchema& schema);

}  // namespace sieve
