// The reader of the training sections (`pretrain.*`, `scaled.*`): their keys are declared
// beside it in train/keys.cpp, with default, range and help.
#pragma once
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "nn/model.hpp"
#include "train/grad_sync.hpp"
#include "train/keys.hpp"
#include "train/loader.hpp"
#include "train/optimizer.hpp"

namespace sieve {

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
  Augmentation augment{true, true};
  float label_smoothing = 0.0f;
  // "cross_entropy", "gce" (nn::generalized_cross_entropy), or pretrain's "auto", which
  // pretrain resolves to one of the two before it trains (train/loss_auto.hpp).
  std::string loss = "cross_entropy";
  float gce_q = 0.7f;
  int64_t ckpt_every_steps = 0, ckpt_every_epochs = 1, ckpt_keep = 2;
  int64_t eval_batch = 256, eval_every = 1;
  CommOptions comm;  // gradient communication strategy (comm.*)
  // precision: auto where the machine's answer (bf16) is the trainer's to confirm by timing
  // its own network (nn::resolve_precision's per_network; train/precision.hpp), and the key.
  bool precision_per_network = false;
  std::string precision_key = "precision";
  // Where that decision is recorded for every run of the same network (train_scaled: the
  // sweep directory, so that its runs agree whichever process trains them); "": per process.
  std::string precision_record_dir;
  // Where the optimizer step runs on the parameters (train/param_home.hpp), and the key that
  // messages name.
  std::string param_home = "auto";
  std::string param_home_key = "param_home";
};
// The training section under `prefix` ("pretrain" or "scaled"), validated: the precision
// resolved for this machine (logged), the seed derived from run.seed when 0, LARS switched
// on by the batch size.
TrainOptions read_train_options(const Config& cfg, const std::string& prefix);

// scaled.budget: steps. An arm of `arm_samples` trains as many epochs as bring its optimizer
// steps (whole_batches, train/loader.hpp) nearest to what `full_samples` take in o.epochs,
// never fewer than o.epochs; the warm-up (in epochs) and the step-decay milestones are
// stretched by the same ratio of steps an epoch, so they too fall at about the same step.
// Returns the log line that says so ("" when nothing changes). The streaming loader on
// several ranks may take a few steps fewer an epoch than whole_batches (stream.hpp), in
// either arm; the match counts the in-memory way, and result.json records the steps taken.
std::string match_full_arm_steps(TrainOptions& o, int64_t full_samples, int64_t arm_samples);

}  // namespace train
}  // namespace sieve
