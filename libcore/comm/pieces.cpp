#include "comm/pieces.hpp"

namespace sieve {

std::vector<size_t> even_cuts(size_t total, size_t per) {
  std::vector<size_t> cuts;
  for (size_t b = 0; b < total; b += per) cuts.push_back(b);
  cuts.push_back(total);
  if (cuts.size() == 1) cuts.push_back(total);  // an empty buffer is one empty piece
  return cuts;
}

PieceTracker::PieceTracker(const std::vector<size_t>& cuts,
                           const std::vector<std::pair<size_t, size_t>>& covered) {
  for (size_t i = 0; i + 1 < cuts.size(); ++i) pieces_.push_back({cuts[i], cuts[i + 1]});
  for (auto [off, cnt] : covered)
    for (auto& k : pieces_) {
      const size_t lo = std::max(off, k.begin), hi = std::min(off + cnt, k.end);
      if (hi > lo) k.needed += hi - lo;
    }
}

void PieceTracker::reset() {
  for (auto& k : pieces_) k.reported = 0;
}

PieceSchedule::PieceSchedule(const std::vector<size_t>& cuts,
                             const std::vector<std::pair<size_t, size_t>>& covered, Start start)
    : tracker_(cuts, covered), start_(std::move(start)), started_(tracker_.size(), 0) {}

void PieceSchedule::arm() {
  tracker_.reset();
  std::fill(started_.begin(), started_.end(), 0);
  armed_ = true;
}

void PieceSchedule::ready(size_t offset, size_t count) {
  if (!armed_) return;
  tracker_.report(offset, count, [&](size_t p) {
    if (start(p)) ++started_early_;
  });
}

void PieceSchedule::finish() {
  if (!armed_) arm();
  for (size_t p = 0; p < tracker_.size(); ++p)
    if (!started_[p]) start(p);
  armed_ = false;
}

bool PieceSchedule::start(size_t p) {
  started_[p] = 1;
  const size_t begin = tracker_.begin(p), end = tracker_.end(p);
  if (!start_(begin, end)) return false;
  ++messages_;
  elements_ += double(end - begin);
  return true;
}

}  // namespace sieve
