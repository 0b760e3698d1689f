// pretrain and train_scaled: output checks, data loading, the Trainer, final outputs.
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "config/sections.hpp"
#include "io/atomic_output.hpp"
#include "io/schemas.hpp"
#include "train/programs.hpp"
#include "train/sweep.hpp"
#include "train/trainer.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::train {

namespace {

// Checkpoint directory policy: --resume continues from it; --overwrite starts over (old
// checkpoints removed); otherwise existing checkpoints are an error rather than silently
// mixed with a new run's.
void prepare_checkpoint_dir(const ToolContext& ctx, const std::string& dir, bool resume) {
  std::string err;
  if (ctx.comm.is_root()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) err = cat(dir, ": cannot create checkpoint directory: ", ec.message());
    bool any = false;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().filename().string().rfind("ckpt-", 0) == 0) any = true;
    if (err.empty() && any && !resume) {
      if (ctx.overwrite) {
        for (const auto& e : fs::directory_iterator(dir, ec))
          if (e.path().filename().string().rfind("ckpt-", 0) == 0) fs::remove(e.path(), ec);
      } else {
        err = cat(dir, ": holds checkpoints of an earlier run (pass --resume to continue it or "
                       "--overwrite to start over)");
      }
    }
  }
  ctx.comm.bcast_string(err);
  if (!err.empty()) throw UsageError(err);
}

// Creates a stage's own output directory (`levels` = how many trailing components are the
// stage's: pretrain/ is 1, sweep/run-N/ is 2) but never the directories above it, so that a
// mistyped run.dir or --output is an error naming it instead of a new, empty tree.
void make_output_dir(const ToolContext& ctx, const fs::path& dir, int levels) {
  std::string err;
  if (ctx.comm.is_root()) {
    fs::path base = dir;
    for (int i = 0; i < levels; ++i) base = base.parent_path();
    if (base.empty()) base = ".";
    std::error_code ec;
    if (!fs::is_directory(base)) {
      err = cat(dir.string(), ": cannot create the output directory: ", base.string(),
                " does not exist");
    } else if (fs::create_directories(dir, ec); ec || !fs::is_directory(dir)) {
      err = cat(dir.string(), ": cannot create the output directory: ",
                ec ? ec.message() : std::string("a file of that name exists"));
    }
  }
  ctx.comm.bcast_string(err);
  if (!err.empty()) throw CollectiveError(err);
}

std::string flag_or(const ToolContext& ctx, const std::string& name, const std::string& def) {
  std::string v = ctx.flag(name);
  return v.empty() ? def : v;
}

struct LoadedData {
  DatasetMeta meta;
  SplitData train, test;
  bool has_test = false;
};

LoadedData load_data(const std::string& path) {
  LoadedData d;
  d.meta = read_dataset_meta(path);
  d.train = read_split(path, "train");
  d.has_test = has_split(path, "test");
  if (d.has_test) d.test = read_split(path, "test");
  log::info(cat(path, ": ", d.train.n, " train / ", d.test.n, " test samples, ",
                d.meta.num_classes, " classes"));
  return d;
}

std::vector<int64_t> all_indices(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

}  // namespace

void add_pretrain_flags(po::options_description& d) {
  d.add_options()
      ("dataset", po::value<std::string>(), "dataset file (default: <run.dir>/dataset.h5)")
      ("output", po::value<std::string>(),
       "model file (default: <run.dir>/pretrain/model.h5); metrics.jsonl and checkpoints/ "
       "go next to it")
      ("resume", "continue from the newest complete checkpoint (fresh start if none)");
}

void pretrain_main(ToolContext& ctx) {
  const RunPaths rp = run_paths(ctx.cfg);
  const std::string dataset = flag_or(ctx, "dataset", rp.dataset());
  const std::string output = flag_or(ctx, "output", rp.model());
  const bool resume = ctx.has_flag("resume");
  std::string dir = fs::path(output).parent_path().string();
  if (dir.empty()) dir = ".";
  make_output_dir(ctx, dir, 1);
  check_output_path(output, ctx.overwrite, schema::kModel, {dataset});
  const std::string ckpt_dir = dir + "/checkpoints";
  prepare_checkpoint_dir(ctx, ckpt_dir, resume);

  TrainOptions opt = read_train_options(ctx.cfg, "pretrain");
  LoadedData data = load_data(dataset);
  Trainer trainer(ctx.comm, opt, data.train, data.has_test ? &data.test : nullptr, data.meta,
                  all_indices(data.train.n), ckpt_dir, dir + "/metrics.jsonl",
                  ctx.cfg.to_yaml());
  TrainResult r;
  try {
    r = trainer.run(resume);
  } catch (const StopRequested& s) {
    exit_for_requeue(ctx.comm, s.checkpoint);
  }
  save_model(output, trainer.model(), ctx.cfg.to_yaml(), ctx.overwrite, ctx.comm);
  log::info(cat("wrote ", output, ": train acc ", r.final_train_acc, ", test acc ",
                r.final_test_acc, ", ", int64_t(r.images_per_s), " img/s (",
                int64_t(r.images_per_s_per_rank), " per rank), ", log::format_duration(r.elapsed_s)));
}

void add_scaled_flags(po::options_description& d) {
  d.add_options()
      ("dataset", po::value<std::string>(), "dataset file (default: <run.dir>/dataset.h5)")
      ("filter", po::value<std::string>(),
       "filter file for arm filtered/random (default: <run.dir>/filter.h5)")
      ("sweep-dir", po::value<std::string>(), "output directory (default: <run.dir>/sweep)")
      ("sweep-index", po::value<int64_t>(),
       "which run of the scaled.sweep grid (default: $SLURM_ARRAY_TASK_ID, or 0 for a "
       "one-run grid)")
      ("list-sweep", "print the sweep table (index and values) to stdout and exit")
      ("sweep-size", "print the number of sweep runs to stdout and exit")
      ("resume", "continue the run from its newest complete checkpoint");
}

void train_scaled_main(ToolContext& ctx) {
  Sweep sweep(ctx.cfg);
  if (ctx.has_flag("sweep-size")) {
    if (ctx.comm.is_root()) std::cout << sweep.size() << std::endl;
    return;
  }
  if (ctx.has_flag("list-sweep")) {
    if (ctx.comm.is_root()) std::cout << sweep.table() << std::flush;
    return;
  }
  int64_t index = 0;
  if (ctx.has_flag("sweep-index")) {
    index = ctx.flags["sweep-index"].as<int64_t>();
  } else if (const char* t = std::getenv("SLURM_ARRAY_TASK_ID"); t && *t) {
    index = std::atoll(t);
  } else if (sweep.size() > 1) {
    throw UsageError(cat("--sweep-index: required, the scaled.sweep grid has ", sweep.size(),
                         " runs (see --list-sweep)"));
  }
  Config cfg = sweep.apply(ctx.cfg, index);
  const RunPaths rp = run_paths(cfg);
  const std::string dataset = flag_or(ctx, "dataset", rp.dataset());
  const std::string filter = flag_or(ctx, "filter", rp.filter());
  const std::string run_dir = cat(flag_or(ctx, "sweep-dir", rp.sweep_dir()), "/run-", index);
  const std::string result_path = run_dir + "/result.json";
  const bool resume = ctx.has_flag("resume");
  make_output_dir(ctx, run_dir, 2);
  check_output_path(result_path, ctx.overwrite);
  prepare_checkpoint_dir(ctx, run_dir + "/checkpoints", resume);
  std::string desc;
  for (auto& [k, v] : sweep.values(index)) desc += cat(" ", k, "=", v);
  log::info(cat("sweep run ", index, "/", sweep.size(), ":", desc.empty() ? " (base config)" : desc));

  TrainOptions opt = read_train_options(cfg, "scaled");
  const std::string arm = cfg.get_string("scaled.arm");
  LoadedData data = load_data(dataset);
  std::vector<int64_t> active = all_indices(data.train.n);
  if (arm != "full")
    active = read_keep_indices(filter, arm == "filtered" ? "keep" : "random_keep",
                               data.train.sample_id);
  log::info(cat("arm ", arm, ": training on ", active.size(), " of ", data.train.n, " samples"));
  Trainer trainer(ctx.comm, opt, data.train, data.has_test ? &data.test : nullptr, data.meta,
                  active, run_dir + "/checkpoints", run_dir + "/metrics.jsonl", cfg.to_yaml());
  TrainResult r;
  try {
    r = trainer.run(resume);
  } catch (const StopRequested& s) {
    exit_for_requeue(ctx.comm, s.checkpoint);
  }
  if (ctx.comm.is_root()) {
    Json j;
    j["sweep_index"] = index;
    for (auto& [k, v] : sweep.values(index)) j["sweep"][k] = v;
    j["arm"] = arm;
    j["seed"] = int64_t(opt.seed);
    j["weight_decay"] = opt.opt.weight_decay;
    j["lr"] = r.peak_lr;
    j["base_lr"] = opt.sched.base_lr;
    j["lars"] = opt.opt.lars;
    j["ranks"] = ctx.comm.size();
    j["global_batch"] = r.batch;
    j["per_rank_batch"] = r.per_rank_batch;
    j["accumulation_steps"] = r.accum_steps;
    j["samples_used"] = r.samples_used;
    j["samples_total"] = data.train.n;
    j["epochs"] = opt.epochs;
    j["steps"] = r.steps;
    j["final_test_acc"] = r.final_test_acc;
    j["best_test_acc"] = r.best_test_acc;
    j["best_epoch"] = r.best_epoch;
    j["time_to_best_s"] = r.time_to_best_s;
    j["final_test_loss"] = r.final_test_loss;
    j["train_acc"] = r.final_train_acc;
    j["train_loss"] = r.final_train_loss;
    j["gen_gap"] = r.final_test_acc >= 0 ? r.final_train_acc - r.final_test_acc : 0.0;
    j["images_per_s"] = r.images_per_s;
    j["images_per_s_per_rank"] = r.images_per_s_per_rank;
    j["elapsed_s"] = r.elapsed_s;
    write_text_atomic(run_dir + "/config.yaml", cfg.to_yaml());
    write_text_atomic(result_path, j.dump(2) + "\n");
  }
  ctx.comm.barrier();
  log::info(cat("wrote ", result_path, ": test acc ", r.final_test_acc, " (best ",
                r.best_test_acc, "), train acc ", r.final_train_acc, ", ",
                int64_t(r.images_per_s), " img/s"));
}

}  // namespace sieve::train
