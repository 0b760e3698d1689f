// How data-parallel ranks combine their gradients: one interface, three strategies
// (`<section>.comm.strategy`), so that the trainer, the tests and the benchmarks compare them
// on the same steps.
//
//   buckets           DDP-style (reducer.hpp): static ~bucket_mb buckets in reverse layer
//                     order, each MPI_Iallreduce started by the grad-ready hook as soon as its
//                     last gradient is final, overlapping the rest of backward.
//   fusion-queue      Horovod-style (fusion_queue.hpp): tensors enter a queue when ready;
//                     every cycle_ms the ranks agree (a real bitmask allreduce, timed) which
//                     tensors are ready on ALL ranks, fuse those into buffers of up to
//                     fusion_mb and all-reduce each buffer.
//   parameter-server  (param_server.hpp): server ranks own contiguous parameter shards and
//                     their optimizer state; workers push gradients to the owner (reduce),
//                     the owner applies SGD to its shard, workers pull the new weights
//                     (broadcast). Servers are co-located on worker ranks (see there why).
//
// Protocol, per optimizer step, on every rank alike:
//   arm()            at the start of the step's last backward (earlier hooks are ignored);
//   ready(off, n)    the model's grad-ready hook: grads[off, off+n) is final;
//   finish()         everything still unreduced goes out; returns when the gradients the
//                    update needs are in place (all-reduce strategies: the global sum on
//                    every rank; parameter server: each shard's sum on its owner);
//   update(...)      the optimizer step: all-reduce strategies run SGD on every rank;
//                    the parameter server runs it on the owners and broadcasts the shards.
// On devices other than the CPU the trainer stages gradients through host copies and does
// not install the hook: arm() then finish() alone must (and do) give the same result.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "comm/in_flight.hpp"
#include "comm/pieces.hpp"
#include "train/optimizer.hpp"

namespace sieve::train {

// `<section>.comm.*` (add_trainer_keys, train/options.cpp).
struct CommOptions {
  std::string strategy = "buckets";  // buckets | fusion-queue | parameter-server
  double bucket_mb = 4.0;            // buckets; also the parameter server's push/pull pieces
  double cycle_ms = 1.0;             // fusion-queue: time between agreement rounds
  double fusion_mb = 64.0;           // fusion-queue: largest fused buffer
  int servers = 1;                   // parameter-server: ranks owning a shard (<= ranks)
  std::string mode = "sync";         // parameter-server: sync | async (stale-synchronous)
  int max_staleness = 1;             // parameter-server async: updates a worker may miss
  // parameter-server async: local-gradient | momentum | none (train/param_server.hpp)
  std::string stale_compensation = "local-gradient";
};
void check_comm_options(const CommOptions& o, const std::string& prefix);

// What a strategy did, summed over the steps so far on this rank (the benchmark and the
// report read it; the trace has the per-step spans).
struct SyncStats {
  int64_t steps = 0;
  int64_t messages = 0;           // reductions started (buckets, fused buffers, PS pieces)
  int64_t started_early = 0;      // of those, started by a hook while backward ran
  double bytes = 0;               // payload reduced (per rank)
  double finish_wait_s = 0;       // blocked in finish(): exposed communication
  double update_comm_s = 0;       // parameter server: pulling the weights after the update
  int64_t negotiations = 0;       // fusion-queue agreement rounds
  double negotiation_wait_s = 0;  // fusion-queue: blocked waiting for agreement rounds
  double pack_s = 0;              // fusion-queue: copying into / out of fusion buffers
};

class GradSync {
 public:
  virtual ~GradSync() = default;
  virtual const char* name() const = 0;
  virtual void arm() = 0;
  virtual void ready(size_t offset, size_t count) = 0;
  virtual void finish() = 0;
  // The optimizer step on `params` with the gradients finish() left in `grads`.
  virtual void update(SgdOptimizer& opt, float* params, float* grads, double lr) {
    opt.step(params, grads, lr);
  }
  // Before a checkpoint: make the optimizer state that rank 0 writes complete (the
  // parameter server keeps each shard's momentum on its owner only).
  virtual void collect_optimizer_state(SgdOptimizer&) {}
  // Apply every update still in flight (stale-synchronous parameter server; others: nothing).
  virtual void drain() {}
  // Reductions this strategy cuts the buffer into (buckets, PS pieces; fusion-queue: 0,
  // decided per step).
  virtual size_t num_buckets() const { return 0; }
  const SyncStats& stats() const { return stats_; }

 protected:
  SyncStats stats_;
};

// The buckets strategy's plan, shared by the host reducer (reducer.hpp) and a device's own
// (train/param_home.cpp): comm.bucket_mb in bytes (at least 1), and [0, total) cut every
// bucket_bytes / 4 elements, at least 1024.
size_t bucket_bytes(const CommOptions& o);
std::vector<size_t> bucket_cuts(size_t total, size_t bucket_bytes);

// `covered`: the (offset, count) ranges the hook will report (the parameter slices; the
// alignment padding between them is never reported), ascending by offset.
std::unique_ptr<GradSync> make_grad_sync(const CommOptions& o, const Comm& comm, float* grads,
                                         size_t total,
                                         const std::vector<std::pair<size_t, size_t>>& covered);

}  // namespace sieve::train
