// train_scaled: one run or a range of the scaled.sweep grid, each a Trainer run on the full,
// filtered or random arm, with its result.json.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>

#include "config/sections.hpp"
#include "config/sweep.hpp"
#include "data/dataset_file.hpp"
#include "io/atomic_output.hpp"
#include "io/cleanup.hpp"
#include "io/lineage.hpp"
#include "io/metrics.hpp"
#include "io/output_set.hpp"
#include "train/clean_accuracy.hpp"
#include "train/options.hpp"
#include "train/prog_common.hpp"
#include "train/programs.hpp"
#include "train/trainer.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::train {

void add_scaled_flags(po::options_description& d) {
  d.add_options()("dataset", po::value<std::string>(),
                  "dataset file (default: <run.dir>/dataset.h5)")(
      "filter", po::value<std::string>(),
      "filter file for arm filtered/random (default: <run.dir>/filter.h5)")(
      "sweep-dir", po::value<std::string>(), "output directory (default: <run.dir>/sweep)")(
      "sweep-index", po::value<std::string>(),
      "which runs of the scaled.sweep grid: N, A-B (inclusive) or all, run one after the "
      "other in this process (default: $SLURM_ARRAY_TASK_ID, or 0 for a one-run grid)")(
      "ranks-per-run", po::value<int>(),
      "how many of the job's ranks train each run together (default: all); fewer split the job "
      "into groups that train different runs of --sweep-index at once, e.g. mpirun -n 8 with "
      "--ranks-per-run 2: four runs at a time. Must divide the job's ranks. A run's result "
      "depends on its ranks (batch norm sees each rank's part of the batch)")(
      "list-sweep", "print the sweep table (index and values) to stdout and exit")(
      "sweep-size", "print the number of sweep runs to stdout and exit")(
      "resume",
      "continue each run from its newest complete checkpoint (fresh start if none); runs that have "
      "a result.json are skipped");
}

std::vector<int64_t> parse_sweep_indices(const std::string& text, int64_t size);
void run_sweep_point(ToolContext& ctx, const Sweep& sweep, int64_t index);
void check_sweep_batches(const ToolContext& ctx, const Sweep& sweep, int ranks_per_run);
int ranks_per_run(const ToolContext& ctx);
void run_sweep_points(ToolContext& ctx, const Sweep& sweep, const std::vector<int64_t>& indices,
                      int per_run);

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
  std::vector<int64_t> indices = {0};
  if (ctx.has_flag("sweep-index")) {
    indices = parse_sweep_indices(ctx.flags["sweep-index"].as<std::string>(), sweep.size());
  } else if (const char* t = std::getenv("SLURM_ARRAY_TASK_ID"); t && *t) {
    indices = parse_sweep_indices(t, sweep.size());
  } else if (sweep.size() > 1) {
    throw UsageError(cat("--sweep-index: required, the scaled.sweep grid has ", sweep.size(),
                         " runs (see --list-sweep)"));
  }
  // The whole grid, whichever part this process runs: every task of a Slurm array refuses
  // the same bad grid before any training, instead of one task failing hours in.
  const int per_run = ranks_per_run(ctx);
  check_sweep_batches(ctx, sweep, per_run);
  run_sweep_points(ctx, sweep, indices, per_run);
}

// --ranks-per-run: how many of the job's ranks train one run together (default: all).
int ranks_per_run(const ToolContext& ctx) {
  const int ranks = ctx.comm.size();
  if (!ctx.has_flag("ranks-per-run")) return ranks;
  const int r = ctx.flags["ranks-per-run"].as<int>();
  if (r < 1 || ranks % r != 0)
    throw UsageError(cat("--ranks-per-run ", r, ": expected a divisor of the job's ", ranks,
                         " rank(s), from 1 to ", ranks));
  return r;
}

// The runs `indices` on groups of `per_run` ranks, each group its runs one after the other:
// group g of the size / per_run groups trains the g-th, (g + groups)-th, ... run of the
// list, so that every group gets the same mix of batches and arms (the grid varies its last
// key fastest) and which group trains a run does not depend on timing. One group is the
// whole job. Small runs gain most: a run on one rank has no gradient exchange and a larger
// batch per rank (docs/training.md). A stop signal reaches every rank: each group
// checkpoints its run in progress, and the job exits for requeue once every group has
// stopped or finished its runs.
void run_sweep_points(ToolContext& ctx, const Sweep& sweep, const std::vector<int64_t>& indices,
                      int per_run) {
  const int groups = ctx.comm.size() / per_run;
  const int group = ctx.comm.rank() / per_run;
  ToolContext own = ctx;
  if (groups > 1) {
    own.comm = ctx.comm.split(group);
    log::info(cat(indices.size(), " sweep run(s) on ", groups, " groups of ", per_run,
                  " rank(s): ", groups, " runs at a time (--ranks-per-run ", per_run, ")"));
  }
  std::optional<std::string> stopped_at;
  for (size_t i = size_t(group); i < indices.size() && !stopped_at; i += size_t(groups)) {
    std::optional<log::GroupScope> voice;
    if (groups > 1) voice.emplace(own.comm.is_root(), cat("run ", indices[i], ": "));
    try {
      run_sweep_point(own, sweep, indices[i]);
    } catch (const StopRequested& s) {
      stopped_at = s.checkpoint;
      if (groups > 1) log::info(cat("stop signal: checkpoint ", s.checkpoint, " written"));
    }
  }
  if (ctx.comm.allreduce_max(stopped_at ? 1 : 0) > 0)
    exit_for_requeue(ctx.comm, groups > 1 ? std::string("of every run in progress") : *stopped_at);
}

// "N", "A-B" (inclusive) or "all" -> indices into a grid of `size` runs.
std::vector<int64_t> parse_sweep_indices(const std::string& text, int64_t size) {
  auto bad = [&] {
    return UsageError(cat("--sweep-index '", text, "': expected N, A-B or all with 0 <= A <= B < ",
                          size, " (the sweep has ", size, " runs; see --list-sweep)"));
  };
  if (text == "all") {
    std::vector<int64_t> all(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) all[size_t(i)] = i;
    return all;
  }
  static const std::regex re("^([0-9]+)(-([0-9]+))?$");
  std::smatch m;
  if (!std::regex_match(text, m, re)) throw bad();
  int64_t a = 0, b = 0;
  try {
    a = std::stoll(m[1].str());
    b = m[3].matched ? std::stoll(m[3].str()) : a;
  } catch (const std::exception&) {
    throw bad();
  }
  if (a > b || b >= size) throw bad();
  std::vector<int64_t> out;
  for (int64_t i = a; i <= b; ++i) out.push_back(i);
  return out;
}

// Every (global batch, arm) of the grid must fit the samples that arm trains on: a batch
// larger than the arm's data would train at another batch than its row in the report says.
void check_sweep_batches(const ToolContext& ctx, const Sweep& sweep, int ranks_per_run) {
  std::map<std::string, int64_t> arm_samples;  // arm -> training samples
  std::unique_ptr<data::DatasetFile> ds;
  std::vector<int64_t> ids;
  std::vector<int32_t> labels;
  int64_t uneven = -1;  // the first batch that does not split evenly over the ranks
  for (int64_t i = 0; i < sweep.size(); ++i) {
    Config cfg = sweep.apply(ctx.cfg, i);
    const int64_t batch = cfg.get_int("scaled.global_batch");
    if (uneven < 0 && batch % ranks_per_run != 0) uneven = batch;
    const RunPaths rp = run_paths(cfg);
    const std::string arm = cfg.get_string("scaled.arm");
    if (!arm_samples.count(arm)) {
      const std::string dataset = ctx.path_flag("dataset", rp.dataset());
      if (!ds) {
        ds = std::make_unique<data::DatasetFile>(data::DatasetFile::open(dataset));
        ids = ds->sample_ids(data::Split::Train);
        labels = ds->labels(data::Split::Train);
      }
      const JoinTarget target{dataset, ds->fingerprint(), ids, labels};
      arm_samples[arm] =
          arm == "full"
              ? int64_t(ids.size())
              : int64_t(read_keep_indices(ctx.path_flag("filter", rp.filter()),
                                          arm == "filtered" ? "keep" : "random_keep", target)
                            .size());
    }
    check_global_batch(batch, arm_samples[arm],
                       cat("scaled.global_batch (sweep run ", i, ", arm ", arm, ")"),
                       cat("the ", arm, " arm's training samples"));
  }
  if (uneven > 0) warn_uneven_split(uneven, ranks_per_run, "scaled.global_batch");
}

// One point of the sweep grid: train it and write run-<index>/result.json.
namespace {

// A finished run has nothing to continue: --resume over a range of the sweep (an
// interrupted pipeline) trains only the runs without a result. A result of an earlier
// grid (its recorded config differs from this point's) is no result of this run: the run
// starts over (*resume becomes false), which needs --overwrite like any other replaced output.
bool finished_already(const ToolContext& ctx, const Sweep& sweep, int64_t index,
                      const std::string& result_path, bool* resume) {
  if (!*resume || !fs::exists(result_path)) return false;
  std::ifstream in(result_path);
  const Json old = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  const std::string stale = old.is_discarded()
                                ? std::string("not valid JSON")
                                : stale_reason(sweep, ctx.cfg, index, recorded_result_keys(old));
  if (stale.empty()) {
    log::info(cat("sweep run ", index, ": finished already (", result_path, "), skipped"));
    return true;
  }
  log::warn(cat(result_path, ": from another grid (", stale, "): run ", index, " starts over"));
  *resume = false;
  return false;
}

// What one run's training gave: its result, or the partial result of a diverged run.
struct PointOutcome {
  TrainResult r;
  bool diverged = false;
  int64_t diverged_step = -1;
  std::optional<double> train_acc_clean;  // the last epoch's, where the dataset has clean labels
};

PointOutcome train_point(ToolContext& ctx, const TrainOptions& opt, const TrainInput& data,
                         const std::vector<int64_t>& active, const std::string& dataset,
                         const std::string& run_dir, const Config& cfg, bool resume, int64_t index,
                         const std::string& result_path) {
  PointOutcome o;
  Trainer trainer(ctx.comm, opt, make_source(data, active, opt.global_batch, opt.seed, ctx.comm),
                  data.train, eval_split(data, data::Split::Test), data.meta,
                  run_dir + "/checkpoints", run_dir + "/metrics.jsonl", cfg.to_yaml());
  // Where the dataset has clean labels, train accuracy against them too, on the same
  // forward passes (train/clean_accuracy.hpp): the given labels' gap can be negative.
  std::optional<CleanLabelAccuracy> clean = CleanLabelAccuracy::open(dataset);
  if (clean) {
    trainer.set_batch_hook([&](int64_t, const SplitData& d, const std::vector<int64_t>& rows,
                               const float* logits, int k) { clean->record(d, rows, logits, k); });
    trainer.set_epoch_hook([&](int64_t, Json& rec) {
      o.train_acc_clean = clean->end_epoch(ctx.comm);
      rec["train_acc_clean"] = o.train_acc_clean ? Json(*o.train_acc_clean) : Json(nullptr);
    });
  }
  // A diverged run is a result of the sweep, not a failed task: it is recorded in
  // result.json ("diverged": true) and the program exits 0, so that one bad learning rate
  // does not stop the Slurm afterok chain before the report, which marks the run.
  // A stop signal (StopRequested) goes up to run_sweep_points.
  try {
    o.r = trainer.run(resume);
  } catch (const Diverged& d) {
    o.diverged = true;
    o.diverged_step = d.step;
    o.r = d.partial;
    log::warn(cat("sweep run ", index, ": ", d.what(), "; recorded as diverged in ", result_path,
                  " (exit 0)"));
  }
  return o;
}

// result.json of one sweep run (docs/formats.md).
Json result_json(const ToolContext& ctx, const Sweep& sweep, int64_t index, const Config& cfg,
                 const TrainOptions& opt, const std::string& arm, const TrainInput& data,
                 const std::string& filter, const PointOutcome& o) {
  const TrainResult& r = o.r;
  Json j;
  j["sweep_index"] = index;
  for (auto& [k, v] : sweep.values(index)) j["sweep"][k] = v;
  for (auto& [k, v] : result_keys(cfg)) j["config"][k] = v;
  j["arm"] = arm;
  j["seed"] = int64_t(opt.seed);
  j["weight_decay"] = opt.opt.weight_decay;
  j["lr"] = r.peak_lr;
  j["base_lr"] = opt.sched.base_lr;
  j["lars"] = opt.opt.lars;
  j["ranks"] = ctx.comm.size();
  j["global_batch"] = r.batch;
  j["per_rank_batch"] = r.per_rank_batch;
  j["precision"] = r.precision;
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
  // null without clean labels (docs/formats.md); the gap stays against the given labels.
  j["train_acc_clean"] = o.train_acc_clean ? Json(*o.train_acc_clean) : Json(nullptr);
  j["gen_gap"] = r.final_train_acc - r.final_test_acc;
  j["images_per_s"] = r.images_per_s;
  j["images_per_s_per_rank"] = r.images_per_s_per_rank;
  j["elapsed_s"] = r.elapsed_s;
  j["num_classes"] = data.meta.num_classes;
  // Lineage (io/lineage.hpp): the report checks that every run trained on its dataset.
  j["dataset_fingerprint"] = data.meta.fingerprint;
  if (arm != "full") j["filter_fingerprint"] = lineage::fingerprint_of(h5::File::open(filter));
  j["diverged"] = o.diverged;
  if (r.final_test_acc < 0 && !o.diverged)  // no test split: nothing was measured
    for (const char* k : {"final_test_acc", "best_test_acc", "best_epoch", "time_to_best_s",
                          "final_test_loss", "gen_gap"})
      j[k] = nullptr;
  if (o.diverged) {
    // No final accuracy exists; the last evaluation before the divergence (if any) is
    // kept under its own name so that nothing reads it as the run's result.
    j["diverged_at_step"] = o.diverged_step;
    j["last_eval_test_acc"] = r.final_test_acc >= 0 ? Json(r.final_test_acc) : Json(nullptr);
    for (const char* k :
         {"final_test_acc", "best_test_acc", "best_epoch", "time_to_best_s", "final_test_loss",
          "train_acc", "train_loss", "gen_gap", "train_acc_clean"})
      j[k] = nullptr;
  }
  return j;
}

}  // namespace

// One run of the grid as named phases: skip it if finished, take its directory, train the
// arm's samples, write result.json.
void run_sweep_point(ToolContext& ctx, const Sweep& sweep, int64_t index) {
  Config cfg = sweep.apply(ctx.cfg, index);
  const RunPaths rp = run_paths(cfg);
  const std::string dataset = ctx.path_flag("dataset", rp.dataset());
  const std::string filter = ctx.path_flag("filter", rp.filter());
  const std::string run_dir = cat(ctx.path_flag("sweep-dir", rp.sweep_dir()), "/run-", index);
  const std::string result_path = run_dir + "/result.json";
  bool resume = ctx.has_flag("resume");
  if (finished_already(ctx, sweep, index, result_path, &resume)) return;
  make_output_dir(ctx, run_dir, 2);
  check_output_path(result_path, ctx.overwrite);
  const StageLock lock(ctx.comm, run_dir, "train_scaled");  // one writer per sweep run
  check_resolved_config_path(run_dir + "/config.yaml");
  prepare_checkpoint_dir(ctx, run_dir + "/checkpoints", resume);
  // A run started over (--overwrite) loses its old checkpoints and metrics now: its old
  // result.json goes too, so that a failed redo leaves an unfinished run, never an old
  // result beside the new run's partial metrics.
  // The barrier first: every rank has finished checking result.json above (a broadcast may
  // return on rank 0 before the others receive it), so none reads it while it goes.
  if (!resume) {
    ctx.comm.barrier();
    if (ctx.comm.is_root()) {
      std::error_code ec;
      fs::remove(result_path, ec);
    }
  }
  std::string desc;
  for (auto& [k, v] : sweep.values(index)) desc += cat(" ", k, "=", v);
  log::info(
      cat("sweep run ", index, "/", sweep.size(), ":", desc.empty() ? " (base config)" : desc));

  TrainOptions opt = read_train_options(cfg, "scaled");
  opt.precision_record_dir = ctx.path_flag("sweep-dir", rp.sweep_dir());
  const std::string arm = cfg.get_string("scaled.arm");
  TrainInput data = load_train_input(dataset, cfg);
  std::vector<int64_t> active = all_indices(data.train.n);
  if (arm != "full")
    active = read_keep_indices(
        filter, arm == "filtered" ? "keep" : "random_keep",
        {dataset, data.meta.fingerprint, data.train.sample_id, data.train.labels});
  log::info(cat("arm ", arm, ": training on ", active.size(), " of ", data.train.n, " samples"));
  if (cfg.get_string("scaled.budget") == "steps") {
    const std::string matched = match_full_arm_steps(opt, data.train.n, int64_t(active.size()));
    if (!matched.empty()) log::info(matched);
  }
  const PointOutcome o =
      train_point(ctx, opt, data, active, dataset, run_dir, cfg, resume, index, result_path);
  if (ctx.comm.is_root()) {
    const Json j = result_json(ctx, sweep, index, cfg, opt, arm, data, filter, o);
    write_resolved_config(run_dir + "/config.yaml", cfg.to_yaml());
    write_text_atomic(result_path, j.dump(2) + "\n");
  }
  ctx.comm.barrier();
  if (o.diverged) return;
  const TrainResult& r = o.r;
  log::info(cat("wrote ", result_path, ": ",
                r.final_test_acc < 0
                    ? std::string("no test split")
                    : cat("test acc ", r.final_test_acc, " (best ", r.best_test_acc, ")"),
                ", train acc ", r.final_train_acc, ", ", int64_t(r.images_per_s), " img/s"));
}

}  // namespace sieve::train
