// The `parameter-server` strategy: push gradients, update on the owner, pull; synchronous or
// stale-synchronous.
//
// The flat buffer is cut into `servers` contiguous shards at parameter boundaries (so LARS
// sees whole tensors), balanced by size; shard s is owned by rank s*R/S (spread over the
// ranks). Its owner keeps the authoritative weights and momentum of the shard. Per step:
//   push   each piece (~bucket_bytes, never crossing a shard edge) goes to its owner with
//          MPI_Ireduce(SUM) as soon as backward has made it final (overlapped, like buckets);
//   update the owner runs SGD on its shard only (SgdOptimizer::step_range: bitwise the
//          update the all-reduce strategies make, given the same summed gradient);
//   pull   every piece is broadcast from its owner (MPI_Ibcast), so every worker computes
//          the next step on the new weights. Timed as update_comm_s: exposed, not overlapped.
// With the same data it gives the weights `buckets` gives up to float summation order
// (reduce and allreduce may add the ranks in different orders): tests/mpi/test_train_comm.
//
// Why servers are co-located on worker ranks instead of dedicated ranks: the trainer's
// data-parallel communicator is the world (the sampler's rank split, BN broadcasts, the
// per-step statistics, evaluation), so dedicated servers would need a worker communicator
// threaded through all of them; and on a small machine a dedicated server would idle a
// core. The price: the owner's optimizer work sits on the critical path between push and
// pull, as in any synchronous PS. Non-owners' momentum of foreign shards is stale; before a
// checkpoint collect_optimizer_state() broadcasts every shard's momentum from its owner.
//
// Failure: a dead server rank ends the job through the MPI runtime (mpirun kills the
// remaining ranks when one dies; tests/fault/ps_server_killed.sh), nothing waits forever.
//
// Stale-synchronous mode (comm.mode async, comm.max_staleness k >= 1; Ho et al. 2013's SSP
// with every worker at the same clock): step t's push is copied into one of k+2 round
// buffers and left in flight; the update of round t-k is applied at the end of step t. So the
// weights a worker computes step t+1 on hold every update up to round t-k (at most k
// missing), the push of a round overlaps the next k steps of compute, and only the pull stays
// exposed. k = 0 is the synchronous mode. Workers still take their steps together: the
// trainer's per-step statistics allreduce synchronises them, so staleness here buys overlap,
// not freedom from stragglers (a worker-driven PS with one-sided or probe-driven messages
// would be needed for that). drain() applies every round still in flight: the trainer calls
// it at the end of each epoch and before each checkpoint, so evaluation and checkpoints see
// every gradient, and a resumed run continues exactly. CPU (unstaged) path only.
//
// Compensation (comm.stale_compensation): a stale gradient is computed on weights that miss
// k updates, and by the time it is applied k more have landed, so it answers for a point the
// weights have left; with momentum 0.9 that cost the quickstart 2.5-5 points at k = 1
// (docs/communication.md). With compensation the owner keeps the true weights of its shards
// (master_), applies every update to them, and sends the workers a prediction of where the
// weights will be when the gradient they compute next lands:
//   momentum        the momentum alone moves them: w - lr*v*sum_{i=1..k} mu^i (mu^{i+1} with
//                   Nesterov), the future-position estimate of DANA (Hakimi et al. 2019);
//   local-gradient  the k rounds still in flight are replayed on a copy of the shard and its
//                   velocity with the owner's OWN gradient of each round scaled to the global
//                   batch (x ranks) in place of the sum that has not arrived: in the noiseless
//                   limit exactly the synchronous trajectory; the error left is the gradient
//                   noise of one rank's part of the batch, and it does not accumulate (the
//                   true sums replace the estimates as they land).
// drain() puts the true weights back on every rank, so evaluation and checkpoints see them and
// resume stays exact.
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "train/grad_sync.hpp"

namespace sieve::train {

class ParamServer final : public GradSync {
 public:
  // max_staleness 0: synchronous; k >= 1: stale-synchronous with bound k.
  enum class Compensation { None, Momentum, LocalGradient };
  // compensation: what the workers compute on in stale-synchronous mode (see above).
  ParamServer(const Comm& comm, float* grads, size_t total,
              const std::vector<std::pair<size_t, size_t>>& covered, int servers,
              size_t piece_bytes, int max_staleness = 0,
              Compensation compensation = Compensation::None);
  const char* name() const override { return "parameter-server"; }
  void arm() override;
  void ready(size_t offset, size_t count) override;
  void finish() override;
  void update(SgdOptimizer& opt, float* params, float* grads, double lr) override;
  void collect_optimizer_state(SgdOptimizer& opt) override;
  void drain() override;
  int max_staleness() const { return staleness_; }
  size_t num_buckets() const override { return pieces_.size(); }
  // Shard s: [shard_begin(s), shard_begin(s+1)), owned by rank owner(s).
  int num_shards() const { return int(shard_cuts_.size()) - 1; }
  size_t shard_begin(int s) const { return shard_cuts_[size_t(s)]; }
  int owner(int s) const { return s * comm_.size() / num_shards(); }

 private:
  void push(size_t piece);
  // Owners apply SGD to their shards with `summed`; with `publish`, they then predict the
  // weights the next gradient will land on (compensation) and every rank pulls them. drain()
  // applies its rounds unpublished and pulls the true weights once at the end.
  void apply(const float* summed, bool publish = true);
  // Stale-synchronous: waits for the oldest round's pushes and applies it.
  void apply_oldest(bool publish = true);
  // Broadcasts every piece from its owner into params_ (the pull).
  void pull();
  // The factor of lr*v in the momentum prediction: sum_{i=1..k} mu^i (Nesterov: mu^{i+1}).
  float momentum_factor() const;
  // local-gradient: params_[b,e) = master_ advanced by every round in flight, each estimated
  // by this rank's own push x ranks, on a copy of the velocity.
  void replay_in_flight(size_t b, size_t e);
  struct Round {
    size_t slot;
    std::unique_ptr<InFlight> pushes;
  };
  const Comm& comm_;
  float* grads_;
  int staleness_ = 0;
  Compensation compensation_ = Compensation::None;
  std::vector<std::vector<float>> own_grads_;  // local-gradient: this rank's push per slot
  std::unique_ptr<SgdOptimizer> replay_;       // local-gradient: replays on a velocity copy
  std::vector<float> estimate_;                // local-gradient: the estimated round
  std::vector<float> master_;                  // compensation: true weights of the owned shards
  bool master_live_ = false;               // master_ holds them (params_ holds the predicted point)
  std::vector<std::vector<float>> slots_;  // stale-synchronous round buffers
  size_t next_slot_ = 0;
  float* push_buf_;                    // this step's pushes read (and, on the owner, sum into) here
  std::unique_ptr<InFlight> current_;  // this round's pushes (stale-synchronous)
  std::deque<Round> pending_;
  SgdOptimizer* opt_ = nullptr;  // of the last update(), for drain()
  float* params_ = nullptr;
  double lr_ = 0;
  std::vector<size_t> shard_cuts_;
  PieceTracker pieces_;
  std::vector<int> piece_owner_;
  std::vector<char> pushed_;
  InFlight inflight_;
  bool armed_ = false;
};

}  // namespace sieve::train
