// Training dynamics: every training sample's margin at every epoch, from the logits the
// training forward pass already computes (no extra forward).
//
// Why: a network learns the common patterns first and memorises the exceptions later, so a
// mislabelled sample spends most of training with its assigned logit below another class's.
// The margin (assigned logit minus the largest other) averaged over epochs is the area under
// the margin (AUM; Pleiss et al. 2020); its sign changes count forgetting events (Toneva et
// al. 2019). Both need no choice of epoch, which the early-learning model does (its held-out
// peak is noisy on small held-out parts: docs/detection.md).
//
// What is recorded: margin[e][i] for epoch e and training sample i (float32, NaN where the
// sample was not seen that epoch: epochs before a resumed run's checkpoint, or a sample the
// epoch's last partial batch left out). A trained sample's margin comes from the training
// forward pass; a held-out sample's (pretrain.holdout: never trained) from the held-out
// evaluation at the epoch's end, so the held-out 10 % are ranked too (before, they had no
// record and the detector could never flag them). The two are different measurements (the
// model mid-epoch in training mode on a sample it fits, against the model at the epoch's end
// on one it never saw), so /heldout marks which is which and readers compare each group's
// areas within the group (cluster/inputs.hpp). Each rank records the samples it trains or
// evaluates; at each epoch's end the ranks' rows are summed onto rank 0 (a sample is seen by
// exactly one rank per epoch), which keeps the [epochs, N] table: 4 bytes per sample per epoch
// (7 MB for 60,000 samples x 30 epochs). Written as pretrain/dynamics.h5 (docs/formats.md):
// /margin [E, N], /sample_id, /labels, /heldout.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/comm.hpp"
#include "io/lineage.hpp"
#include "train/loader.hpp"

namespace sieve::train {

// Its name beside the model (pretrain's output set).
inline constexpr const char* kDynamicsFile = "dynamics.h5";

class TrainingDynamics {
 public:
  // `split`: the training split (its sample_id and labels; sample data may be absent);
  // `heldout_rows`: its rows held out of training (recorded from their evaluation).
  TrainingDynamics(const SplitData& split, int64_t epochs,
                   const std::vector<int64_t>& heldout_rows = {});

  // One micro-batch (or evaluation batch) of epoch `epoch` (0-based): rows of `data` (whose
  // sample ids are in the split), their logits [rows.size(), k] in that order.
  void record(int64_t epoch, const SplitData& data, const std::vector<int64_t>& rows,
              const float* logits, int k);
  // Collective: sums the epoch's rows onto rank 0 and clears the accumulators.
  void end_epoch(const Comm& comm, int64_t epoch);
  // Rank 0's table [epochs x N], row-major (empty on other ranks).
  const std::vector<float>& margins() const { return table_; }
  int64_t epochs() const { return epochs_; }
  int64_t samples() const { return int64_t(ids_.size()); }
  const std::vector<int64_t>& sample_ids() const { return ids_; }
  const std::vector<int32_t>& labels() const { return labels_; }
  // 1 for a held-out sample (margins from evaluation), 0 for a trained one; split order.
  const std::vector<uint8_t>& heldout() const { return heldout_; }

 private:
  int64_t epochs_;
  std::vector<int64_t> ids_;
  std::vector<int32_t> labels_;
  std::vector<uint8_t> heldout_;
  std::unordered_map<int64_t, int64_t> column_;  // sample id -> column
  std::vector<float> epoch_sum_;                 // [N] this rank's margins this epoch
  std::vector<float> epoch_seen_;                // [N] 1 where recorded
  std::vector<float> table_;                     // rank 0: [epochs, N]
};

// The margin of one row of logits: logits[y] - max_{j != y} logits[j].
float margin_of(const float* logits, int k, int y);

// The file: pretrain/dynamics.h5 (schema::kDynamics), written by write_dynamics on rank 0
// of `comm` (collective: every rank calls it; errors alike on every rank).
void write_dynamics(const Comm& comm, const std::string& path, const TrainingDynamics& d,
                    const std::string& config_yaml, const lineage::Lineage& from);

}  // namespace sieve::train
