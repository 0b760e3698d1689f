#include "embed/knn.hpp"

#include <cblas.h>

#include <algorithm>
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
  void write(int32_t* idx, float* d2) {
    cut();
    std::sort(h.begin(), h.end());
    for (size_t t = 0; t < h.size(); ++t) {
      idx[t] = h[t].second;
      d2[t] = h[t].first;
    }
  }
};

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
  std::vector<float> norms(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) {
    float s = 0.f;
    for (int64_t c = 0; c < D; ++c) s += X[j * D + c] * X[j * D + c];
    norms[j] = s;
  }
  // Each thread takes a block of QB query rows and runs its own single-threaded GEMM
  // against RB reference rows at a time; the [QB,RB] cross terms (256 KiB) stay in the
  // core's L2 for the scan that follows. (One multi-threaded GEMM per block, scanned by
  // OpenMP threads, alternated two thread pools on the same cores: a third of the time
  // went to spin-waiting.)
  constexpr int64_t QB = 64, RB = 1024, kLanes = 16;
  const int64_t nq = q1 - q0;
  const int64_t nblocks = (nq + QB - 1) / QB;
  ScopedSerialBlas serial_blas;
#pragma omp parallel if (N >= kMinPointsForThreads)
  {
    std::vector<TopK> tops(static_cast<size_t>(QB));
    std::vector<float> dots(static_cast<size_t>(QB * RB));  // [QB,RB] -2 x_i.x_j
#pragma omp for schedule(dynamic, 1)
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      const int64_t b0 = q0 + blk * QB, bq = std::min(QB, q1 - b0);
      for (int64_t t = 0; t < bq; ++t) tops[t].reset(k);
      for (int64_t r0 = 0; r0 < N; r0 += RB) {
        const int64_t br = std::min(RB, N - r0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(bq), int(br), int(D), -2.0f,
                    X + b0 * D, int(D), X + r0 * D, int(D), 0.0f, dots.data(), int(br));
        const float* nr = norms.data() + r0;
        for (int64_t t = 0; t < bq; ++t) {
          const int64_t i = b0 + t;
          const float ni = norms[i];
          const float* row = dots.data() + t * br;
          TopK& top = tops[t];
          // d <= bound  <=>  n_j - 2 x_i.x_j <= bound - n_i. Most lanes fail once the
          // buffer has been cut: test kLanes of them at once (vectorised), visit the rare hits.
          float limit = top.bound() - ni;
          auto consider = [&](int64_t l) {
            const float e = nr[l] + row[l];
            if (e <= limit && r0 + l != i) {
              top.push(std::max(0.f, ni + e), int32_t(r0 + l));
              limit = top.bound() - ni;
            }
          };
          int64_t j = 0;
          for (; j + kLanes <= br; j += kLanes) {
            int hits = 0;
#pragma omp simd reduction(+ : hits)
            for (int64_t l = 0; l < kLanes; ++l) hits += nr[j + l] + row[j + l] <= limit;
            if (hits == 0) continue;
            for (int64_t l = j; l < j + kLanes; ++l) consider(l);
          }
          for (; j < br; ++j) consider(j);
        }
      }
      for (int64_t t = 0; t < bq; ++t)
        tops[t].write(idx + (b0 - q0 + t) * k, d2 + (b0 - q0 + t) * k);
    }
  }
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
