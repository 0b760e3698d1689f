// The `parameter-server` strategy, synchronous: push gradients, update on the owner, pull.
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
// Asynchronous mode (stale-synchronous, comm.max_staleness) is not built yet.
#pragma once
#include <mpi.h>

#include <vector>

#include "train/grad_sync.hpp"

namespace sieve::train {

class ParamServer final : public GradSync {
 public:
  ParamServer(const Comm& comm, float* grads, size_t total,
              const std::vector<std::pair<size_t, size_t>>& covered, int servers,
              size_t piece_bytes);
  const char* name() const override { return "parameter-server"; }
  void arm() override;
  void ready(size_t offset, size_t count) override;
  void finish() override;
  void update(SgdOptimizer& opt, float* params, float* grads, double lr) override;
  void collect_optimizer_state(SgdOptimizer& opt) override;
  size_t num_buckets() const override { return pieces_.size(); }
  // Shard s: [shard_begin(s), shard_begin(s+1)), owned by rank owner(s).
  int num_shards() const { return int(shard_cuts_.size()) - 1; }
  size_t shard_begin(int s) const { return shard_cuts_[size_t(s)]; }
  int owner(int s) const { return s * comm_.size() / num_shards(); }

 private:
  void push(size_t piece);
  const Comm& comm_;
  float* grads_;
  std::vector<size_t> shard_cuts_;
  PieceTracker pieces_;
  std::vector<int> piece_owner_;
  std::vector<char> pushed_;
  InFlight inflight_;
  bool armed_ = false;
};

}  // namespace sieve::train
