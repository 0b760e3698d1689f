#include "train/param_server.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

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
                         size_t piece_bytes, int max_staleness, Compensation compensation)
    : comm_(comm),
      grads_(grads),
      staleness_(comm.size() > 1 ? std::max(0, max_staleness) : 0),
      compensation_(staleness_ > 0 ? compensation : Compensation::None),
      shard_cuts_(shard_cuts(total, covered, std::clamp(servers, 1, comm.size()))),
      pieces_(piece_cuts(shard_cuts_, std::max<size_t>(1024, piece_bytes / sizeof(float))),
              covered) {
  for (size_t p = 0; p < pieces_.size(); ++p) {
    const auto it = std::upper_bound(shard_cuts_.begin(), shard_cuts_.end(), pieces_.begin(p));
    piece_owner_.push_back(owner(int(it - shard_cuts_.begin()) - 1));
  }
  pushed_.assign(pieces_.size(), 0);
  if (staleness_ > 0) slots_.assign(size_t(staleness_) + 2, std::vector<float>(total, 0.0f));
  if (compensation_ != Compensation::None) master_.assign(total, 0.0f);
  if (compensation_ == Compensation::LocalGradient)
    own_grads_.assign(slots_.size(), std::vector<float>(total, 0.0f));
  push_buf_ = grads_;
}

void ParamServer::arm() {
  pieces_.reset();
  std::fill(pushed_.begin(), pushed_.end(), 0);
  armed_ = true;
  ++stats_.steps;
  if (staleness_ > 0) {
    // This round's pushes read from (and, on the owners, sum into) a buffer of their own:
    // the gradients are zeroed by the next step while the pushes are still in flight.
    push_buf_ = slots_[next_slot_].data();
    current_ = std::make_unique<InFlight>();
  }
}

void ParamServer::push(size_t p) {
  pushed_[p] = 1;
  if (comm_.size() == 1) return;
  const size_t n = pieces_.end(p) - pieces_.begin(p);
  float* g = push_buf_ + pieces_.begin(p);
  if (push_buf_ != grads_) std::memcpy(g, grads_ + pieces_.begin(p), n * sizeof(float));
  const int root = piece_owner_[p];
  // The owner's reduce sums into g in place: its own part is kept apart for the replay.
  if (!own_grads_.empty() && root == comm_.rank())
    std::memcpy(own_grads_[next_slot_].data() + pieces_.begin(p), grads_ + pieces_.begin(p),
                n * sizeof(float));
  // The owner sums in place; the other ranks only send (their buffer keeps the local part).
  (current_ ? *current_ : inflight_)
      .add(comm_.ireduce_sum(g, n, root), cat("push ", p, " -> rank ", root),
           double(n * sizeof(float)));
  ++stats_.messages;
  stats_.bytes += double(n * sizeof(float));
}

void ParamServer::ready(size_t offset, size_t count) {
  if (!armed_) return;
  pieces_.report(offset, count, [&](size_t p) {
    push(p);
    ++stats_.started_early;
  });
  (current_ ? *current_ : inflight_).poll();
  for (auto& r : pending_) r.pushes->poll();  // older rounds progress too
}

void ParamServer::finish() {
  for (size_t p = pieces_.size(); p-- > 0;)
    if (!pushed_[p]) push(p);
  armed_ = false;
  if (staleness_ > 0) {  // left in flight: applied k steps later (update) or by drain()
    pending_.push_back({next_slot_, std::move(current_)});
    next_slot_ = (next_slot_ + 1) % slots_.size();
    return;
  }
  const double t0 = trace::now_us();
  stats_.finish_wait_s += inflight_.wait_all();
  trace::complete("wait for pushes", "wait", t0, trace::now_us());
}

float ParamServer::momentum_factor() const {
  const auto& o = opt_->options();
  const float mu = float(o.momentum);
  float f = 0, p = o.nesterov ? mu : 1.0f;
  for (int i = 0; i < staleness_; ++i) f += (p *= mu);
  return f;
}

void ParamServer::apply(const float* summed, bool publish) {
  {
    trace::Span span("optimizer", "server update (own shards)");
    for (int s = 0; s < num_shards(); ++s) {
      if (owner(s) != comm_.rank()) continue;
      const size_t b = shard_begin(s), e = shard_begin(s + 1);
      if (compensation_ == Compensation::None) {
        opt_->step_range(params_, summed, lr_, b, e);
        continue;
      }
      // params_ holds the predicted point once master_ is live; the first update after a
      // drain starts from the true weights, which params_ holds then.
      if (!master_live_) std::copy(params_ + b, params_ + e, master_.data() + b);
      opt_->step_range(master_.data(), summed, lr_, b, e);
      if (!publish) continue;
      if (compensation_ == Compensation::Momentum) {
        const float step = float(lr_) * momentum_factor();
        const float* v = opt_->momentum().data();
        for (size_t i = b; i < e; ++i) params_[i] = master_[i] - step * v[i];
      } else {
        replay_in_flight(b, e);
      }
    }
    if (compensation_ != Compensation::None) master_live_ = true;
  }
  if (publish) pull();
}

void ParamServer::replay_in_flight(size_t b, size_t e) {
  if (!replay_)
    replay_ = std::make_unique<SgdOptimizer>(opt_->slices(), master_.size(), opt_->options());
  std::copy(opt_->momentum().begin() + ptrdiff_t(b), opt_->momentum().begin() + ptrdiff_t(e),
            replay_->momentum().begin() + ptrdiff_t(b));
  std::copy(master_.data() + b, master_.data() + e, params_ + b);
  // The rounds still in flight, oldest first, each estimated by this rank's own push.
  std::vector<float>& est = estimate_;
  est.resize(master_.size());
  const float ranks = float(comm_.size());
  for (const Round& r : pending_) {
    const float* own = own_grads_[r.slot].data();
    for (size_t i = b; i < e; ++i) est[i] = ranks * own[i];
    replay_->step_range(params_, est.data(), lr_, b, e);
  }
}

void ParamServer::pull() {
  if (comm_.size() == 1) return;
  const auto t = std::chrono::steady_clock::now();
  const double t0 = trace::now_us();
  for (size_t p = 0; p < pieces_.size(); ++p) {
    const size_t n = pieces_.end(p) - pieces_.begin(p);
    inflight_.add(comm_.ibcast(params_ + pieces_.begin(p), n, piece_owner_[p]),
                  cat("pull ", p, " <- rank ", piece_owner_[p]), double(n * sizeof(float)));
  }
  inflight_.wait_all();
  trace::complete("wait for pulls", "wait", t0, trace::now_us());
  stats_.update_comm_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void ParamServer::apply_oldest(bool publish) {
  Round r = std::move(pending_.front());
  pending_.pop_front();
  const double t0 = trace::now_us();
  stats_.finish_wait_s += r.pushes->wait_all();
  trace::complete("wait for stale pushes", "wait", t0, trace::now_us());
  apply(slots_[r.slot].data(), publish);
}

void ParamServer::update(SgdOptimizer& opt, float* params, float* grads, double lr) {
  opt_ = &opt;
  params_ = params;
  lr_ = lr;
  if (staleness_ == 0) {
    apply(grads);
    return;
  }
  while (pending_.size() > size_t(staleness_)) apply_oldest();
}

void ParamServer::drain() {
  // Every rank gets the true weights back (evaluation, checkpoints, the epoch's end): the
  // rounds in flight are applied without predicting past them, then one pull.
  const bool applied = !pending_.empty();
  while (!pending_.empty()) apply_oldest(false);
  if (master_live_) {
    for (int s = 0; s < num_shards(); ++s)
      if (owner(s) == comm_.rank())
        std::copy(master_.data() + shard_begin(s), master_.data() + shard_begin(s + 1),
                  params_ + shard_begin(s));
    master_live_ = false;
  } else if (!applied) {
    return;  // nothing in flight and the weights on every rank are already the true ones
  }
  pull();
}

void ParamServer::collect_optimizer_state(SgdOptimizer& opt) {
  drain();  // a checkpoint holds every update made so far
  float* v = opt.momentum().data();
  for (size_t p = 0; p < pieces_.size(); ++p)
    comm_.bcast(v + pieces_.begin(p), pieces_.end(p) - pieces_.begin(p), piece_owner_[p]);
}

}  // namespace sieve::train
