// pretrain: output checks, data loading, the Trainer (and its cross-fitting folds), final
// outputs. train_scaled and its sweep: prog_scaled.cpp; what both share: prog_common.hpp.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "config/sections.hpp"
#include "data/dataset_file.hpp"
#include "io/atomic_output.hpp"
#include "io/cleanup.hpp"
#include "io/lineage.hpp"
#include "io/metrics.hpp"
#include "io/output_set.hpp"
#include "io/schemas.hpp"
#include "train/checkpoint.hpp"
#include "train/clean_accuracy.hpp"
#include "train/crossfit.hpp"
#include "train/dynamics.hpp"
#include "train/holdout.hpp"
#include "train/loss_auto.hpp"
#include "train/options.hpp"
#include "train/prog_common.hpp"
#include "train/programs.hpp"
#include "train/trainer.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::train {

void add_pretrain_flags(po::options_description& d) {
  d.add_options()("dataset", po::value<std::string>(),
                  "dataset file (default: <run.dir>/dataset.h5)")(
      "output", po::value<std::string>(),
      "model file (default: <run.dir>/pretrain/model.h5); metrics.jsonl and checkpoints/ "
      "go next to it")("resume",
                       "continue from the newest complete checkpoint (fresh start if none)")(
      "skip-folds",
      "train only the main model; its fold models (pretrain.folds) are then trained by "
      "`pretrain --fold k` runs, one per fold (slurm/full_pipeline.sh's job array)")(
      "fold", po::value<int>(),
      "train only fold model K of pretrain.folds, beside the main model of the same run "
      "(written by pretrain --skip-folds); the last fold to finish writes the fold record")(
      "fold-count", "print pretrain.folds (0: no fold models) to stdout and exit");
}

namespace {

// The early model and its record beside the model `<dir>/<stem>.h5`: <stem>_early.h5 and
// <stem>_early.json (`ext`).
std::string early_model_path(const std::string& dir, const std::string& stem,
                             const std::string& ext) {
  return (fs::path(dir) / (stem + "_early" + ext)).string();
}

// The rows pretrain trains on and the held-out part whose accuracy peak picks the early
// model (train/holdout.hpp); with pretrain.holdout 0, every row and no held-out part.
HoldoutSplit pretrain_split(const TrainInput& data, double holdout, uint64_t seed,
                            const std::string& dataset) {
  HoldoutSplit split;
  if (holdout <= 0) {
    split.train = all_indices(data.train.n);
    return split;
  }
  split = split_holdout(data.train, holdout, seed ^ 0x686f6c646f7574ULL);
  SIEVE_CHECK(!split.holdout.empty(), dataset, ": pretrain.holdout=", holdout, " of ", data.train.n,
              " training samples holds out none; lower it to 0 or use more data");
  log::info(cat("held out ", split.holdout.size(), " of ", data.train.n,
                " training samples (pretrain.holdout=", holdout,
                ") to find the early-learning peak"));
  return split;
}

// The main model's run must be the one this config describes: the fold models join its set.
void check_main_model(const ToolContext& ctx, const std::string& model, const TrainInput& data,
                      int k) {
  SIEVE_CHECK(fs::exists(model), model, ": missing; pretrain --fold ", k,
              " trains beside the main model of its run (pretrain --skip-folds first)");
  const std::string trained_on = lineage::lineage_of(model).dataset_fingerprint;
  SIEVE_CHECK(trained_on == data.meta.fingerprint, model, ": trained on another dataset (",
              trained_on, ") than ", data.path, " (", data.meta.fingerprint,
              "); run pretrain --skip-folds again");
  const std::optional<Config> main_cfg = stored_config(model, ctx.cfg.schema());
  // What makes the models: run.seed and pretrain.*, but not when checkpoints are written.
  const auto section = [](const Config& c) {
    std::string out = c.to_yaml("run.seed");
    for (const KeySpec& key : c.schema().keys())
      if (key.path.starts_with("pretrain.") && !key.path.starts_with("pretrain.checkpoint."))
        out += c.to_yaml(key.path);
    return out;
  };
  SIEVE_CHECK(main_cfg && section(*main_cfg) == section(ctx.cfg), model,
              ": trained with other run.seed or pretrain.* settings (checkpoints aside) than this "
              "config; its fold models must share them (run pretrain --skip-folds again with "
              "this config)");
}

// pretrain --fold k: fold model k alone, as its own output set in the main model's directory,
// stamped with the main model's run id (slurm/full_pipeline.sh runs one task per fold;
// locally pretrain trains the folds after the main model in one process).
void pretrain_fold(ToolContext& ctx, int k) {
  const RunPaths rp = run_paths(ctx.cfg);
  const std::string dataset = ctx.path_flag("dataset", rp.dataset());
  const std::string output = ctx.path_flag("output", rp.model());
  const int folds = int(ctx.cfg.get_int("pretrain.folds"));
  if (folds < 2 || k < 0 || k >= folds)
    throw UsageError(cat("--fold ", k, ": expected a fold of pretrain.folds, 0 to ", folds - 1,
                         " (pretrain.folds is ", folds, ")"));
  std::string dir = fs::path(output).parent_path().string();
  if (dir.empty()) dir = ".";
  const std::string stem = fs::path(output).stem().string();
  TrainOptions opt = read_train_options(ctx.cfg, "pretrain");
  TrainInput data = load_train_input(dataset, ctx.cfg);
  check_main_model(ctx, output, data, k);
  // pretrain.loss auto: the loss the main model was kept with (train/loss_auto.hpp).
  if (opt.loss == "auto") opt.loss = decided_loss(ctx.comm, early_model_path(dir, stem, ".json"));
  const std::string run_id = run_id_of(output);
  const FoldPlan plan = plan_folds(data, opt, folds, dir + "/checkpoints",
                                   ctx.cfg.get_float("pretrain.early_margin_se"),
                                   ctx.cfg.get_string("pretrain.early_pick"));
  OutputSet set(ctx.comm, cat("pretrain-fold", k), dir, fold_files(stem, k));
  // A requeued task continues its checkpoints only when they are of this run.
  const std::string ckpt = plan.checkpoint_dir(k);
  const std::string ckpt_run = agreed_checkpoint_run_id(ctx.comm, ckpt);
  const bool resume = ctx.has_flag("resume") && ckpt_run == run_id;
  const bool stale = ctx.has_flag("resume") && !ckpt_run.empty() && !resume;
  if (stale)
    log::info(cat(ckpt, ": checkpoints of run ", ckpt_run, ", not of ", output, "'s run ", run_id,
                  ": fold ", k, " starts afresh"));
  prepare_checkpoint_dir(ctx, ckpt, resume, stale);
  set.begin(run_id);
  const lineage::Lineage from{{{dataset, data.meta.fingerprint}}, data.meta.fingerprint, ""};
  train_fold_model(
      ctx.comm, ctx.cfg.to_yaml(), data, opt, plan, k,
      [&](const std::string& name) { return set.staged(name); }, run_id, stem, resume, from);
  set.commit();
  bool complete = false;
  if (ctx.comm.is_root()) complete = complete_fold_record(plan, dir, stem, run_id);
  log::info(complete
                ? cat("wrote fold model ", k, " of ", folds,
                      "; every fold is done: ", (fs::path(dir) / fold_info_name(stem)).string())
                : cat("wrote fold model ", k, " of ", folds, " (", dir,
                      "); the fold record follows when every fold is done"));
}

// --fold-count and --fold k, which do not train the main model; false when neither is given.
bool answered_fold_flags(ToolContext& ctx) {
  if (ctx.has_flag("fold-count")) {
    if (ctx.comm.is_root()) std::cout << ctx.cfg.get_int("pretrain.folds") << std::endl;
    return true;
  }
  if (!ctx.has_flag("fold")) return false;
  pretrain_fold(ctx, ctx.flags["fold"].as<int>());
  return true;
}

// pretrain's hooks into the training loop: every training batch's margins into `dynamics`
// (if any); at every epoch's end the held-out evaluation (the early model's pick, and the
// held-out samples' margins), then the epoch's dynamics filed. Sets `trained_an_epoch`.
void watch_epochs(const Comm& comm, Trainer& trainer, const EvalSplit& holdout_rows,
                  const HoldoutSplit& split, double holdout, EarlyModelKeeper& early_model,
                  std::optional<TrainingDynamics>& dynamics, bool& trained_an_epoch) {
  if (dynamics)
    trainer.set_batch_hook([&](int64_t epoch, const SplitData& d, const std::vector<int64_t>& rows,
                               const float* logits,
                               int k) { dynamics->record(epoch, d, rows, logits, k); });
  trainer.set_epoch_hook([&, holdout](int64_t epoch, Json& rec) {  // called after this returns
    trained_an_epoch = true;
    if (holdout <= 0) {
      if (dynamics) dynamics->end_epoch(comm, epoch - 1);
      return;
    }
    Trainer::EvalHook record_heldout;
    if (dynamics)
      record_heldout = [&](const SplitData& d, const std::vector<int64_t>& rows,
                           const float* logits,
                           int k) { dynamics->record(epoch - 1, d, rows, logits, k); };
    auto [loss, acc] = trainer.evaluate(holdout_rows, &split.holdout, record_heldout);
    if (dynamics) dynamics->end_epoch(comm, epoch - 1);
    rec["holdout_loss"] = loss;
    rec["holdout_acc"] = acc;
    early_model.update(epoch, loss, acc, rec.value("train_acc", -1.0), trainer.model());
    log::info(cat("epoch ", epoch, ": held-out acc ", acc, " (", early_model.describe(), ")"));
  });
}

// What every training of the main model shares: the data and its split, the output set and
// the names of the files in it, the lineages.
struct MainModelPlan {
  ToolContext& ctx;
  const TrainInput& data;
  const HoldoutSplit& split;
  double holdout;
  OutputSet& set;
  std::string output, early, early_info;  // paths as the user sees them; staged by file name
  lineage::Lineage from, from_early;
  std::string staged(const std::string& path) const {
    return set.staged(fs::path(path).filename().string());
  }
};

// One training of the main model (pretrain.loss auto may make two) into the set's staging
// directory: the Trainer, the early model it keeps, its training dynamics.
class MainModelPass {
 public:
  MainModelPass(const MainModelPlan& p, const TrainOptions& opt, const FoldPlan& folds,
                const std::string& ckpt_dir, bool resume, const Json& first_pass)
      : p_(p),
        opt_(opt),
        trainer_(p.ctx.comm, opt,
                 make_source(p.data, p.split.train, opt.global_batch, opt.seed, p.ctx.comm),
                 p.data.train, eval_split(p.data, data::Split::Test), p.data.meta, ckpt_dir,
                 p.set.staged("metrics.jsonl"), p.ctx.cfg.to_yaml()),
        holdout_rows_(eval_split(p.data, data::Split::Train)),
        // A resumed run goes on from what it had kept.
        early_model_(p.ctx.comm, p.staged(p.early), p.staged(p.early_info), p.from_early,
                     p.ctx.cfg.to_yaml(), p.set.run_id(), int64_t(p.split.holdout.size()),
                     resume && p.holdout > 0, folds.early_margin_se, folds.early_pick),
        resume_(resume),
        second_run_(!first_pass.is_null()) {
    early_model_.set_loss(opt.loss);
    early_model_.set_first_pass(first_pass);
    // Training dynamics (train/dynamics.hpp): margins from every training forward pass, and
    // the held-out samples' from their evaluation at each epoch's end.
    if (p.ctx.cfg.get_bool("pretrain.dynamics"))
      dynamics_.emplace(p.data.train, opt.epochs, p.split.holdout);
    watch_epochs(p.ctx.comm, trainer_, holdout_rows_, p.split, p.holdout, early_model_, dynamics_,
                 trained_an_epoch_);
  }
  MainModelPass(const MainModelPass&) = delete;  // the hooks hold references into it
  MainModelPass& operator=(const MainModelPass&) = delete;

  // Trains (from its newest checkpoint when resumed), then picks the early model.
  TrainResult train() {
    TrainResult r;
    try {
      r = trainer_.run(resume_);
    } catch (const StopRequested& s) {
      exit_for_requeue(p_.ctx.comm, s.checkpoint);
    }
    if (p_.holdout > 0) early_model_.finish();  // the guarded pick or the peak
    return r;
  }

  // The final model and the dynamics, into the staging directory (the final names were
  // checked up front).
  void write_outputs() {
    const Comm& comm = p_.ctx.comm;
    save_model(p_.staged(p_.output), trainer_.model(), p_.ctx.cfg.to_yaml(), p_.from, true, comm);
    // A run resumed in its fold models trains no epoch of this model: its dynamics, written
    // before the folds, stay (rewritten, every epoch would read as untrained).
    int64_t keep_dynamics = 0;
    if (comm.is_root())
      keep_dynamics = !trained_an_epoch_ && fs::exists(p_.set.staged(kDynamicsFile)) ? 1 : 0;
    comm.bcast(&keep_dynamics, 1);
    if (dynamics_ && !keep_dynamics)
      write_dynamics(comm, p_.set.staged(kDynamicsFile), *dynamics_, p_.ctx.cfg.to_yaml(), p_.from);
  }

  const EarlyModelKeeper& early_model() const { return early_model_; }
  const TrainOptions& options() const { return opt_; }
  bool second_run() const { return second_run_; }  // pretrain.loss auto's second

 private:
  const MainModelPlan& p_;
  TrainOptions opt_;
  Trainer trainer_;
  EvalSplit holdout_rows_;
  EarlyModelKeeper early_model_;
  std::optional<TrainingDynamics> dynamics_;
  bool resume_, second_run_, trained_an_epoch_ = false;
};

// Before pretrain.loss auto's second run trains its first epoch: the staged files of the
// first run that the second would otherwise resume from or append to go (its metrics are
// kept under their own name), and so do the second run's checkpoints of an earlier run.
// Idempotent: a run stopped between the verdict and the second run's first checkpoint
// does this again when resumed.
void begin_second_pass(const MainModelPlan& p, const std::string& second_dir) {
  prepare_checkpoint_dir(p.ctx, second_dir, false, /*discard=*/true);
  on_root_agreed(p.ctx.comm, [&] {
    std::error_code ec;
    const std::string metrics = p.set.staged("metrics.jsonl");
    const std::string kept = p.set.staged(kFirstPassMetrics);
    if (!fs::exists(kept) && fs::exists(metrics)) {
      fs::rename(metrics, kept, ec);
      if (ec) throw Error(cat(kept, ": cannot keep the first run's metrics: ", ec.message()));
    }
    const std::string early = p.staged(p.early);
    for (const std::string& f :
         {early, early_peak_copy(early), p.staged(p.early_info), config_sidecar_path(early)})
      fs::remove(f, ec);
  });
}

// pretrain.loss auto (train/loss_auto.hpp): the first pass's verdict where the second pass
// has begun in this run (a resumed run goes on with it), else null. A run resumed with
// another loss than the one it began with would mix the two runs' files: refused.
Json second_pass_begun(const MainModelPlan& p, const TrainOptions& opt,
                       const std::string& second_dir, bool resume) {
  if (!resume || p.holdout <= 0) return Json();
  Json first_pass = read_first_pass(p.ctx.comm, second_dir, p.set.run_id());
  if (!first_pass.is_null() && opt.loss != "auto")
    throw UsageError(cat("pretrain.loss: the run to resume (", second_dir,
                         ") is an auto run in its second pass; resume it with pretrain.loss=auto, "
                         "or start over with --overwrite instead of --resume (got ",
                         opt.loss, ")"));
  return opt.loss == "auto" ? first_pass : Json();
}

// Trains the main model: once, or with pretrain.loss auto a second time with gce where the
// cross-entropy run memorised (resumed: in the pass it was in). Returns the pass whose
// models are kept.
std::unique_ptr<MainModelPass> train_main_model(const MainModelPlan& p, TrainOptions opt,
                                                const FoldPlan& folds, const std::string& ckpt_dir,
                                                bool resume, TrainResult& r) {
  const bool auto_loss = opt.loss == "auto";
  if (auto_loss && p.holdout <= 0)
    log::info("pretrain.loss auto: no held-out part (pretrain.holdout 0), so no verdict on "
              "memorisation: one run, with the cross-entropy");
  const std::string second_dir = second_pass_dir(ckpt_dir);
  Json first_pass = second_pass_begun(p, opt, second_dir, resume);
  // The second run's newest checkpoint, where a resumed run had begun it.
  std::string second_ck;
  if (first_pass.is_null()) {
    if (auto_loss) opt.loss = "cross_entropy";
    auto pass = std::make_unique<MainModelPass>(p, opt, folds, ckpt_dir, resume, Json());
    r = pass->train();
    if (!auto_loss || p.holdout <= 0 || !pass->early_model().run_memorised()) return pass;
    first_pass = pass->early_model().verdict(opt.epochs);
    first_pass["elapsed_s"] = r.elapsed_s;
    log::info(cat("pretrain.loss auto: the cross-entropy run memorised its labels (train acc ",
                  first_pass["train_acc"].get<double>(), " against the held-out peak ",
                  first_pass["peak_acc"].get<double>(),
                  "); training again with gce, whose models are kept (docs/detection.md)"));
    pass.reset();  // its hooks and files are done with before the second run takes them
    write_first_pass(p.ctx.comm, second_dir, p.set.run_id(), first_pass);
  } else {
    second_ck = agreed_latest_checkpoint(p.ctx.comm, second_dir);
    log::info(cat("pretrain.loss auto: the cross-entropy run memorised; ",
                  second_ck.empty() ? "starting" : "resuming", " the second run, with gce (",
                  second_dir, ")"));
  }
  if (second_ck.empty()) begin_second_pass(p, second_dir);
  opt.loss = "gce";
  auto pass =
      std::make_unique<MainModelPass>(p, opt, folds, second_dir, !second_ck.empty(), first_pass);
  r = pass->train();
  r.elapsed_s += first_pass.value("elapsed_s", 0.0);  // the pretraining time, both runs
  return pass;
}

// The early model's closing lines. Measured over 23 cells (docs/detection.md, thirteenth and
// fourteenth sessions): where a cross-entropy run memorised, a run with the generalized
// cross-entropy found more of the noise in 14 of 15 (where it did not, gce lost on some);
// which case a data set is, only this run can tell (pretrain.loss auto does both).
void log_early_model(const std::string& early, const EarlyModelKeeper& early_model,
                     const TrainOptions& opt) {
  log::info(cat("wrote ", early, ": the early-learning model, ", early_model.summary(opt.epochs)));
  if (opt.loss == "cross_entropy" && early_model.run_memorised())
    log::info(
        "note: the run memorised its labels; on such data a second run with pretrain.loss=gce "
        "(the generalized cross-entropy) found more of the wrong labels in 14 of the 15 cells "
        "measured (F1 -0.01 to +0.22; docs/detection.md): pretrain.loss=auto (the default) "
        "does that by itself");
}

}  // namespace

void pretrain_main(ToolContext& ctx) {
  if (answered_fold_flags(ctx)) return;
  const RunPaths rp = run_paths(ctx.cfg);
  const std::string dataset = ctx.path_flag("dataset", rp.dataset());
  const std::string output = ctx.path_flag("output", rp.model());
  const bool resume = ctx.has_flag("resume");
  std::string dir = fs::path(output).parent_path().string();
  if (dir.empty()) dir = ".";
  make_output_dir(ctx, dir, 1);
  check_output_path(output, ctx.overwrite, schema::kModel, {dataset});
  check_resolved_config_path(config_sidecar_path(output));
  const double holdout = ctx.cfg.get_float("pretrain.holdout");
  // The early model sits next to the final one whatever --output says (model_early.h5).
  const std::string stem = fs::path(output).stem().string();
  const std::string early = early_model_path(dir, stem, ".h5");
  const std::string early_info = early_model_path(dir, stem, ".json");
  if (!resume) check_output_path(early, ctx.overwrite, schema::kModel, {dataset});
  check_resolved_config_path(config_sidecar_path(early));
  // The run's outputs form one set, written to a staging directory and committed together
  // at the end (io/output_set.hpp); the stage lock keeps a second pretrain out of `dir`.
  auto name_of = [](const std::string& p) { return fs::path(p).filename().string(); };
  // Cross-fitting's files (train/crossfit.hpp) join the set; so do those of a committed set
  // with more folds, which this run removes rather than leaves beside a model they do not fit.
  const int folds = int(ctx.cfg.get_int("pretrain.folds"));
  std::vector<std::string> members =
      fold_members(stem, std::max(folds, ctx.comm.is_root() ? existing_folds(dir, stem) : 0));
  for (const std::string& m :
       {std::string(kFirstPassMetrics), std::string("metrics.jsonl"), name_of(early_info),
        name_of(config_sidecar_path(early)), name_of(early), std::string(kDynamicsFile),
        name_of(config_sidecar_path(output)),
        name_of(output)})  // model.h5 last: the member readers open first
    members.push_back(m);
  OutputSet set(ctx.comm, "pretrain", dir, members);
  const std::string ckpt_dir = dir + "/checkpoints";
  prepare_checkpoint_dir(ctx, ckpt_dir, resume);
  prepare_checkpoint_dir(ctx, second_pass_dir(ckpt_dir), resume);  // pretrain.loss auto's

  TrainOptions opt = read_train_options(ctx.cfg, "pretrain");
  TrainInput data = load_train_input(dataset, ctx.cfg);
  const FoldPlan fold_plan =
      plan_folds(data, opt, folds, ckpt_dir, ctx.cfg.get_float("pretrain.early_margin_se"),
                 ctx.cfg.get_string("pretrain.early_pick"));
  // With --skip-folds the fold tasks (pretrain --fold k) keep their own checkpoints.
  const bool skip_folds = ctx.has_flag("skip-folds");
  for (int k = 0; k < fold_plan.folds && !skip_folds; ++k)
    prepare_checkpoint_dir(ctx, fold_plan.checkpoint_dir(k), resume);
  const HoldoutSplit split = pretrain_split(data, holdout, opt.seed, dataset);
  const lineage::Lineage from{{{dataset, data.meta.fingerprint}}, data.meta.fingerprint, ""};
  check_global_batch(opt.global_batch, int64_t(split.train.size()), "pretrain.global_batch",
                     holdout > 0 ? "the training samples left after pretrain.holdout"
                                 : cat(dataset, "'s training samples"));
  warn_uneven_split(opt.global_batch, ctx.comm.size(), "pretrain.global_batch");
  // A resumed run continues the run of its checkpoint (and that run's staged outputs); a
  // fresh one starts a new set, which replaces the whole previous set only when it is done.
  const std::string resume_id = resume ? agreed_checkpoint_run_id(ctx.comm, ckpt_dir) : "";
  set.begin(resume_id);
  const MainModelPlan plan{ctx,   data,   split, holdout, set, output, early, early_info,
                           from, {from.inputs, from.dataset_fingerprint, "early"}};
  TrainResult r;
  const std::unique_ptr<MainModelPass> pass =
      train_main_model(plan, opt, fold_plan, ckpt_dir, resume, r);
  pass->write_outputs();
  // The fold models train with the loss the main model was kept with.
  if (fold_plan.folds >= 2 && !skip_folds)
    train_fold_models(ctx.comm, ctx.cfg.to_yaml(), data, pass->options(), fold_plan, set, stem,
                      resume, from);
  set.commit();
  log::info(
      cat("wrote ", output, ": train acc ", r.final_train_acc, ", ",
          r.final_test_acc < 0 ? std::string("no test split") : cat("test acc ", r.final_test_acc),
          ", ", int64_t(r.images_per_s), " img/s (", int64_t(r.images_per_s_per_rank),
          " per rank), ", log::format_duration(r.elapsed_s),
          pass->second_run() ? " for both runs (pretrain.loss auto; the figures are the second's)"
                             : ""));
  if (holdout > 0) log_early_model(early, pass->early_model(), pass->options());
  if (fold_plan.folds >= 2)
    log::info(skip_folds
                  ? cat("its ", fold_plan.folds, " fold models: pretrain --fold k, k = 0..",
                        fold_plan.folds - 1, " (--skip-folds)")
                  : cat("wrote ", fold_plan.folds, " fold models beside it (pretrain.folds; ",
                        fold_info_name(stem), ")"));
}

}  // namespace sieve::train
