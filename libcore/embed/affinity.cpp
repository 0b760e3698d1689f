#include "embed/affinity.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "embed/parallel.hpp"
#include "util/error.hpp"

namespace sieve::embed {

double calibrate_row(const float* d2, int64_t k, double perplexity, double* p) {
  const double target = std::log(perplexity);
  // Shift by the nearest distance: p is invariant to it and exp() cannot underflow to 0.
  const double d0 = d2[0];
  double beta = 1.0, lo = 0.0, hi = std::numeric_limits<double>::infinity();
  for (int iter = 0; iter < 200; ++iter) {
    double sum = 0.0, dsum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      p[j] = std::exp(-beta * (double(d2[j]) - d0));
      sum += p[j];
      dsum += p[j] * (double(d2[j]) - d0);
    }
    // Entropy H = log(sum) + beta * E[d - d0].
    double H = std::log(sum) + beta * dsum / sum;
    for (int64_t j = 0; j < k; ++j) p[j] /= sum;
    if (std::abs(H - target) < 1e-5) break;
    if (H > target) {
      lo = beta;
      beta = std::isinf(hi) ? beta * 2.0 : 0.5 * (beta + hi);
    } else {
      hi = beta;
      beta = 0.5 * (beta + lo);
    }
  }
  return beta;
}

SparseRows build_affinities(const Comm& comm, const float* X, int64_t N, int64_t D,
                            double perplexity, Range own, std::vector<int32_t>* knn_idx,
                            int64_t* knn_k, KnnMethod knn, KnnMethod* knn_used,
                            double* knn_seconds) {
  const int64_t k = std::min<int64_t>(N - 1, int64_t(std::ceil(3.0 * perplexity)));
  SIEVE_CHECK(k >= 1, "t-SNE needs at least 2 points");
  const int64_t nown = own.size();
  std::vector<int32_t> idx(size_t(nown * k));
  std::vector<float> d2(size_t(nown * k));
  const KnnMethod method = resolve_knn_method(knn, N);
  const auto t_knn = std::chrono::steady_clock::now();
  knn_search(method, X, N, D, k, own.begin, own.end, idx.data(), d2.data());
  if (knn_used) *knn_used = method;
  if (knn_seconds)
    *knn_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_knn).count();
  // Conditional rows of this rank, in float for the exchange ([nown,k]).
  std::vector<float> pc(size_t(nown * k));
#pragma omp parallel if (N >= kMinPointsForThreads)
  {
    std::vector<double> p(static_cast<size_t>(k));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < nown; ++i) {
      calibrate_row(d2.data() + i * k, k, perplexity, p.data());
      for (int64_t j = 0; j < k; ++j) pc[i * k + j] = float(p[j]);
    }
  }
  // Every rank sees every conditional row (rank order = row order).
  std::vector<int32_t> all_idx = comm.allgatherv(idx);
  std::vector<float> all_p = comm.allgatherv(pc);
  SIEVE_ASSERT(int64_t(all_idx.size()) == N * k);
  if (knn_idx) *knn_idx = std::move(idx);
  if (knn_k) *knn_k = k;

  // Own rows of P_cond + P_cond^T: entry (i,j) from i's list and (i,j) from j's list.
  SparseRows S;
  S.row0 = own.begin;
  std::vector<int64_t> count(size_t(nown) + 1, 0);
  for (int64_t i = own.begin; i < own.end; ++i) count[i - own.begin + 1] += k;
  for (int64_t e = 0; e < N * k; ++e) {
    int64_t j = all_idx[e];
    if (j >= own.begin && j < own.end) count[j - own.begin + 1]++;
  }
  for (int64_t r = 0; r < nown; ++r) count[r + 1] += count[r];
  std::vector<int64_t> fill(count.begin(), count.end() - 1);
  std::vector<std::pair<int32_t, double>> tmp(size_t(count.back()));
  for (int64_t i = own.begin; i < own.end; ++i)
    for (int64_t t = 0; t < k; ++t)
      tmp[fill[i - own.begin]++] = {all_idx[i * k + t], double(all_p[i * k + t])};
  for (int64_t e = 0; e < N * k; ++e) {
    int64_t j = all_idx[e];
    if (j >= own.begin && j < own.end) tmp[fill[j - own.begin]++] = {int32_t(e / k), double(all_p[e])};
  }
  // Sort each row by column and merge duplicates (mutual neighbours).
  const double scale = 1.0 / (2.0 * double(N));
  S.ptr.assign(size_t(nown) + 1, 0);
  std::vector<int64_t> rowlen(size_t(nown), 0);
#pragma omp parallel for schedule(dynamic, 64) if (N >= kMinPointsForThreads)
  for (int64_t r = 0; r < nown; ++r) {
    auto b = tmp.begin() + count[r], e = tmp.begin() + count[r + 1];
    std::sort(b, e, [](const auto& a, const auto& c) { return a.first < c.first; });
    int64_t out = count[r];
    for (auto it = b; it != e; ++it) {
      if (out > count[r] && tmp[out - 1].first == it->first)
        tmp[out - 1].second += it->second;
      else
        tmp[out++] = *it;
    }
    rowlen[r] = out - count[r];
  }
  for (int64_t r = 0; r < nown; ++r) S.ptr[r + 1] = S.ptr[r] + rowlen[r];
  S.col.resize(size_t(S.ptr.back()));
  S.val.resize(size_t(S.ptr.back()));
  for (int64_t r = 0; r < nown; ++r)
    for (int64_t t = 0; t < rowlen[r]; ++t) {
      S.col[S.ptr[r] + t] = tmp[count[r] + t].first;
      S.val[S.ptr[r] + t] = tmp[count[r] + t].second * scale;
    }
  return S;
}

}  // namespace sieve::embed
