#include "embed/knn.hpp"

#include <cblas.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "util/error.hpp"

namespace sieve::embed {

namespace {

// Bounded max-heap of (d2, index) pairs; the top is the current k-th best.
struct TopK {
  using Item = std::pair<float, int32_t>;
  std::vector<Item> h;
  int64_t k;
  void reset(int64_t kk) {
    k = kk;
    h.clear();
    h.reserve(static_cast<size_t>(kk));
  }
  float bound() const {
    return int64_t(h.size()) < k ? std::numeric_limits<float>::infinity() : h.front().first;
  }
  void push(float d, int32_t j) {
    Item it{d, j};
    if (int64_t(h.size()) < k) {
      h.push_back(it);
      std::push_heap(h.begin(), h.end());
    } else if (it < h.front()) {
      std::pop_heap(h.begin(), h.end());
      h.back() = it;
      std::push_heap(h.begin(), h.end());
    }
  }
  void write(int32_t* idx, float* d2) {
    std::sort(h.begin(), h.end());
    for (size_t t = 0; t < h.size(); ++t) {
      idx[t] = h[t].second;
      d2[t] = h[t].first;
    }
  }
};

void knn_sweep(const float* X, int64_t N, int64_t D, int64_t k, const int64_t* queries,
               int64_t nq, int32_t* idx, float* d2) {
  std::vector<int32_t> order(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) order[j] = int32_t(j);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return X[a * D] < X[b * D] || (X[a * D] == X[b * D] && a < b);
  });
  std::vector<int64_t> pos(static_cast<size_t>(N));
  for (int64_t p = 0; p < N; ++p) pos[order[p]] = p;
#pragma omp parallel
  {
    TopK top;
#pragma omp for schedule(dynamic, 64)
    for (int64_t q = 0; q < nq; ++q) {
      const int64_t i = queries[q];
      const float* xi = X + i * D;
      top.reset(k);
      auto visit = [&](int64_t p) {  // false once the gap alone rules out the rest
        const int64_t j = order[p];
        float gap = X[j * D] - xi[0];
        if (gap * gap > top.bound()) return false;
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
  const int64_t QB = 512, RB = 8192;
  const int64_t nq = q1 - q0;
  std::vector<TopK> tops(size_t(std::min(nq, QB)));
  std::vector<float> dots(size_t(QB * RB));  // [QB,RB] cross terms of one block pair
  for (int64_t b0 = q0; b0 < q1; b0 += QB) {
    int64_t bq = std::min(QB, q1 - b0);
    for (int64_t t = 0; t < bq; ++t) tops[t].reset(k);
    for (int64_t r0 = 0; r0 < N; r0 += RB) {
      int64_t br = std::min(RB, N - r0);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(bq), int(br), int(D), -2.0f,
                  X + b0 * D, int(D), X + r0 * D, int(D), 0.0f, dots.data(), int(br));
#pragma omp parallel for schedule(static)
      for (int64_t t = 0; t < bq; ++t) {
        const int64_t i = b0 + t;
        const float ni = norms[i];
        const float* row = dots.data() + t * br;
        TopK& top = tops[t];
        float bound = top.bound();
        for (int64_t j = 0; j < br; ++j) {
          float d = std::max(0.f, ni + norms[r0 + j] + row[j]);
          if (d <= bound && r0 + j != i) {
            top.push(d, int32_t(r0 + j));
            bound = top.bound();
          }
        }
      }
    }
    for (int64_t t = 0; t < bq; ++t) tops[t].write(idx + (b0 - q0 + t) * k, d2 + (b0 - q0 + t) * k);
  }
}

void knn_queries(const float* X, int64_t N, int64_t D, int64_t k, const int64_t* queries,
                 int64_t nq, int32_t* idx, float* d2) {
  SIEVE_ASSERT(k >= 1 && k <= N - 1, "k=", k, " N=", N);
  if (D <= 4) return knn_sweep(X, N, D, k, queries, nq, idx, d2);
  // Gather the queries into contiguous rows, search them against all rows, map back.
  for (int64_t q = 0; q < nq; ++q) knn_exact(X, N, D, k, queries[q], queries[q] + 1, idx + q * k, d2 + q * k);
}

}  // namespace sieve::embed
