#include "embed/knn_ivf_blocks.hpp"

#include <faiss/IndexFlat.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <vector>

#include "embed/knn.hpp"
#include "embed/parallel.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/threads.hpp"

namespace sieve::embed {

namespace {

// Rows of X [m, D] and ids [m] moved in place so that position t holds what was at
// from[t] (a permutation), one cycle at a time: one spare row, no second copy of X.
void permute_rows(float* X, int64_t* ids, int64_t m, int64_t D, const std::vector<int64_t>& from) {
  std::vector<bool> done(static_cast<size_t>(m), false);
  std::vector<float> row(static_cast<size_t>(D));
  for (int64_t t = 0; t < m; ++t) {
    if (done[size_t(t)]) continue;
    std::copy(X + t * D, X + (t + 1) * D, row.begin());
    const int64_t id = ids[t];
    int64_t j = t;
    for (;;) {
      done[size_t(j)] = true;
      const int64_t s = from[size_t(j)];
      if (s == t) break;
      std::copy(X + s * D, X + (s + 1) * D, X + j * D);
      ids[j] = ids[s];
      j = s;
    }
    std::copy(row.begin(), row.end(), X + j * D);
    ids[j] = id;
  }
}

// CSR of the rows 0..n-1 by their cell (cell_of [n] in [0, lists)), rows ascending.
void rows_by_cell(const std::vector<int64_t>& cell_of, int64_t lists, std::vector<int64_t>& start,
                  std::vector<int64_t>& rows) {
  start.assign(size_t(lists) + 1, 0);
  for (const int64_t c : cell_of) ++start[size_t(c) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  rows.resize(cell_of.size());
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (size_t i = 0; i < cell_of.size(); ++i) rows[size_t(fill[size_t(cell_of[i])]++)] = int64_t(i);
}

}  // namespace

IvfBlockSearch::IvfBlockSearch(float* Q, int64_t* qid, int64_t m, int64_t D, int64_t k,
                               const IvfParams& params)
    : Q_(Q), qid_(qid), m_(m), D_(D), k_(k) {
  SIEVE_ASSERT(k >= 1 && m >= 0 && D >= 1, "ivf blocks: k=", k, " m=", m, " D=", D);
  cells_ = ivf_cells(Q, m, D, params, k + 1);
  permute_rows(Q, qid, m, D, cells_.rows);
  std::iota(cells_.rows.begin(), cells_.rows.end(), int64_t(0));  // now in cell order
  if (cells_.lists > 1) {
    index_ = std::make_unique<faiss::IndexFlatL2>(D);
    index_->add(cells_.lists, cells_.centres.data());
  }
}

IvfBlockSearch::~IvfBlockSearch() = default;

double IvfBlockSearch::mean_probes() const {
  return double(cells_.probe.size()) / double(std::max<int64_t>(1, cells_.lists));
}

double IvfBlockSearch::mean_scanned() const {
  auto rows_in = [&](int64_t c) { return cells_.start[size_t(c + 1)] - cells_.start[size_t(c)]; };
  double sum = 0;
  for (int64_t c = 0; c < cells_.lists; ++c)
    for (int64_t p = cells_.probe_start[size_t(c)]; p < cells_.probe_start[size_t(c + 1)]; ++p)
      sum += double(rows_in(c)) * double(rows_in(cells_.probe[size_t(p)]));
  return sum / double(std::max<int64_t>(1, m_));
}

int64_t IvfBlockSearch::largest_cell() const {
  int64_t most = 0;
  for (int64_t c = 0; c < cells_.lists; ++c)
    most = std::max(most, cells_.start[size_t(c + 1)] - cells_.start[size_t(c)]);
  return most;
}

void IvfBlockSearch::merge_own(int32_t* idx, float* d2) const {
  log::Progress progress("k-NN (ivf): own rows", m_, "rows", 10.0);
  search(Q_, qid_, cells_.start, cells_.rows, idx, d2, &progress);
  progress.update(m_);
  progress.finish();
}

void IvfBlockSearch::merge(const float* R, const int64_t* rid, int64_t nr, int32_t* idx,
                           float* d2) const {
  if (nr <= 0 || m_ == 0) return;
  std::vector<int64_t> cell_of(static_cast<size_t>(nr), 0);
  if (index_) {
    // The cell of a reference is that of its nearest centre, the rule that placed the
    // queries (faiss's k-means assigns its rows by the same search).
    std::vector<faiss::Index::idx_t> label(static_cast<size_t>(nr));
    std::vector<float> dist(static_cast<size_t>(nr));
    index_->search(nr, R, 1, dist.data(), label.data());
    for (int64_t i = 0; i < nr; ++i) cell_of[size_t(i)] = int64_t(label[size_t(i)]);
  }
  std::vector<int64_t> rstart, rrows;
  rows_by_cell(cell_of, cells_.lists, rstart, rrows);
  search(R, rid, rstart, rrows, idx, d2, nullptr);
}

void IvfBlockSearch::search(const float* R, const int64_t* rid, const std::vector<int64_t>& rstart,
                            const std::vector<int64_t>& rrows, int32_t* idx, float* d2,
                            log::Progress* progress) const {
  const int64_t D = D_, k = k_, lists = cells_.lists;
  const std::vector<int64_t>& start = cells_.start;
  // The cells are spread over the threads, each cell's GEMM search single-threaded inside
  // (knn_merge_block's own team is nested, so inactive), as knn_ivf does.
  std::atomic<int64_t> done{0};
  ScopedSerialBlas serial_blas;
#pragma omp parallel if (m_ >= kMinPointsForThreads)
  {
    std::vector<float> buf;
    std::vector<int64_t> ids;
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < lists; ++c) {
      const int64_t q0 = start[size_t(c)], nq = start[size_t(c + 1)] - q0;
      if (nq == 0) continue;
      ids.clear();
      for (int64_t p = cells_.probe_start[size_t(c)]; p < cells_.probe_start[size_t(c + 1)]; ++p) {
        const int64_t pc = cells_.probe[size_t(p)];
        for (int64_t t = rstart[size_t(pc)]; t < rstart[size_t(pc + 1)]; ++t)
          ids.push_back(rrows[size_t(t)]);
      }
      if (ids.empty()) continue;
      const int64_t nr = int64_t(ids.size());
      buf.resize(size_t(nr * D));
      for (int64_t t = 0; t < nr; ++t) {
        std::copy(R + ids[size_t(t)] * D, R + (ids[size_t(t)] + 1) * D, buf.begin() + t * D);
        ids[size_t(t)] = rid[ids[size_t(t)]];  // the row's global id from here on
      }
      knn_merge_block(Q_ + q0 * D, qid_ + q0, nq, buf.data(), ids.data(), nr, D, k, idx + q0 * k,
                      d2 + q0 * k);
      // Progress lines from the team's first thread only (never two writers at once).
      const int64_t now = done.fetch_add(nq, std::memory_order_relaxed) + nq;
      if (progress && omp_get_thread_num() == 0) progress->update(now);
    }
  }
}

}  // namespace sieve::embed
