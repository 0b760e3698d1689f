#include "train/param_server.hpp"

#include <algorithm>
#include <chrono>

#include "util/trace.hpp"

namespace sieve::train {
namespace {

// Shard edges at tensor starts, balanced by size: shard s ends at the first tensor start
// at or beyond (s+1)*total/S. Padding after a tensor stays with the shard before it.
std::vector<size_t> shard_cuts(size_t total, const std::vector<std::pair<size_t, size_t>>& covered,
                               int shards) {
  std::vector<size_t> cuts{0};
  size_t t = 0;
  for (int s = 1; s < shards; ++s) {
    const size_t target = size_t(double(total) * s / shards);
    while (t < covered.size() && covered[t].first < target) ++t;
    const size_t cut = t < covered.size() ? covered[t].first : total;
    if (cut > cuts.back() && cut < total) cuts.push_back(cut);
  }
  cuts.push_back(total);
  return cuts;
}

// Pieces of at most `per` elements that never cross a shard edge.
std::vector<size_t> piece_cuts(const std::vector<size_t>& shards, size_t per) {
  std::vector<size_t> cuts;
  for (size_t s = 0; s + 1 < shards.size(); ++s)
    for (size_t b = shards[s]; b < shards[s + 1]; b += per) cuts.push_back(b);
  cuts.push_back(shards.back());
  if (cuts.size() == 1) cuts.push_back(shards.back());
  return cuts;
}

}  // namespace

ParamServer::ParamServer(const Comm& comm, float* grads, size_t total,
                         const std::vector<std::pair<size_t, size_t>>& covered, int servers,
                         size_t piece_bytes)
    : comm_(comm),
      grads_(grads),
      shard_cuts_(shard_cuts(total, covered, std::clamp(servers, 1, comm.size()))),
      pieces_(piece_cuts(shard_cuts_, std::max<size_t>(1024, piece_bytes / sizeof(float))),
              covered) {
  for (size_t p = 0; p < pieces_.size(); ++p) {
    const auto it = std::upper_bound(shard_cuts_.begin(), shard_cuts_.end(), pieces_.begin(p));
    piece_owner_.push_back(owner(int(it - shard_cuts_.begin()) - 1));
  }
  pushed_.assign(pieces_.size(), 0);
}

void ParamServer::arm() {
  pieces_.reset();
  std::fill(pushed_.begin(), pushed_.end(), 0);
  armed_ = true;
  ++stats_.steps;
}

void ParamServer::push(size_t p) {
  pushed_[p] = 1;
  if (comm_.size() == 1) return;
  const size_t n = pieces_.end(p) - pieces_.begin(p);
  float* g = grads_ + pieces_.begin(p);
  const int root = piece_owner_[p];
  MPI_Request req;
  // The owner sums in place; the other ranks only send (their buffer keeps the local part).
  SIEVE_MPI_CHECK(MPI_Ireduce(comm_.rank() == root ? MPI_IN_PLACE : g,
                              comm_.rank() == root ? g : nullptr, int(n), MPI_FLOAT, MPI_SUM,
                              root, comm_.raw(), &req));
  inflight_.add(req, cat("push ", p, " -> rank ", root), double(n * sizeof(float)));
  ++stats_.messages;
  stats_.bytes += double(n * sizeof(float));
}

void ParamServer::ready(size_t offset, size_t count) {
  if (!armed_) return;
  pieces_.report(offset, count, [&](size_t p) {
    push(p);
    ++stats_.started_early;
  });
  inflight_.poll();
}

void ParamServer::finish() {
  for (size_t p = pieces_.size(); p-- > 0;)
    if (!pushed_[p]) push(p);
  const double t0 = trace::now_us();
  stats_.finish_wait_s += inflight_.wait_all();
  trace::complete("wait for pushes", "wait", t0, trace::now_us());
  armed_ = false;
}

void ParamServer::update(SgdOptimizer& opt, float* params, float* grads, double lr) {
  {
    trace::Span span("optimizer", "server update (own shards)");
    for (int s = 0; s < num_shards(); ++s)
      if (owner(s) == comm_.rank())
        opt.step_range(params, grads, lr, shard_begin(s), shard_begin(s + 1));
  }
  if (comm_.size() == 1) return;
  const auto t = std::chrono::steady_clock::now();
  const double t0 = trace::now_us();
  for (size_t p = 0; p < pieces_.size(); ++p) {
    const size_t n = pieces_.end(p) - pieces_.begin(p);
    MPI_Request req;
    SIEVE_MPI_CHECK(MPI_Ibcast(params + pieces_.begin(p), int(n), MPI_FLOAT, piece_owner_[p],
                               comm_.raw(), &req));
    inflight_.add(req, cat("pull ", p, " <- rank ", piece_owner_[p]), double(n * sizeof(float)));
  }
  inflight_.wait_all();
  trace::complete("wait for pulls", "wait", t0, trace::now_us());
  stats_.update_comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void ParamServer::collect_optimizer_state(SgdOptimizer& opt) {
  float* v = opt.momentum().data();
  for (size_t p = 0; p < pieces_.size(); ++p)
    comm_.bcast(v + pieces_.begin(p), pieces_.end(p) - pieces_.begin(p), piece_owner_[p]);
}

}  // namespace sieve::train
