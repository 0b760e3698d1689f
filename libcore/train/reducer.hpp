// Data-parallel gradient reduction in buckets that start while backward still runs.
//
// The flat gradient buffer is cut into contiguous buckets of ~bucket_bytes. The model's
// grad-ready hook reports (offset, count) ranges as their gradients become final (last
// layer first); when every element of a bucket has been reported, its in-place
// MPI_Iallreduce(SUM) starts at once, from the calling (main) thread, so the program stays
// MPI_THREAD_FUNNELED. Each hook call also pokes MPI_Testall so that started reductions
// progress while backward computes. finish() starts whatever was not reported (e.g. a rank
// that had no samples this step) and waits for all. Buckets start in the same order on
// every rank because backward is deterministic, which collectives require.
//
// Scaling: the trainer scales dlogits so that local gradients are already
// sum_i dloss_i / global_batch; the SUM over ranks is then the global-batch mean.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "comm/comm.hpp"

namespace sieve::train {

class GradReducer {
 public:
  // `covered`: the (offset, count) ranges the hook will report (the parameter slices; the
  // alignment padding between them is never reported). A bucket starts when all of its
  // covered elements are reported.
  GradReducer(const Comm& comm, float* grads, size_t total,
              const std::vector<std::pair<size_t, size_t>>& covered,
              size_t bucket_bytes = 4u << 20);
  ~GradReducer();
  // Start of a step's final backward: reset bookkeeping (hooks before arm() are ignored).
  void arm();
  // The grad-ready hook.
  void ready(size_t offset, size_t count);
  // Start remaining buckets and wait for every reduction.
  void finish();
  size_t num_buckets() const { return buckets_.size(); }
  int64_t started_early() const { return started_early_; }  // buckets started by hooks

 private:
  struct Bucket {
    size_t begin, end;
    size_t needed = 0;  // covered elements inside [begin, end)
    size_t reported = 0;
    bool started = false;
  };
  void start(size_t b);
  const Comm& comm_;
  float* grads_;
  std::vector<Bucket> buckets_;
  std::vector<MPI_Request> reqs_;
  bool armed_ = false;
  int64_t started_early_ = 0;
};

}  // namespace sieve::train
