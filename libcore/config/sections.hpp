// The pipeline's config schema, one section per stage. One YAML file configures the
// whole pipeline (configs/quickstart.yaml); every tool validates all of it, so a typo in
// any section is caught by the first stage, not hours later by the last.
// Each section's keys are declared in its own file (config/schema_<section>.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/config.hpp"

namespace sieve {

void add_run_keys(ConfigSchema& s);       // run.*: name, output directory, seed
void add_data_keys(ConfigSchema& s);      // data.*: shard_dataset
void add_pretrain_keys(ConfigSchema& s);  // pretrain.*: the feature extractor
void add_features_keys(ConfigSchema& s);  // features.*: extract_features
void add_embed_keys(ConfigSchema& s);     // embed.*: reduce_dims (PCA, t-SNE)
void add_filter_keys(ConfigSchema& s);    // filter.*: cluster_filter
void add_scaled_keys(ConfigSchema& s);    // scaled.*: train_scaled and its sweep
void add_report_keys(ConfigSchema& s);    // report.*: report and a-priori estimates
void add_slurm_keys(ConfigSchema& s);     // slurm.*: resources for the job scripts
// The keys every training section shares (model, optimizer, schedule, batch, checkpoints)
// under prefix `p`, with the section's own defaults (schema_pretrain.cpp).
void add_trainer_keys(ConfigSchema& s, const std::string& p, const std::string& arch,
                      int64_t epochs, int64_t global_batch, double lr, int64_t ref_batch,
                      double warmup_epochs, int64_t lars_from_batch);

// All sections, built once.
const ConfigSchema& pipeline_schema();

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

// The resolved config a Sieve file records (its `config` attribute), read under this schema;
// nullopt when the file or the attribute is missing or does not parse.
std::optional<Config> stored_config(const std::string& path);

}  // namespace sieve
