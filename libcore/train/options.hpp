// The training sections' keys and their reader, in one place: `pretrain.*` (the feature
// extractor), `scaled.*` (the large-batch retraining and its sweep), the keys both share
// (model, optimizer, schedule, batch, checkpoints, gradient communication) and `features.*`
// (extract_features). Each key is declared once here, with its default, range and help;
// the programs read them through read_train_options or by the names declared here.
#pragma once
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "nn/model.hpp"
#include "train/grad_sync.hpp"
#include "train/optimizer.hpp"

namespace sieve {

void add_pretrain_keys(ConfigSchema& s);  // pretrain.*: the feature extractor
void add_features_keys(ConfigSchema& s);  // features.*: extract_features
void add_scaled_keys(ConfigSchema& s);    // scaled.*: train_scaled and its sweep
// The keys every training section shares (model, optimizer, schedule, batch, checkpoints,
// gradient communication) under prefix `p`, with the section's own defaults.
void add_trainer_keys(ConfigSchema& s, const std::string& p, const std::string& arch,
                      int64_t epochs, int64_t global_batch, double lr, int64_t ref_batch,
                      double warmup_epochs, int64_t lars_from_batch);

namespace train {

// Everything read from a training section (pretrain.* or scaled.*). The member defaults are
// neutral values for tests that build one by hand; a section's own defaults are the
// schema's, through read_train_options.
struct TrainOptions {
  nn::ModelSpec spec;  // arch/width/stem/hidden; input dims and classes come from the data
  OptimizerOptions opt;
  ScheduleOptions sched;  // epochs/steps_per_epoch/global_batch filled in by the trainer
  int64_t epochs = 1, global_batch = 1, micro_batch = 0;
  uint64_t seed = 1;
  bool augment = true;
  float label_smoothing = 0.0f;
  int64_t ckpt_every_steps = 0, ckpt_every_epochs = 1, ckpt_keep = 2;
  int64_t eval_batch = 256, eval_every = 1;
  CommOptions comm;  // gradient communication strategy (comm.*)
};
// The training section under `prefix` ("pretrain" or "scaled"), validated: the precision
// resolved for this machine (logged), the seed derived from run.seed when 0, LARS switched
// on by the batch size.
TrainOptions read_train_options(const Config& cfg, const std::string& prefix);

}  // namespace train
}  // namespace sieve
