#include "embed/knn.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "embed/parallel.hpp"
#include "util/error.hpp"
#include "util/threads.hpp"

namespace sieve::embed {

namespace {

// The k smallest (d2, index) pairs seen so far. Candidates are appended to a buffer of up
// to 2k and cut back to the k best (nth_element) when it fills: amortised O(1) per
// candidate, where a bounded heap paid a sift per accepted candidate (a quarter of the
// k-NN time went there). bound() is the k-th best at the last cut (infinite before the
// first): candidates above it can never enter. Pairs order by (distance, index), so ties
// resolve the same way whatever the visiting order.
struct TopK {
  using Item = std::pair<float, int32_t>;
  std::vector<Item> h;
  int64_t k = 0;
  float limit = std::numeric_limits<float>::infinity();
  void reset(int64_t kk) {
    k = kk;
    h.clear();
    h.reserve(static_cast<size_t>(2 * kk));
    limit = std::numeric_limits<float>::infinity();
  }
  float bound() const { return limit; }
  void push(float d, int32_t j) {
    h.emplace_back(d, j);
    if (int64_t(h.size()) >= 2 * k) cut();
  }
  void cut() {
    if (int64_t(h.size()) <= k) return;
    std::nth_element(h.begin(), h.begin() + (k - 1), h.end());
    h.resize(static_cast<size_t>(k));
    limit = h[static_cast<size_t>(k - 1)].first;
  }
  // A list earlier written by write() (entries with index -1 are empty).
  void load(const int32_t* idx, const float* d2, int64_t kk) {
    reset(kk);
    for (int64_t t = 0; t < kk && idx[t] >= 0; ++t) h.emplace_back(d2[t], idx[t]);
    if (int64_t(h.size()) == kk) limit = h.back().first;  // write() left them sorted
  }
  // The best min(k, seen) pairs, nearest first; the rest of the k slots get index -1 and an
  // infinite distance.
  void write(int32_t* idx, float* d2) {
    cut();
    std::sort(h.begin(), h.end());
    for (int64_t t = 0; t < k; ++t) {
      const bool have = t < int64_t(h.size());
      idx[t] = have ? h[size_t(t)].second : -1;
      d2[t] = have ? h[size_t(t)].first : std::numeric_limits<float>::infinity();
    }
  }
};

// Squared norms of the rows of X [n, D].
std::vector<float> row_norms(const float* X, int64_t n, int64_t D) {
  std::vector<float> norms(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    float s = 0.f;
    for (int64_t c = 0; c < D; ++c) s += X[j * D + c] * X[j * D + c];
    norms[j] = s;
  }
  return norms;
}

// Each thread takes a block of kQB query rows and runs its own single-threaded GEMM
// against kRB reference rows at a time; the [kQB,kRB] cross terms (256 KiB) stay in the
// core's L2 for the scan that follows. (One multi-threaded GEMM per block, scanned by
// OpenMP threads, alternated two thread pools on the same cores: a third of the time
// went to spin-waiting.)
constexpr int64_t kQB = 64, kRB = 1024, kLanes = 16;

// One tile: queries q [bq, D] (squared norms qn, global ids qid(t)) against references
// r [br, D] (rn, rid(l)); each query's TopK takes the references within its bound, never
// itself (same global id). dots: scratch [kQB, kRB].
template <typename QId, typename RId>
void scan_tile(const float* q, const float* qn, int64_t bq, QId qid, const float* r,
               const float* rn, int64_t br, RId rid, int64_t D, TopK* tops, float* dots) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(bq), int(br), int(D), -2.0f, q, int(D),
              r, int(D), 0.0f, dots, int(br));  // [bq, br] -2 x_i.x_j
  for (int64_t t = 0; t < bq; ++t) {
    const int64_t i = qid(t);
    const float ni = qn[t];
    const float* row = dots + t * br;
    TopK& top = tops[t];
    // d <= bound  <=>  n_j - 2 x_i.x_j <= bound - n_i. Most lanes fail once the buffer has
    // been cut: test kLanes of them at once (vectorised), visit the rare hits. The lane test
    // is widened by a few roundings and the hits tested again on d itself, so whether a
    // candidate enters never depends on the bound of the moment (on the block order).
    auto loose = [&] {
      const float b = top.bound();
      return b - ni + 4 * std::numeric_limits<float>::epsilon() * (std::abs(b) + std::abs(ni));
    };
    float limit = loose();
    auto consider = [&](int64_t l) {
      const float e = rn[l] + row[l];
      if (e > limit || rid(l) == i) return;
      const float d = std::max(0.f, ni + e);
      if (d <= top.bound()) {
        top.push(d, int32_t(rid(l)));
        limit = loose();
      }
    };
    int64_t j = 0;
    for (; j + kLanes <= br; j += kLanes) {
      int hits = 0;
#pragma omp simd reduction(+ : hits)
      for (int64_t l = 0; l < kLanes; ++l) hits += rn[j + l] + row[j + l] <= limit;
      if (hits == 0) continue;
      for (int64_t l = j; l < j + kLanes; ++l) consider(l);
    }
    for (; j < br; ++j) consider(j);
  }
}

void knn_sweep(const float* X, int64_t N, int64_t D, int64_t k, const int64_t* queries, int64_t nq,
               int32_t* idx, float* d2) {
  std::vector<int32_t> order(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) order[j] = int32_t(j);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return X[a * D] < X[b * D] || (X[a * D] == X[b * D] && a < b);
  });
  std::vector<int64_t> pos(static_cast<size_t>(N));
  for (int64_t p = 0; p < N; ++p) pos[order[p]] = p;
#pragma omp parallel if (N >= kMinPointsForThreads)
  {
    TopK top;
#pragma omp for schedule(dynamic, 64)
    for (int64_t q = 0; q < nq; ++q) {
      const int64_t i = queries[q];
      const float* xi = X + i * D;
      top.reset(k);
      auto visit = [&](int64_t p) {  // false once the gap alone rules out the rest
        const int64_t j = order[p];
        const float gap = X[j * D] - xi[0], gap2 = gap * gap;
        if (gap2 > top.bound()) return false;
        // The bound is only tightened at cuts; tighten it before scanning on.
        if (int64_t(top.h.size()) > top.k) {
          top.cut();
          if (gap2 > top.bound()) return false;
        }
        float s = 0.f;
        for (int64_t c = 0; c < D; ++c) {
          float t = xi[c] - X[j * D + c];
          s += t * t;
        }
        if (s <= top.bound()) top.push(s, int32_t(j));
        return true;
      };
      for (int64_t p = pos[i] + 1; p < N && visit(p);) ++p;
      for (int64_t p = pos[i] - 1; p >= 0 && visit(p);) --p;
      top.write(idx + q * k, d2 + q * k);
    }
  }
}

// Queries Q [nq, D] against references R [nr, D] (squared norms qn, rn; global ids qid(t),
// rid(l)), kQB query rows per OpenMP task. The lists idx/d2 [nq, k] are written; with
// `merge` the lists already there (from an earlier reference block) take part.
template <typename QId, typename RId>
void gemm_search(const float* Q, const float* qn, int64_t nq, QId qid, const float* R,
                 const float* rn, int64_t nr, RId rid, int64_t D, int64_t k, bool merge,
                 int32_t* idx, float* d2) {
  const int64_t nblocks = (nq + kQB - 1) / kQB;
  ScopedSerialBlas serial_blas;
#pragma omp parallel if (std::max(nq, nr) >= kMinPointsForThreads)
  {
    std::vector<TopK> tops(static_cast<size_t>(kQB));
    std::vector<float> dots(static_cast<size_t>(kQB * kRB));
#pragma omp for schedule(dynamic, 1)
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      const int64_t b0 = blk * kQB, bq = std::min(kQB, nq - b0);
      for (int64_t t = 0; t < bq; ++t) {
        if (merge)
          tops[t].load(idx + (b0 + t) * k, d2 + (b0 + t) * k, k);
        else
          tops[t].reset(k);
      }
      for (int64_t r0 = 0; r0 < nr; r0 += kRB)
        scan_tile(
            Q + b0 * D, qn + b0, bq, [&](int64_t t) { return qid(b0 + t); }, R + r0 * D, rn + r0,
            std::min(kRB, nr - r0), [&](int64_t l) { return rid(r0 + l); }, D, tops.data(),
            dots.data());
      for (int64_t t = 0; t < bq; ++t) tops[t].write(idx + (b0 + t) * k, d2 + (b0 + t) * k);
    }
  }
}

}  // namespace

void knn_exact(const float* X, int64_t N, int64_t D, int64_t k, int64_t q0, int64_t q1,
               int32_t* idx, float* d2) {
  SIEVE_ASSERT(k >= 1 && k <= N - 1 && q0 >= 0 && q1 <= N, "k=", k, " N=", N);
  if (q1 <= q0) return;
  if (D <= 4) {
    std::vector<int64_t> q(static_cast<size_t>(q1 - q0));
    for (int64_t t = 0; t < q1 - q0; ++t) q[t] = q0 + t;
    return knn_sweep(X, N, D, k, q.data(), q1 - q0, idx, d2);
  }
  const std::vector<float> norms = row_norms(X, N, D);
  gemm_search(
      X + q0 * D, norms.data() + q0, q1 - q0, [q0](int64_t t) { return q0 + t; }, X, norms.data(),
      N, [](int64_t l) { return l; }, D, k, false, idx, d2);
}

void knn_merge_block(const float* Q, const int64_t* qid, int64_t nq, const float* R,
                     const int64_t* rid, int64_t nr, int64_t D, int64_t k, int32_t* idx,
                     float* d2) {
  SIEVE_ASSERT(k >= 1, "k=", k);
  if (nq <= 0 || nr <= 0) return;
  const std::vector<float> qnorms = row_norms(Q, nq, D), rnorms = row_norms(R, nr, D);
  gemm_search(
      Q, qnorms.data(), nq, [qid](int64_t t) { return qid[t]; }, R, rnorms.data(), nr,
      [rid](int64_t l) { return rid[l]; }, D, k, true, idx, d2);
}

void knn_queries(const float* X, int64_t N, int64_t D, int64_t k, const int64_t* queries,
                 int64_t nq, int32_t* idx, float* d2) {
  SIEVE_ASSERT(k >= 1 && k <= N - 1, "k=", k, " N=", N);
  if (D <= 4) return knn_sweep(X, N, D, k, queries, nq, idx, d2);
  // One GEMM search per query row (each recomputes the N row norms): fine for the few
  // queries this path serves; the callers in this library only query embeddings (D <= 4).
  for (int64_t q = 0; q < nq; ++q)
    knn_exact(X, N, D, k, queries[q], queries[q] + 1, idx + q * k, d2 + q * k);
}

}  // namespace sieve::embed
