#include "train/reducer.hpp"

#include <algorithm>

namespace sieve::train {

GradReducer::GradReducer(const Comm& comm, float* grads, size_t total,
                         const std::vector<std::pair<size_t, size_t>>& covered,
                         size_t bucket_bytes)
    : comm_(comm), grads_(grads) {
  const size_t per = std::max<size_t>(1024, bucket_bytes / sizeof(float));
  for (size_t b = 0; b < total; b += per) buckets_.push_back({b, std::min(total, b + per)});
  for (auto [off, cnt] : covered)
    for (auto& k : buckets_) {
      const size_t lo = std::max(off, k.begin), hi = std::min(off + cnt, k.end);
      if (hi > lo) k.needed += hi - lo;
    }
}

GradReducer::~GradReducer() {
  for (auto& r : reqs_)
    if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
}

void GradReducer::arm() {
  for (auto& b : buckets_) {
    b.reported = 0;
    b.started = false;
  }
  reqs_.clear();
  armed_ = true;
}

void GradReducer::start(size_t b) {
  Bucket& k = buckets_[b];
  k.started = true;
  if (comm_.size() == 1) return;
  MPI_Request req;
  SIEVE_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, grads_ + k.begin, int(k.end - k.begin), MPI_FLOAT,
                                 MPI_SUM, comm_.raw(), &req));
  reqs_.push_back(req);
}

void GradReducer::ready(size_t offset, size_t count) {
  if (!armed_ || buckets_.empty()) return;
  const size_t end = offset + count;
  // Buckets are equal-sized except the last: find the first overlapping one directly.
  const size_t per = buckets_[0].end - buckets_[0].begin;
  for (size_t b = offset / per; b < buckets_.size() && buckets_[b].begin < end; ++b) {
    Bucket& k = buckets_[b];
    const size_t lo = std::max(offset, k.begin), hi = std::min(end, k.end);
    if (hi <= lo) continue;
    k.reported += hi - lo;
    if (!k.started && k.reported >= k.needed) {
      start(b);
      ++started_early_;
    }
  }
  if (!reqs_.empty()) {
    int flag = 0;
    MPI_Testall(int(reqs_.size()), reqs_.data(), &flag, MPI_STATUSES_IGNORE);
  }
}

void GradReducer::finish() {
  // Unreported buckets start in index order (identical on every rank).
  for (size_t b = buckets_.size(); b-- > 0;)
    if (!buckets_[b].started) start(b);
  if (!reqs_.empty())
    SIEVE_MPI_CHECK(MPI_Waitall(int(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
  reqs_.clear();
  armed_ = false;
}

}  // namespace sieve::train
