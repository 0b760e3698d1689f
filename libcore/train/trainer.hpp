// The data-parallel training loop shared by pretrain and train_scaled.
//
// Per optimizer step (global batch B = min(global_batch, active samples)):
//   1. every rank takes its contiguous part of the step's global batch (Sampler), split into
//      micro-batches of at most micro_batch samples (gradient accumulation);
//   2. BN buffers are broadcast from rank 0 (as DDP's broadcast_buffers), BN batch
//      statistics stay per rank and per micro-batch;
//   3. forward/backward per micro-batch with dlogits scaled by n_micro/B, so the local
//      gradient is sum_i dloss_i / B; during the last micro-batch's backward the
//      GradReducer starts bucket all-reduces (SUM) as gradients become final;
//   4. one small all-reduce of {loss, correct, non-finite flag, stop flag}: NaN/Inf stops
//      the run (Error naming the step; no checkpoint is written from bad weights), a
//      SIGUSR1/SIGTERM seen on any rank makes all ranks checkpoint and stop together;
//   5. SGD/LARS update at lr = schedule(step), identical on every rank.
// Every draw is a function of (seed, epoch, step, sample id), so a run resumed from a
// checkpoint continues bitwise like an uninterrupted one (same rank count, CPU).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "io/metrics.hpp"
#include "nn/model.hpp"
#include "train/checkpoint.hpp"
#include "train/grad_sync.hpp"
#include "train/loader.hpp"
#include "train/optimizer.hpp"
#include "train/options.hpp"
#include "train/stream.hpp"

namespace sieve::train {

class ParamHome;

struct TrainResult {
  double final_test_acc = -1, best_test_acc = -1, final_test_loss = -1;
  int64_t best_epoch = -1;
  double time_to_best_s = -1;
  double final_train_acc = 0, final_train_loss = 0;
  double images_per_s = 0, images_per_s_per_rank = 0, elapsed_s = 0;
  int64_t steps = 0, samples_used = 0, batch = 0, per_rank_batch = 0, accum_steps = 1;
  double peak_lr = 0;
  std::string precision;  // the activation dtype it trained in ("fp32", "bf16")
};

// Thrown on every rank alike when the loss or the gradient sum is non-finite (message
// "divergence at step S ..."). A CollectiveError, so pretrain fails with it as before;
// train_scaled catches it to record the divergence in result.json. `partial`: what was
// known at that step (batch, samples, the last evaluation if one ran, else -1).
struct Diverged : CollectiveError {
  Diverged(const std::string& what, int64_t step, int64_t epoch, TrainResult partial)
      : CollectiveError(what), step(step), epoch(epoch), partial(partial) {}
  int64_t step, epoch;
  TrainResult partial;
};

// Thrown when a stop signal was handled: the checkpoint is written on every rank.
struct StopRequested {
  std::string checkpoint;
};
// Exit code of a run stopped by SIGUSR1/SIGTERM after checkpointing (resume with --resume).
inline constexpr int kExitRequeue = 75;
// Finalize MPI and exit with kExitRequeue (called by the tools on StopRequested).
[[noreturn]] void exit_for_requeue(const Comm& comm, const std::string& checkpoint);

class Trainer {
 public:
  // `source`: where this rank's training samples come from, step by step (the split in
  // memory, or streamed: train/stream.hpp); `shape`: the training split's geometry (its
  // sample data may be absent); `test` may be empty. ckpt_dir must exist (created by the tool).
  Trainer(const Comm& comm, TrainOptions opt, std::unique_ptr<SampleSource> source,
          const SplitData& shape, EvalSplit test, const DatasetMeta& meta, std::string ckpt_dir,
          std::string metrics_path, std::string config_yaml);
  ~Trainer();
  // Trains to the end (or throws StopRequested / Error). resume: continue from the
  // newest complete checkpoint in ckpt_dir if there is one.
  TrainResult run(bool resume);
  nn::Model& model() { return *model_; }
  // The gradient communication strategy of the last run() (null before), for its stats.
  const GradSync* grad_sync() const { return sync_.get(); }
  // Called on the rank that evaluates them with each evaluation batch's logits: (the block of
  // the split, the batch's rows of it, their logits [rows, classes]). pretrain records the
  // held-out samples' margins with it (train/dynamics.hpp).
  using EvalHook = std::function<void(const SplitData& data, const std::vector<int64_t>& rows,
                                      const float* logits, int classes)>;
  // Mean loss and accuracy of the current model over a split (eval mode, all ranks), or
  // over the listed rows of it when `rows` is given; `on_logits`, if set, sees every batch.
  std::pair<double, double> evaluate(const EvalSplit& d, const std::vector<int64_t>* rows = nullptr,
                                     const EvalHook& on_logits = {});
  // Called on every rank at the end of each epoch, after the test evaluation and before
  // the epoch's metrics line and checkpoint are written: (epoch 1-based, metrics record).
  // pretrain uses it to evaluate its held-out part and keep the early-learning model.
  using EpochHook = std::function<void(int64_t epoch, Json& record)>;
  void set_epoch_hook(EpochHook hook) { epoch_hook_ = std::move(hook); }
  // Called on every rank after each training micro-batch's forward pass: (epoch 0-based, the
  // rows of `data` in the batch, their logits [rows, classes]). pretrain records the
  // training dynamics with it (train/dynamics.hpp).
  using BatchHook =
      std::function<void(int64_t epoch, const SplitData& data, const std::vector<int64_t>& rows,
                         const float* logits, int classes)>;
  void set_batch_hook(BatchHook hook) { batch_hook_ = std::move(hook); }

 private:
  class Loop;                // the state and phases of one run() (trainer.cpp)
  void broadcast_state();    // parameters and BN buffers from rank 0
  void broadcast_buffers();  // BN buffers from rank 0, before anything reads them
  void checkpoint(const TrainState& st);
  void build_model();  // model_ and opt_ from o_.spec, initial weights of o_.seed
  void settle_precision(bool resume);

  const Comm& comm_;
  TrainOptions o_;
  std::unique_ptr<SampleSource> source_;
  EvalSplit test_;
  const DatasetMeta& meta_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<SgdOptimizer> opt_;
  std::unique_ptr<ParamHome> home_;  // of the last run() (param_home.hpp)
  std::unique_ptr<GradSync> sync_;
  std::string ckpt_dir_, metrics_path_, config_yaml_;
  EpochHook epoch_hook_;
  BatchHook batch_hook_;
};

// The signal flag (set by the SIGUSR1/SIGTERM handler that Trainer::run installs).
bool stop_signal_seen();
void install_stop_handlers();

}  // namespace sieve::train
