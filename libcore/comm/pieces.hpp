// How a flat buffer is cut into pieces that are reduced one by one as they become complete:
// the bookkeeping of the bucket reductions (train/reducer.hpp, the parameter server's pieces,
// and a device backend's own reducer, cuda/grad_reducer.cpp), which see only offsets.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace sieve {

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

// The bucket protocol of a reduction that starts each piece as soon as it is complete
// (train/grad_sync.hpp: arm, ready from the grad-ready hook, finish), for a reducer that only
// has to say how one piece is reduced (`start`): a device backend's own reducer
// (cuda/grad_reducer.cpp). Every piece is started exactly once per step: those that ready()
// completes, in the order they complete (the same on every rank, as backward is
// deterministic: collectives need one order), then finish() starts the rest in ascending
// order. Without a preceding arm(), finish() arms first, so every piece is still reduced.
class PieceSchedule {
 public:
  // start(begin, end): reduce [begin, end) of the buffer; false where nothing was sent (one
  // rank; an empty piece).
  using Start = std::function<bool(size_t begin, size_t end)>;
  PieceSchedule(const std::vector<size_t>& cuts,
                const std::vector<std::pair<size_t, size_t>>& covered, Start start);
  void arm();
  void ready(size_t offset, size_t count);
  void finish();
  size_t size() const { return tracker_.size(); }
  // Over all steps so far: reductions sent, those sent by ready() (while backward ran), and
  // the elements they covered.
  int64_t messages() const { return messages_; }
  int64_t started_early() const { return started_early_; }
  double elements() const { return elements_; }

 private:
  bool start(size_t piece);
  PieceTracker tracker_;
  Start start_;
  std::vector<char> started_;
  bool armed_ = false;
  int64_t messages_ = 0, started_early_ = 0;
  double elements_ = 0;
};

// Cuts [0, total) every `per` elements (the last piece may be shorter).
std::vector<size_t> even_cuts(size_t total, size_t per);

}  // namespace sieve
