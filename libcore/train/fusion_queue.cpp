#include "train/fusion_queue.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "util/clock.hpp"
#include "util/trace.hpp"

namespace sieve::train {
namespace {
bool test_bit(const std::vector<uint64_t>& m, size_t i) {
  return (m[i / 64] >> (i % 64)) & 1u;
}
void set_bit(std::vector<uint64_t>& m, size_t i) {
  m[i / 64] |= uint64_t(1) << (i % 64);
}
}  // namespace

FusionQueue::FusionQueue(const Comm& comm, float* grads, size_t total,
                         const std::vector<std::pair<size_t, size_t>>& covered, double cycle_ms,
                         size_t fusion_bytes)
    : comm_(comm),
      grads_(grads),
      cycle_s_(std::max(0.0, cycle_ms) * 1e-3),
      fusion_floats_(std::max<size_t>(1, fusion_bytes / sizeof(float))) {
  for (auto [off, cnt] : covered) {
    SIEVE_ASSERT(off + cnt <= total, "fusion-queue: tensor outside the gradient buffer");
    tensors_.push_back({off, cnt});
  }
  const size_t words = (tensors_.size() + 63) / 64;
  local_.assign(words, 0);
  agreed_.assign(words, 0);
  send_.assign(words, 0);
  recv_.assign(words, 0);
}

FusionQueue::~FusionQueue() = default;  // round_ waits for a round still in flight

void FusionQueue::arm() {
  std::fill(local_.begin(), local_.end(), 0);
  std::fill(agreed_.begin(), agreed_.end(), 0);
  agreed_count_ = 0;
  fused_.clear();
  armed_ = true;
  ++stats_.steps;
  // The first round may start with the first ready tensor.
  round_started_ = std::chrono::steady_clock::now() - std::chrono::hours(1);
}

bool FusionQueue::round_due() const {
  return !round_.active() && seconds_since(round_started_) >= cycle_s_;
}

void FusionQueue::start_round() {
  send_ = local_;
  round_started_ = std::chrono::steady_clock::now();
  round_t0_us_ = trace::now_us();
  round_ = comm_.iallreduce_band(send_.data(), recv_.data(), send_.size());
  ++stats_.negotiations;
}

void FusionQueue::on_round_done() {
  trace::complete("negotiate", "negotiate", round_t0_us_, trace::now_us(), trace::kComm);
  // Newly agreed tensors, last first (the order backward makes them ready).
  std::vector<size_t> fresh;
  for (size_t t = tensors_.size(); t-- > 0;)
    if (test_bit(recv_, t) && !test_bit(agreed_, t)) {
      set_bit(agreed_, t);
      fresh.push_back(t);
    }
  agreed_count_ += fresh.size();
  const auto t_pack = std::chrono::steady_clock::now();
  size_t i = 0;
  while (i < fresh.size()) {
    Fused f;
    size_t floats = 0;
    if (tensors_[fresh[i]].count >= fusion_floats_) {
      f.tensors.push_back(fresh[i++]);  // too large to fuse: reduced in place
    } else {
      while (i < fresh.size() && floats + tensors_[fresh[i]].count <= fusion_floats_) {
        floats += tensors_[fresh[i]].count;
        f.tensors.push_back(fresh[i++]);
      }
      f.buffer.resize(floats);
      float* dst = f.buffer.data();
      for (size_t t : f.tensors) {
        std::memcpy(dst, grads_ + tensors_[t].offset, tensors_[t].count * sizeof(float));
        dst += tensors_[t].count;
      }
    }
    float* data = f.buffer.empty() ? grads_ + tensors_[f.tensors[0]].offset : f.buffer.data();
    const size_t n = f.buffer.empty() ? tensors_[f.tensors[0]].count : f.buffer.size();
    inflight_.add(comm_.iallreduce_sum(data, n),
                  cat("fused ", fused_.size(), " (", f.tensors.size(), " tensors)"),
                  double(n * sizeof(float)));
    ++stats_.messages;
    if (armed_) ++stats_.started_early;
    stats_.bytes += double(n * sizeof(float));
    fused_.push_back(std::move(f));
  }
  stats_.pack_s += seconds_since(t_pack);
}

void FusionQueue::poll_round() {
  if (!round_.active()) return;
  if (round_.test()) on_round_done();
}

void FusionQueue::ready(size_t offset, size_t count) {
  if (!armed_ || comm_.size() == 1) return;
  // Each hook call is one whole tensor (Model::backward's contract); find it by offset.
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), offset,
                             [](const Tensor& t, size_t off) { return t.offset < off; });
  if (it != tensors_.end() && it->offset == offset && it->count == count)
    set_bit(local_, size_t(it - tensors_.begin()));
  poll_round();
  if (round_due() && agreed_count_ < tensors_.size()) start_round();
  inflight_.poll();
}

void FusionQueue::finish() {
  if (comm_.size() == 1) {
    armed_ = false;
    return;
  }
  for (size_t t = 0; t < tensors_.size(); ++t) set_bit(local_, t);
  armed_ = false;  // reductions started from here on are not overlapped with backward
  const double t0 = trace::now_us();
  const auto wait_start = std::chrono::steady_clock::now();
  while (agreed_count_ < tensors_.size() || round_.active()) {
    if (round_.active()) {
      round_.wait();
      on_round_done();
      continue;
    }
    // Keep the cycle pacing: sleep out the rest of the cycle, driving reductions meanwhile.
    while (!round_due()) {
      inflight_.poll();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    start_round();
  }
  stats_.negotiation_wait_s += seconds_since(wait_start);
  trace::complete("wait for agreement", "negotiate", t0, trace::now_us());
  const double t1 = trace::now_us();
  stats_.finish_wait_s += inflight_.wait_all();
  trace::complete("wait for fused reductions", "wait", t1, trace::now_us());
  const auto t_unpack = std::chrono::steady_clock::now();
  for (const Fused& f : fused_) {
    if (f.buffer.empty()) continue;
    const float* src = f.buffer.data();
    for (size_t t : f.tensors) {
      std::memcpy(grads_ + tensors_[t].offset, src, tensors_[t].count * sizeof(float));
      src += tensors_[t].count;
    }
  }
  stats_.pack_s += seconds_since(t_unpack);
  fused_.clear();
}

}  // namespace sieve::train
