#include "train/reducer.hpp"

#include <algorithm>

#include "util/trace.hpp"

namespace sieve::train {

GradReducer::GradReducer(const Comm& comm, float* grads, size_t total,
                         const std::vector<std::pair<size_t, size_t>>& covered, size_t bucket_bytes)
    : comm_(comm),
      grads_(grads),
      pieces_(bucket_cuts(total, bucket_bytes), covered),
      started_(pieces_.size(), 0) {}

void GradReducer::arm() {
  pieces_.reset();
  std::fill(started_.begin(), started_.end(), 0);
  armed_ = true;
  ++stats_.steps;
}

void GradReducer::start(size_t b) {
  started_[b] = 1;
  if (comm_.size() == 1) return;
  const size_t n = pieces_.end(b) - pieces_.begin(b);
  inflight_.add(comm_.iallreduce_sum(grads_ + pieces_.begin(b), n), cat("bucket ", b),
                double(n * sizeof(float)));
  ++stats_.messages;
  stats_.bytes += double(n * sizeof(float));
}

void GradReducer::ready(size_t offset, size_t count) {
  if (!armed_) return;
  pieces_.report(offset, count, [&](size_t b) {
    start(b);
    ++stats_.started_early;
  });
  inflight_.poll();
}

void GradReducer::finish() {
  // Unreported buckets start from the last one down (the same order on every rank).
  for (size_t b = pieces_.size(); b-- > 0;)
    if (!started_[b]) start(b);
  const double t0 = trace::now_us();
  const double waited = inflight_.wait_all();
  trace::complete("wait for buckets", "wait", t0, trace::now_us());
  stats_.finish_wait_s += waited;
  armed_ = false;
}

}  // namespace sieve::train
