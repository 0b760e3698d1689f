#include "train/options.hpp"

#include <algorithm>
#include <cmath>

#include "config/seeds.hpp"
#include "nn/backend.hpp"
#include "train/loader.hpp"
#include "util/log.hpp"

namespace sieve {

namespace train {

TrainOptions read_train_options(const Config& cfg, const std::string& p) {
  TrainOptions o;
  o.spec = nn::model_spec_from(cfg, p);
  o.spec.backend = cfg.get_string(p + ".backend");
  std::string note;
  o.precision_key = p + ".precision";
  o.spec.dtype = nn::resolve_precision(cfg.get_string(p + ".precision"), o.spec.backend,
                                       o.precision_key, &note, &o.precision_per_network);
  if (!note.empty()) log::info(note);
  o.param_home = cfg.get_string(p + ".param_home");
  o.param_home_key = p + ".param_home";
  o.epochs = cfg.get_int(p + ".epochs");
  o.global_batch = cfg.get_int(p + ".global_batch");
  o.micro_batch = cfg.get_int(p + ".micro_batch");
  const int64_t seed = cfg.get_int(p + ".seed");
  o.seed = seed > 0 ? uint64_t(seed) : derived_seed(cfg, SeedFor::training, p);
  const bool augment = cfg.get_bool(p + ".augment");
  o.augment = {augment, augment && cfg.get_bool(p + ".augment_flip")};
  o.label_smoothing = float(cfg.get_float(p + ".label_smoothing"));
  o.loss = cfg.get_string(p + ".loss");
  o.gce_q = float(cfg.get_float(p + ".gce_q"));
  if (o.loss != "cross_entropy" && o.label_smoothing > 0)
    throw UsageError(cat(p, ".label_smoothing: expected 0 with ", p, ".loss ", o.loss,
                         o.loss == "auto" ? " (whose second run, where it fires, is gce)" : "",
                         "; label smoothing is a cross-entropy target (", p,
                         ".loss=cross_entropy to smooth), got ", o.label_smoothing));
  o.opt.momentum = cfg.get_float(p + ".optimizer.momentum");
  o.opt.nesterov = cfg.get_bool(p + ".optimizer.nesterov");
  o.opt.weight_decay = cfg.get_float(p + ".optimizer.weight_decay");
  o.opt.decoupled = cfg.get_bool(p + ".optimizer.decoupled");
  o.opt.decay_bn_bias = cfg.get_bool(p + ".optimizer.decay_bn_bias");
  // LARS when asked for, or by batch size: at and above optimizer.lars_from_batch (0: never)
  // layer-wise trust ratios keep very large batches from diverging (You et al. 2017).
  const int64_t lars_from = cfg.get_int(p + ".optimizer.lars_from_batch");
  o.opt.lars =
      cfg.get_bool(p + ".optimizer.lars") || (lars_from > 0 && o.global_batch >= lars_from);
  o.opt.lars_eta = cfg.get_float(p + ".optimizer.lars_eta");
  o.sched.base_lr = cfg.get_float(p + ".optimizer.lr");
  o.sched.ref_batch = cfg.get_int(p + ".schedule.ref_batch");
  o.sched.scaling = parse_scaling(cfg.get_string(p + ".schedule.scaling"));
  o.sched.warmup_epochs = cfg.get_float(p + ".schedule.warmup_epochs");
  o.sched.decay = parse_decay(cfg.get_string(p + ".schedule.decay"));
  o.sched.milestones = cfg.get_int_list(p + ".schedule.milestones");
  o.sched.gamma = cfg.get_float(p + ".schedule.gamma");
  o.ckpt_every_steps = cfg.get_int(p + ".checkpoint.every_steps");
  o.ckpt_every_epochs = cfg.get_int(p + ".checkpoint.every_epochs");
  o.ckpt_keep = cfg.get_int(p + ".checkpoint.keep");
  o.eval_batch = cfg.get_int(p + ".eval_batch");
  o.eval_every = cfg.get_int(p + ".eval_every");
  o.comm.strategy = cfg.get_string(p + ".comm.strategy");
  o.comm.bucket_mb = cfg.get_float(p + ".comm.bucket_mb");
  o.comm.cycle_ms = cfg.get_float(p + ".comm.cycle_ms");
  o.comm.fusion_mb = cfg.get_float(p + ".comm.fusion_mb");
  o.comm.servers = int(cfg.get_int(p + ".comm.servers"));
  o.comm.mode = cfg.get_string(p + ".comm.mode");
  o.comm.max_staleness = int(cfg.get_int(p + ".comm.max_staleness"));
  o.comm.stale_compensation = cfg.get_string(p + ".comm.stale_compensation");
  check_comm_options(o.comm, p);
  return o;
}

std::string match_full_arm_steps(TrainOptions& o, int64_t full_samples, int64_t arm_samples) {
  const int64_t g = std::max<int64_t>(1, o.global_batch);
  const int64_t full_per_epoch = whole_batches(full_samples, g);
  const int64_t arm_per_epoch = whole_batches(arm_samples, g);
  // A batch larger than the arm is refused before training (check_global_batch).
  if (arm_per_epoch <= 0 || arm_per_epoch >= full_per_epoch) return "";
  const double stretch = double(full_per_epoch) / double(arm_per_epoch);
  const int64_t full_steps = o.epochs * full_per_epoch;
  const int64_t epochs =
      std::max(o.epochs, int64_t(std::llround(double(full_steps) / double(arm_per_epoch))));
  const std::string line =
      cat("scaled.budget steps: ", epochs, " epochs of ", arm_per_epoch, " steps (",
          epochs * arm_per_epoch, ") against the full arm's ", o.epochs, " of ", full_per_epoch,
          " (", full_steps, "); warm-up ",
          std::round(o.sched.warmup_epochs * stretch * 100.0) / 100.0, " epochs");
  o.epochs = epochs;
  o.sched.warmup_epochs *= stretch;
  for (int64_t& m : o.sched.milestones) m = int64_t(std::llround(double(m) * stretch));
  return line;
}

}  // namespace train
}  // namespace sieve
