// Cross-fitting (pretrain.folds = K >= 2) and the early-learning peak it shares with pretrain.
//
// Why: a model's probabilities for the samples it trained on are optimistic about their
// labels, the wrong ones included; the confident-learning detector and the noise estimate
// want probabilities of a model that never saw the sample. pretrain trains K extra models,
// model k without fold k of the training split (holdout.hpp's split_folds: stratified per
// class, keyed by (seed, sample id)); fold k is also model k's held-out part, whose accuracy
// peak picks model k's early copy. extract_features then writes /train/probs out of fold:
// every training row scored by the one fold model that did not train on it.
//
// Files beside pretrain's `<stem>.h5` (model.h5), all members of pretrain's output set:
//   <stem>_fold<k>.h5, <stem>_fold<k>_early.h5 (+ .config.yaml sidecars),
//   <stem>_fold<k>_early.json (epoch and accuracy of the peak), metrics_fold<k>.jsonl,
//   <stem>_folds.json: {"folds": K, "seed": S, "run_id", "fold": [{samples, early_epoch,
//   early_acc, final_acc}, ...]}; extract_features recomputes the assignment from K and S.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "config/config.hpp"
#include "data/dataset_file.hpp"
#include "io/lineage.hpp"
#include "io/metrics.hpp"
#include "io/output_set.hpp"
#include "nn/model.hpp"
#include "train/stream.hpp"
#include "train/trainer.hpp"

namespace sieve::train {

// Whether a held-out accuracy `acc` replaces the kept early model of accuracy `kept_acc`
// (measured on `samples` held-out samples): only when it beats it by more than `margin_se`
// standard errors of that estimate, sqrt(p (1 - p) / n). Why: on a small hold-out (150
// samples of a 1,500-image set) the accuracies of epochs 5 to 30 differ by less than their
// sampling noise, so "the highest" lands on any of them, often one where the network has
// memorised the flipped labels (digits, pairwise 10 %: epoch 21 of 30 at 0.872 against
// epoch 6 at 0.866, one sample apart; consensus F1 0.20). This is the one-standard-error
// rule of model selection (Breiman et al. 1984): the earliest model that a later one does
// not measurably beat. margin_se = 0: every new peak replaces it (the rule before). The first
// epoch always replaces kept_acc < 0 (nothing kept yet).
bool replaces_early_model(double acc, double kept_acc, int64_t samples, double margin_se);

// Whether a run memorised its training labels: the last epoch's training accuracy on them
// exceeds the highest held-out accuracy by more than half of that accuracy's error,
// train_acc - peak > (1 - peak) / 2, AND more than 0.4 of that error was gained after the
// held-out curve last rose measurably (the guarded pick's epoch, whose training accuracy is
// `stall_train_acc`): train_acc - stall_train_acc > 0.4 (1 - peak). A held-out peak of 1
// counts as memorised (nothing to judge by). A negative `stall_train_acc` (not recorded)
// leaves only the first part.
//
// Why the first part: the one-standard-error guard exists to keep the pick out of the
// memorisation phase of a flat held-out curve; a run that never reaches that phase has none
// to avoid, and there the guard only picks an earlier, less trained model, whose noise
// estimate over-counts (Fashion-MNIST 60 k, 12 epochs: share 0.14-0.43, the plain peak better
// by 0.013-0.038 F1; handwritten digits, 30 epochs: share 0.99-1.00, the guard better by up to
// 0.67; docs/detection.md).
//
// Why the second: the first alone cannot tell memorised wrong labels from the ordinary gap of
// a network that fits its labels better than it generalises. Clean Fashion-MNIST passes it
// (train 0.9996 against a held-out peak of 0.897) while its held-out accuracy rises to the
// last epochs: the gap opened while fitting still paid. Memorisation is training accuracy
// bought after the held-out curve stopped paying for it. Measured gain after the stall, in
// units of the held-out error: noisy digits and tables 0.46 to 2.1 (45 cross-entropy runs,
// five kinds of noise at 10-40 %, seeds 1-3), Fashion-MNIST 12 k symmetric and pairwise 20 %
// 0.62-0.63, clean digits 0.47; clean Fashion-MNIST 12 k 0.01 and 60 k 0.31, Fashion-MNIST
// instance 20 % 0.06 (60 k) and 0.25 (12 k), where the gce run that a verdict of "memorised"
// brings ranked worse (docs/detection.md, seventeenth session). 0.4 sits in that gap; a run
// near it may go either way. Its limit: on a small hold-out (the tables: 14-144 samples, one
// standard error 1.4-7 points) the curve stops rising measurably within the first epochs, so
// clean tables still count as memorised (their second, gce run flagged 0.1-1.2 % as the
// cross-entropy did, at twice the pretraining).
bool memorised(double final_train_acc, double peak_acc, double stall_train_acc);

// Where EarlyModelKeeper keeps the held-out peak's model beside its guarded pick `model`
// until finish() (<model stem>.peak.h5).
std::string early_peak_copy(const std::string& model);

// Keeps the early-learning model: `model` (staged) and `info` (one JSON line: epoch,
// holdout_acc, holdout_loss, holdout_samples, holdout_se, margin_se, run_id, and the
// candidates: guarded_epoch / guarded_acc / guarded_train_acc, peak_epoch / peak_acc,
// train_acc) are rewritten whenever an epoch's held-out accuracy replaces the guarded pick
// (replaces_early_model); the plain peak, where it differs, is kept beside it
// (early_peak_copy) until finish() picks one (`pick`: auto, guarded or peak; see memorised). A
// resumed run continues from the candidates its earlier part kept, as `info` recorded them.
class EarlyModelKeeper {
 public:
  EarlyModelKeeper(const Comm& comm, std::string model, std::string info, lineage::Lineage from,
                   std::string config_yaml, std::string run_id, int64_t samples, bool resume,
                   double margin_se, std::string pick);
  // Collective, once per epoch (1-based) with that epoch's held-out loss and accuracy and its
  // training accuracy (on the labels trained on).
  void update(int64_t epoch, double loss, double acc, double train_acc, nn::Model& m);
  // Collective, after the last epoch: makes `model` the pick (moving the peak's copy over it
  // where that is the pick) and records it in `info`.
  void finish();
  // One phrase for the epoch log: the kept model and what a later epoch must beat.
  std::string describe() const;
  // One phrase for the end of the run (after finish): the pick and why, of `epochs`.
  std::string summary(int64_t epochs) const;
  // Whether the run memorised its training labels (after finish; memorised() above).
  bool run_memorised() const;
  // The training loss (pretrain.loss), recorded in `info` for the report's advice.
  void set_loss(std::string loss) { loss_ = std::move(loss); }
  // After finish: the run's verdict ({loss, epochs, memorised, train_acc, peak_acc,
  // peak_epoch, guarded_epoch, guarded_train_acc}), which pretrain.loss auto decides by and
  // records (train/loss_auto.hpp).
  Json verdict(int64_t epochs) const;
  // The verdict of the run this one replaces (pretrain.loss auto's first), recorded in `info`
  // as "first_pass" for the report.
  void set_first_pass(Json verdict) { first_pass_ = std::move(verdict); }

 private:
  // One candidate for the early model: its epoch (0: none yet), held-out figures and that
  // epoch's training accuracy (-1: not recorded, files before the field).
  struct Candidate {
    int64_t epoch = 0;
    double acc = -1, loss = 0, train_acc = -1;
  };
  const Candidate& picked() const { return chose_peak_ ? peak_ : guarded_; }
  void write_info(bool finished) const;

  const Comm& comm_;
  std::string model_, peak_model_, info_, config_yaml_, run_id_;
  lineage::Lineage from_;
  int64_t samples_;
  double margin_se_;
  std::string pick_, loss_;
  Json first_pass_;        // null: none
  Candidate guarded_;      // the one-standard-error pick (replaces_early_model)
  Candidate peak_;         // the plain peak (best held-out accuracy seen)
  double train_acc_ = -1;  // the last epoch's training accuracy
  bool chose_peak_ = false, finished_ = false;
};

// Names of the fold files beside `<stem>.h5` (see above).
std::string fold_model_name(const std::string& stem, int k, bool early);
std::string fold_info_name(const std::string& stem);
// Fold k's files (its metrics, early model and JSON, final model, sidecars), in commit order.
std::vector<std::string> fold_files(const std::string& stem, int k);
// Every fold file name for folds 0..n-1 and the info file, in commit order.
std::vector<std::string> fold_members(const std::string& stem, int n);
// How many folds the files in `dir` hold (highest <stem>_fold<k>.h5 or _early.h5 + 1; 0 when
// none): a run with fewer folds than the committed set must remove the extra ones.
int existing_folds(const std::string& dir, const std::string& stem);
// The fold assignment's seed, derived from the training seed.
uint64_t fold_seed(uint64_t train_seed);

// pretrain's part. Plan and check up front (before any training): the folds, the global
// batch against the smallest fold's complement, each fold's checkpoint directory.
struct FoldPlan {
  int folds = 0;
  uint64_t seed = 0;
  std::vector<int32_t> fold;  // [training rows]
  std::string ckpt_root;      // <checkpoints>/
  // pretrain.early_margin_se and .early_pick: each fold model's early model, as the main one's.
  double early_margin_se = 1;
  std::string early_pick = "auto";
  // Fold k's checkpoints: <ckpt_root>/fold<k>.
  std::string checkpoint_dir(int k) const { return cat(ckpt_root, "/fold", k); }
};
FoldPlan plan_folds(const TrainInput& data, const TrainOptions& opt, int folds,
                    const std::string& ckpt_root, double early_margin_se,
                    const std::string& early_pick);
// Trains fold model k (on the rows outside fold k, its checkpoints in <ckpt_root>/fold<k>),
// writing fold_files(stem, k) where `staged` says, stamped with `run_id`.
void train_fold_model(const Comm& comm, const std::string& config_yaml, const TrainInput& data,
                      const TrainOptions& opt, const FoldPlan& plan, int k,
                      const std::function<std::string(const std::string&)>& staged,
                      const std::string& run_id, const std::string& stem, bool resume,
                      const lineage::Lineage& from);
// Trains the fold models one after the other into `set`'s staging directory, then the record.
void train_fold_models(const Comm& comm, const std::string& config_yaml, const TrainInput& data,
                       const TrainOptions& opt, const FoldPlan& plan, OutputSet& set,
                       const std::string& stem, bool resume, const lineage::Lineage& from);
// The fold record (<stem>_folds.json) of a finished set, from the files `path_of` names.
Json fold_record(const FoldPlan& plan, const std::string& run_id, const std::string& stem,
                 const std::function<std::string(const std::string&)>& path_of);
// The job array's last step (pretrain --fold k, one process per fold): when every fold's
// files of run `run_id` are committed in `dir`, writes the fold record there and returns
// true; until then extract_features sees no record and refuses (load_out_of_fold).
bool complete_fold_record(const FoldPlan& plan, const std::string& dir, const std::string& stem,
                          const std::string& run_id);

// extract_features' part: the fold models beside `model_path` and every training row's fold.
struct OutOfFold {
  int folds = 0;
  std::string choice;                              // early | final
  std::vector<int32_t> fold;                       // [training rows]
  std::vector<std::unique_ptr<nn::Model>> models;  // [folds]
  std::vector<std::string> paths;                  // [folds]
};
// Null when features.fold_models (in `cfg`) is off or no fold set lies beside the model.
// Error when the set is incomplete, of another run than `model_path`, or of another dataset
// than `ds`.
std::optional<OutOfFold> load_out_of_fold(const Config& cfg, const std::string& model_path,
                                          const data::DatasetFile& ds,
                                          const std::string& fingerprint,
                                          const std::string& backend, nn::DType dtype);

}  // namespace sieve::train
