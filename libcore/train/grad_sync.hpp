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

// `covered`: the (offset, count) ranges the hook will report (the parameter slices; the
// alignment padding between them is never reported), ascending by offset.
std::unique_ptr<GradSync> make_grad_sync(const CommOptions& o, const Comm& comm, float* grads,
                                         size_t total,
                                         const std::vector<std::pair<size_t, size_t>>& covered);

// Readiness bookkeeping shared by the strategies that cut the buffer into fixed pieces
// (buckets, parameter-server pieces): a piece is complete when every covered element in it
// has been reported.
class PieceTracker {
 public:
  // Pieces [cuts[i], cuts[i+1]); cuts ascending, first 0, last total.
  PieceTracker(const std::vector<size_t>& cuts,
               const std::vector<std::pair<size_t, size_t>>& covered);
  void reset();
  // Count [offset, offset+count) as reported; calls on_complete(piece) for each piece that
  // this completes.
  template <typename Fn>
  void report(size_t offset, size_t count, Fn&& on_complete);
  size_t size() const { return pieces_.size(); }
  size_t begin(size_t i) const { return pieces_[i].begin; }
  size_t end(size_t i) const { return pieces_[i].end; }
  bool complete(size_t i) const { return pieces_[i].reported >= pieces_[i].needed; }

 private:
  struct Piece {
    size_t begin, end, needed = 0, reported = 0;
  };
  std::vector<Piece> pieces_;
};

template <typename Fn>
void PieceTracker::report(size_t offset, size_t count, Fn&& on_complete) {
  const size_t end = offset + count;
  // First piece whose end lies beyond offset (pieces are sorted and contiguous).
  size_t lo = 0, hi = pieces_.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (pieces_[mid].end <= offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t p = lo; p < pieces_.size() && pieces_[p].begin < end; ++p) {
    Piece& k = pieces_[p];
    const size_t a = std::max(offset, k.begin), b = std::min(end, k.end);
    if (b <= a) continue;
    const bool was = k.reported >= k.needed;
    k.reported += b - a;
    if (!was && k.reported >= k.needed) on_complete(p);
  }
}

// Cuts [0, total) every `per` elements (the last piece may be shorter).
std::vector<size_t> even_cuts(size_t total, size_t per);

}  // namespace sieve::train
