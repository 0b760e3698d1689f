#include "train/crossfit.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>

#include "config/sections.hpp"
#include "data/rng.hpp"
#include "io/atomic_output.hpp"
#include "io/metrics.hpp"
#include "train/checkpoint.hpp"
#include "train/holdout.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::train {

namespace {

// The sampling error of an accuracy p measured on n samples (binomial): sqrt(p (1 - p) / n).
double standard_error(double p, int64_t n) {
  p = std::clamp(p, 0.0, 1.0);
  return n > 0 ? std::sqrt(p * (1 - p) / double(n)) : 0.0;
}

// What a later epoch's held-out accuracy must exceed to replace the kept early model.
double replacement_bar(double kept_acc, int64_t samples, double margin_se) {
  return kept_acc + margin_se * standard_error(kept_acc, samples);
}

}  // namespace

bool replaces_early_model(double acc, double kept_acc, int64_t samples, double margin_se) {
  return kept_acc < 0 || acc > replacement_bar(kept_acc, samples, margin_se);
}

std::string early_peak_copy(const std::string& model) {
  return fs::path(model).replace_extension(".peak.h5").string();
}

bool memorised(double final_train_acc, double peak_acc, double stall_train_acc) {
  const double error = 1 - peak_acc;
  if (error <= 0) return true;
  const bool outran_peak = final_train_acc - peak_acc > 0.5 * error;
  const bool gained_after_stall =
      stall_train_acc < 0 || final_train_acc - stall_train_acc > 0.4 * error;
  return outran_peak && gained_after_stall;
}

EarlyModelKeeper::EarlyModelKeeper(const Comm& comm, std::string model, std::string info,
                                   lineage::Lineage from, std::string config_yaml,
                                   std::string run_id, int64_t samples, bool resume,
                                   double margin_se, std::string pick)
    : comm_(comm),
      model_(std::move(model)),
      info_(std::move(info)),
      config_yaml_(std::move(config_yaml)),
      run_id_(std::move(run_id)),
      from_(std::move(from)),
      samples_(samples),
      margin_se_(margin_se),
      pick_(std::move(pick)) {
  SIEVE_ASSERT(pick_ == "auto" || pick_ == "guarded" || pick_ == "peak", "early pick ", pick_);
  peak_model_ = early_peak_copy(model_);
  int64_t finished_pick = 0;  // 0: none yet, 1: guarded, 2: peak
  if (resume && comm_.is_root() && fs::exists(info_) && fs::exists(model_)) {
    auto lines = read_json_lines(info_);
    Json j = lines.empty() ? Json::object() : lines.back();
    // Files of runs before the peak was kept beside the guarded pick hold only epoch/acc/loss.
    auto read = [&](const std::string& prefix, const Candidate& fallback) {
      return Candidate{j.value(prefix + "epoch", fallback.epoch),
                       j.value(prefix + "acc", fallback.acc),
                       j.value(prefix + "loss", fallback.loss),
                       j.value(prefix + "train_acc", fallback.train_acc)};
    };
    guarded_ = read("guarded_", {j.value("epoch", int64_t(0)), j.value("holdout_acc", -1.0),
                                 j.value("holdout_loss", 0.0), -1.0});
    peak_ = read("peak_", guarded_);
    train_acc_ = j.value("train_acc", -1.0);
    const std::string was = j.value("pick", std::string());  // set by a finished run
    finished_pick = was == "peak" ? 2 : was == "guarded" ? 1 : 0;
    // The peak's copy is gone once finish() moved it; without it the peak is the guarded one.
    if (peak_.epoch != guarded_.epoch && finished_pick == 0 && !fs::exists(peak_model_))
      peak_ = guarded_;
  }
  double state[10] = {double(guarded_.epoch),
                      guarded_.acc,
                      guarded_.loss,
                      guarded_.train_acc,
                      double(peak_.epoch),
                      peak_.acc,
                      peak_.loss,
                      peak_.train_acc,
                      train_acc_,
                      double(finished_pick)};
  comm_.bcast(state, 10);
  guarded_ = {int64_t(state[0]), state[1], state[2], state[3]};
  peak_ = {int64_t(state[4]), state[5], state[6], state[7]};
  train_acc_ = state[8];
  finished_ = state[9] != 0;
  chose_peak_ = state[9] == 2;
}

void EarlyModelKeeper::update(int64_t epoch, double loss, double acc, double train_acc,
                              nn::Model& m) {
  // A replacement beats every accuracy since the previous one (each stayed under its bar),
  // so it is also a new peak; a new peak that is no replacement is kept beside it.
  const bool replaces = replaces_early_model(acc, guarded_.acc, samples_, margin_se_);
  const bool new_peak = acc > peak_.acc;
  train_acc_ = train_acc;
  if (replaces) {
    guarded_ = {epoch, acc, loss, train_acc};
    save_model(model_, m, config_yaml_, from_, true, comm_);
  }
  if (new_peak) {
    peak_ = {epoch, acc, loss, train_acc};
    if (!replaces) save_model(peak_model_, m, config_yaml_, from_, true, comm_);
  }
  write_info(false);  // every epoch: the training accuracy too, for a resumed run's finish
}

void EarlyModelKeeper::finish() {
  if (guarded_.epoch == 0) return;  // no epoch evaluated
  // A run resumed after its pick (stopped before its commit) keeps it.
  if (!finished_)
    chose_peak_ = pick_ == "peak" || (pick_ == "auto" && !run_memorised());
  finished_ = true;
  on_root_agreed(comm_, [&] {
    std::error_code ec;
    if (chose_peak_ && peak_.epoch != guarded_.epoch && fs::exists(peak_model_)) {
      fs::rename(peak_model_, model_, ec);
      if (ec) throw Error(cat(model_, ": cannot replace it by ", peak_model_, ": ", ec.message()));
    }
    fs::remove(peak_model_, ec);
    write_info(true);
  });
}

void EarlyModelKeeper::write_info(bool finished) const {
  if (!comm_.is_root()) return;
  const Candidate& in_file = finished ? picked() : guarded_;  // what `model` holds
  Json j;
  j["epoch"] = in_file.epoch;
  j["holdout_acc"] = in_file.acc;
  j["holdout_loss"] = in_file.loss;
  j["holdout_samples"] = samples_;
  j["holdout_se"] = standard_error(in_file.acc, samples_);
  j["margin_se"] = margin_se_;
  for (const auto& [prefix, c] : {std::pair{"guarded_", &guarded_}, std::pair{"peak_", &peak_}}) {
    j[cat(prefix, "epoch")] = c->epoch;
    j[cat(prefix, "acc")] = c->acc;
    j[cat(prefix, "loss")] = c->loss;
    j[cat(prefix, "train_acc")] = c->train_acc;
  }
  j["train_acc"] = train_acc_;
  j["early_pick"] = pick_;
  if (!loss_.empty()) j["loss"] = loss_;
  if (!first_pass_.is_null()) j["first_pass"] = first_pass_;
  if (finished) {
    j["memorised"] = run_memorised();
    j["pick"] = chose_peak_ ? "peak" : "guarded";
  }
  j["run_id"] = run_id_;
  write_text_atomic(info_, j.dump() + "\n");  // one JSON line
}

std::string EarlyModelKeeper::describe() const {
  const double bar = replacement_bar(guarded_.acc, samples_, margin_se_);
  return cat("early model: epoch ", guarded_.epoch, " at ", guarded_.acc, "; best seen ", peak_.acc,
             " at epoch ", peak_.epoch, "; a later epoch replaces it above ", bar);
}

bool EarlyModelKeeper::run_memorised() const {
  return memorised(train_acc_, peak_.acc, guarded_.train_acc);
}

Json EarlyModelKeeper::verdict(int64_t epochs) const {
  return {{"loss", loss_},
          {"epochs", epochs},
          {"memorised", run_memorised()},
          {"train_acc", train_acc_},
          {"peak_acc", peak_.acc},
          {"peak_epoch", peak_.epoch},
          {"guarded_epoch", guarded_.epoch},
          {"guarded_train_acc", guarded_.train_acc}};
}

std::string EarlyModelKeeper::summary(int64_t epochs) const {
  const bool mem = run_memorised();
  return cat("held-out acc ", picked().acc, " at epoch ", picked().epoch, " of ", epochs, ": the ",
             chose_peak_ ? "highest"
                         : cat("guarded pick (the highest: ", peak_.acc, " at epoch ", peak_.epoch,
                               "; pretrain.early_margin_se = ", margin_se_, ")"),
             "; the run ", mem ? "memorised" : "did not memorise", " its labels (train acc ",
             train_acc_, " against the held-out peak ", peak_.acc,
             guarded_.train_acc < 0
                 ? std::string()
                 : cat(", and ", guarded_.train_acc, " at epoch ", guarded_.epoch,
                       ", where the held-out accuracy last rose measurably"),
             "; pretrain.early_pick = ", pick_, ")");
}

std::string fold_model_name(const std::string& stem, int k, bool early) {
  return cat(stem, "_fold", k, early ? "_early.h5" : ".h5");
}

std::string fold_info_name(const std::string& stem) {
  return stem + "_folds.json";
}

std::vector<std::string> fold_members(const std::string& stem, int n) {
  std::vector<std::string> m;
  for (int k = 0; k < n; ++k)
    for (std::string& name : fold_files(stem, k)) m.push_back(std::move(name));
  m.push_back(fold_info_name(stem));
  return m;
}

int existing_folds(const std::string& dir, const std::string& stem) {
  const std::regex re(stem + "_fold([0-9]{1,4})(_early)?\\.h5");
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, re)) n = std::max(n, std::stoi(m[1].str()) + 1);
  }
  return n;
}

uint64_t fold_seed(uint64_t train_seed) {
  return data::hash_combine(train_seed, 0x666f6c6473ULL);  // "folds"
}

namespace {

// Rows of fold k (held) and the rest (trained on), ascending.
void fold_rows(const std::vector<int32_t>& fold, int k, std::vector<int64_t>* train,
               std::vector<int64_t>* held) {
  for (size_t i = 0; i < fold.size(); ++i) (fold[i] == k ? held : train)->push_back(int64_t(i));
}

}  // namespace

FoldPlan plan_folds(const TrainInput& data, const TrainOptions& opt, int folds,
                    const std::string& ckpt_root, double early_margin_se,
                    const std::string& early_pick) {
  if (folds == 1)
    throw UsageError("pretrain.folds: 1 is not cross-fitting; expected 0 (off) or at least 2");
  FoldPlan p;
  p.folds = folds;
  p.ckpt_root = ckpt_root;
  p.early_margin_se = early_margin_se;
  p.early_pick = early_pick;
  if (folds < 2) return p;
  SIEVE_CHECK(folds <= data.train.n, data.path, ": pretrain.folds=", folds, " exceeds the ",
              data.train.n, " training samples");
  p.seed = fold_seed(opt.seed);
  p.fold = split_folds(data.train, folds, p.seed);
  int64_t smallest = data.train.n;
  for (int k = 0; k < folds; ++k) {
    std::vector<int64_t> train, held;
    fold_rows(p.fold, k, &train, &held);
    smallest = std::min<int64_t>(smallest, int64_t(train.size()));
  }
  check_global_batch(opt.global_batch, smallest, "pretrain.global_batch",
                     cat("the training samples outside one fold of pretrain.folds=", folds));
  return p;
}

std::vector<std::string> fold_files(const std::string& stem, int k) {
  auto sidecar = [](const std::string& name) {
    return fs::path(config_sidecar_path(name)).string();
  };
  const std::string early = fold_model_name(stem, k, true), fin = fold_model_name(stem, k, false);
  return {cat("metrics_fold", k, ".jsonl"),
          cat(stem, "_fold", k, "_early.json"),
          sidecar(early),
          early,
          sidecar(fin),
          fin};
}

void train_fold_model(const Comm& comm, const std::string& config_yaml, const TrainInput& data,
                      const TrainOptions& opt, const FoldPlan& plan, int k,
                      const std::function<std::string(const std::string&)>& staged,
                      const std::string& run_id, const std::string& stem, bool resume,
                      const lineage::Lineage& from) {
  std::vector<int64_t> train, held;
  fold_rows(plan.fold, k, &train, &held);
  log::info(cat("fold ", k + 1, " of ", plan.folds, ": training on ", train.size(),
                " samples, scoring ", held.size()));
  TrainOptions o = opt;
  o.seed = data::hash_combine(opt.seed, uint64_t(k + 1));  // each fold its own initialisation
  const std::string ckpt = plan.checkpoint_dir(k);
  // No test evaluation: the fold models only score their fold; the main model's test
  // accuracy is the one reported.
  Trainer t(comm, o, make_source(data, train, o.global_batch, o.seed, comm), data.train,
            EvalSplit{}, data.meta, ckpt, staged(cat("metrics_fold", k, ".jsonl")), config_yaml);
  EarlyModelKeeper early_model(
      comm, staged(fold_model_name(stem, k, true)), staged(cat(stem, "_fold", k, "_early.json")),
      {from.inputs, from.dataset_fingerprint, cat("fold", k, "_early")}, config_yaml, run_id,
      int64_t(held.size()), resume, plan.early_margin_se, plan.early_pick);
  early_model.set_loss(o.loss);
  const EvalSplit rows_of_train = eval_split(data, data::Split::Train);
  t.set_epoch_hook([&](int64_t epoch, Json& rec) {
    auto [loss, acc] = t.evaluate(rows_of_train, &held);
    rec["holdout_loss"] = loss;  // the fold plays the held-out part's role
    rec["holdout_acc"] = acc;
    early_model.update(epoch, loss, acc, rec.value("train_acc", -1.0), t.model());
    log::info(cat("fold ", k + 1, " epoch ", epoch, ": fold acc ", acc, " (",
                  early_model.describe(), ")"));
  });
  try {
    t.run(resume);
  } catch (const StopRequested& s) {
    exit_for_requeue(comm, s.checkpoint);
  }
  early_model.finish();
  save_model(staged(fold_model_name(stem, k, false)), t.model(), config_yaml,
             {from.inputs, from.dataset_fingerprint, cat("fold", k)}, true, comm);
}

Json fold_record(const FoldPlan& plan, const std::string& run_id, const std::string& stem,
                 const std::function<std::string(const std::string&)>& path_of) {
  Json info;
  info["folds"] = plan.folds;
  info["seed"] = plan.seed;
  info["run_id"] = run_id;
  info["fold"] = Json::array();
  for (int k = 0; k < plan.folds; ++k) {
    // The early model as EarlyModelKeeper recorded it; the last epoch's fold accuracy from the
    // metrics.
    const auto early = read_json_lines(path_of(cat(stem, "_fold", k, "_early.json")));
    const auto metrics = read_json_lines(path_of(cat("metrics_fold", k, ".jsonl")));
    const Json peak = early.empty() ? Json::object() : early.back();
    const Json last = metrics.empty() ? Json::object() : metrics.back();
    info["fold"].push_back({{"samples", int64_t(std::count(plan.fold.begin(), plan.fold.end(), k))},
                            {"early_epoch", peak.value("epoch", int64_t(0))},
                            {"early_acc", peak.value("holdout_acc", -1.0)},
                            {"final_acc", last.value("holdout_acc", -1.0)}});
  }
  return info;
}

void train_fold_models(const Comm& comm, const std::string& config_yaml, const TrainInput& data,
                       const TrainOptions& opt, const FoldPlan& plan, OutputSet& set,
                       const std::string& stem, bool resume, const lineage::Lineage& from) {
  const auto staged = [&](const std::string& name) { return set.staged(name); };
  for (int k = 0; k < plan.folds; ++k)
    train_fold_model(comm, config_yaml, data, opt, plan, k, staged, set.run_id(), stem, resume,
                     from);
  if (comm.is_root())
    write_text_atomic(set.staged(fold_info_name(stem)),
                      fold_record(plan, set.run_id(), stem, staged).dump() + "\n");
}

bool complete_fold_record(const FoldPlan& plan, const std::string& dir, const std::string& stem,
                          const std::string& run_id) {
  const auto in_dir = [&](const std::string& name) { return (fs::path(dir) / name).string(); };
  // A main model retrained meanwhile makes these folds another run's: no record for them.
  if (run_id_of(in_dir(stem + ".h5")) != run_id) return false;
  for (int k = 0; k < plan.folds; ++k)
    for (const std::string& name : fold_files(stem, k))
      if (!fs::exists(in_dir(name))) return false;
  for (int k = 0; k < plan.folds; ++k)
    for (bool early : {false, true})
      if (run_id_of(in_dir(fold_model_name(stem, k, early))) != run_id) return false;
  write_text_atomic(in_dir(fold_info_name(stem)),
                    fold_record(plan, run_id, stem, in_dir).dump() + "\n");
  return true;
}

std::optional<OutOfFold> load_out_of_fold(const Config& cfg, const std::string& model_path,
                                          const data::DatasetFile& ds,
                                          const std::string& fingerprint,
                                          const std::string& backend, nn::DType dtype) {
  const std::string choice = cfg.get_string("features.fold_models");
  const fs::path mp(model_path);
  std::string stem = mp.stem().string();
  if (stem.ends_with("_early")) stem.resize(stem.size() - 6);
  const fs::path dir = mp.parent_path();
  const std::string info_path = (dir / fold_info_name(stem)).string();
  if (choice == "off") return std::nullopt;
  if (!fs::exists(info_path)) {
    // A run configured for folds whose fold models are not all trained yet (the Slurm job
    // array of `pretrain --fold k` unfinished): in-sample probabilities would pass silently.
    const std::optional<Config> made_by =
        stored_config((dir / (stem + ".h5")).string(), cfg.schema());
    const int want = made_by ? int(made_by->get_int("pretrain.folds")) : 0;
    SIEVE_CHECK(want < 2, info_path, ": missing, although ", (dir / (stem + ".h5")).string(),
                " was trained with pretrain.folds=", want,
                ": its fold models are not all trained (pretrain --fold k for k = 0..", want - 1,
                ", the Slurm job array); or set features.fold_models=off");
    return std::nullopt;
  }
  auto lines = read_json_lines(info_path);
  SIEVE_CHECK(!lines.empty() && lines.back().contains("folds"), info_path,
              ": expected pretrain's fold record (folds, seed)");
  const Json& info = lines.back();
  OutOfFold o;
  o.folds = info.at("folds").get<int>();
  o.choice = choice;
  SIEVE_CHECK(o.folds >= 2, info_path, ": folds ", o.folds, ": expected at least 2");
  // One run's set: the main pair and every fold model (a mix would score with stale models).
  std::vector<std::string> same = {(dir / (stem + ".h5")).string(),
                                   (dir / (stem + "_early.h5")).string()};
  for (int k = 0; k < o.folds; ++k) {
    o.paths.push_back((dir / fold_model_name(stem, k, choice == "early")).string());
    SIEVE_CHECK(fs::exists(o.paths.back()), o.paths.back(), ": missing (", info_path, " lists ",
                o.folds, " folds); run pretrain again or set features.fold_models=off");
    same.push_back(o.paths.back());
  }
  check_same_run(same);
  // Out of fold only means something on the split the folds were drawn from.
  for (const auto& p : o.paths) {
    const std::string trained_on = lineage::lineage_of(p).dataset_fingerprint;
    SIEVE_CHECK(trained_on.empty() || fingerprint.empty() || trained_on == fingerprint, p,
                ": trained on another dataset (", trained_on, ") than ", ds.path(), " (",
                fingerprint, "); its folds do not apply (features.fold_models=off ignores them)");
  }
  SplitData d;
  d.labels = ds.labels(data::Split::Train);
  d.sample_id = ds.sample_ids(data::Split::Train);
  d.n = int64_t(d.labels.size());
  o.fold = split_folds(d, o.folds, info.at("seed").get<uint64_t>());
  if (info.contains("fold") && info["fold"].size() == size_t(o.folds))
    for (int k = 0; k < o.folds; ++k) {
      const auto n = std::count(o.fold.begin(), o.fold.end(), k);
      SIEVE_CHECK(n == info["fold"][size_t(k)].value("samples", int64_t(-1)), info_path, ": fold ",
                  k, " held ", info["fold"][size_t(k)].value("samples", int64_t(-1)),
                  " samples in pretrain, ", n, " of ", ds.path(), "'s training split now");
    }
  for (const auto& p : o.paths) o.models.push_back(load_model(p, backend, dtype));
  return o;
}

}  // namespace sieve::train
