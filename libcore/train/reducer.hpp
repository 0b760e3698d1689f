// The `buckets` strategy (DDP-style): data-parallel gradient reduction in buckets that start
// while backward still runs.
//
// The flat gradient buffer is cut into contiguous buckets of ~bucket_bytes. The model's
// grad-ready hook reports (offset, count) ranges as their gradients become final (last
// layer first); when every element of a bucket has been reported, its in-place
// MPI_Iallreduce(SUM) starts at once, from the calling (main) thread, so the program stays
// MPI_THREAD_FUNNELED. Each hook call also polls (MPI_Testsome) so that started reductions
// progress while backward computes. finish() starts whatever was not reported (e.g. a rank
// that had no samples this step) and waits for all. Buckets start in the same order on
// every rank because backward is deterministic, which collectives require.
//
// Scaling: the trainer scales dlogits so that local gradients are already
// sum_i dloss_i / global_batch; the SUM over ranks is then the global-batch mean.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

#include "train/grad_sync.hpp"

namespace sieve::train {

class GradReducer final : public GradSync {
 public:
  // `covered`: see make_grad_sync. A bucket starts when all of its covered elements are
  // reported.
  GradReducer(const Comm& comm, float* grads, size_t total,
              const std::vector<std::pair<size_t, size_t>>& covered,
              size_t bucket_bytes = 4u << 20);
  const char* name() const override { return "buckets"; }
  void arm() override;
  void ready(size_t offset, size_t count) override;
  void finish() override;
  size_t num_buckets() const override { return pieces_.size(); }
  int64_t started_early() const { return stats_.started_early; }  // buckets started by hooks

 private:
  void start(size_t b);
  const Comm& comm_;
  float* grads_;
  PieceTracker pieces_;
  std::vector<char> started_;
  InFlight inflight_;
  bool armed_ = false;
};

}  // namespace sieve::train
