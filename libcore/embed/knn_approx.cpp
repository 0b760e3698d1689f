#include "embed/knn_approx.hpp"

#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <utility>
#include <vector>

#include "embed/knn.hpp"
#include "embed/parallel.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sieve::embed {

KnnMethod parse_knn_method(const std::string& name) {
  if (name == "auto") return KnnMethod::Auto;
  if (name == "exact") return KnnMethod::Exact;
  if (name == "hnsw") return KnnMethod::Hnsw;
  throw UsageError(cat("unknown k-NN method '", name, "' (auto, exact, hnsw)"));
}

const char* knn_method_name(KnnMethod m) {
  switch (m) {
    case KnnMethod::Auto:
      return "auto";
    case KnnMethod::Exact:
      return "exact";
    case KnnMethod::Hnsw:
      return "hnsw";
  }
  return "?";
}

KnnMethod resolve_knn_method(KnnMethod m, int64_t N) {
  if (m != KnnMethod::Auto) return m;
  return N >= kHnswMinPoints ? KnnMethod::Hnsw : KnnMethod::Exact;
}

void knn_hnsw(const float* X, int64_t N, int64_t D, int64_t k, int64_t q0, int64_t q1, int32_t* idx,
              float* d2, const HnswParams& params) {
  SIEVE_CHECK(k >= 1 && k <= N - 1, "k-NN: k = ", k, " needs 1 <= k <= N-1 (N = ", N, ")");
  SIEVE_CHECK(N < int64_t(std::numeric_limits<int32_t>::max()), "k-NN: ", N,
              " points exceed the int32 neighbour ids");
  SIEVE_CHECK(0 <= q0 && q0 <= q1 && q1 <= N, "k-NN: query rows [", q0, ",", q1, ") outside [0,", N,
              ")");
  hnswlib::L2Space space(static_cast<size_t>(D));
  hnswlib::HierarchicalNSW<float> index(&space, static_cast<size_t>(N), size_t(params.M),
                                        size_t(params.ef_construction), size_t(params.seed));
  {
    // One thread, rows in order: the graph is a function of X and the parameters (see the
    // header). Two inserting threads would roughly halve this phase's wall time.
    log::Progress progress("k-NN (hnsw): index", N, "points", 10.0);
    for (int64_t i = 0; i < N; ++i) {
      index.addPoint(X + i * D, static_cast<hnswlib::labeltype>(i));
      if ((i & 1023) == 0) progress.update(i);
    }
    progress.update(N);
    progress.finish();
  }
  // k + 1: the query row itself is normally its own nearest hit and is dropped.
  index.setEf(size_t(std::max(params.ef_search, k + 1)));
  const int64_t nq = q1 - q0;
  std::vector<int64_t> short_rows;  // rows whose search returned fewer than k others
  std::atomic<int64_t> done{0};
  std::exception_ptr failure;
  log::Progress progress("k-NN (hnsw): queries", nq, "points", 10.0);
#pragma omp parallel if (N >= kMinPointsForThreads)
  {
    std::vector<std::pair<float, int32_t>> hits;
    std::vector<int64_t> my_short;
#pragma omp for schedule(dynamic, 64) nowait
    for (int64_t q = 0; q < nq; ++q) {
      const int64_t i = q0 + q;
      const float* xi = X + i * D;
      try {
        auto found = index.searchKnn(xi, size_t(k + 1));
        hits.clear();
        for (; !found.empty(); found.pop()) {
          const int64_t j = int64_t(found.top().second);
          if (j == i) continue;
          double s = 0.0;
          for (int64_t c = 0; c < D; ++c) {
            const double t = double(xi[c]) - double(X[j * D + c]);
            s += t * t;
          }
          hits.emplace_back(float(s), int32_t(j));
        }
      } catch (...) {
#pragma omp critical(sieve_knn_hnsw_failure)
        if (!failure) failure = std::current_exception();
        hits.clear();
      }
      if (int64_t(hits.size()) < k) {
        my_short.push_back(i);
        continue;
      }
      // (distance, index) order as knn_exact; the farthest of k + 1 goes when the row
      // itself was not among the hits.
      std::sort(hits.begin(), hits.end());
      for (int64_t t = 0; t < k; ++t) {
        idx[q * k + t] = hits[size_t(t)].second;
        d2[q * k + t] = hits[size_t(t)].first;
      }
      const int64_t n = done.fetch_add(1, std::memory_order_relaxed) + 1;
#ifdef _OPENMP
      if (omp_get_thread_num() == 0) progress.update(n);
#else
      progress.update(n);
#endif
    }
#pragma omp critical(sieve_knn_hnsw_short)
    short_rows.insert(short_rows.end(), my_short.begin(), my_short.end());
  }
  if (failure) std::rethrow_exception(failure);
  progress.update(nq);
  progress.finish();
  // A search that ends with fewer than k other rows (a graph region it could not leave,
  // many exact duplicates) is answered exactly; on clustered data this did not happen.
  if (!short_rows.empty()) {
    std::sort(short_rows.begin(), short_rows.end());
    log::infof("k-NN (hnsw): ", short_rows.size(), " of ", nq,
               " searches returned fewer than k = ", k, " rows; those are searched exactly");
    std::vector<int32_t> si(short_rows.size() * size_t(k));
    std::vector<float> sd(si.size());
    knn_queries(X, N, D, k, short_rows.data(), int64_t(short_rows.size()), si.data(), sd.data());
    for (size_t r = 0; r < short_rows.size(); ++r) {
      const int64_t q = short_rows[r] - q0;
      std::copy(si.begin() + int64_t(r) * k, si.begin() + int64_t(r + 1) * k, idx + q * k);
      std::copy(sd.begin() + int64_t(r) * k, sd.begin() + int64_t(r + 1) * k, d2 + q * k);
    }
  }
}

void knn_search(KnnMethod m, const float* X, int64_t N, int64_t D, int64_t k, int64_t q0,
                int64_t q1, int32_t* idx, float* d2) {
  if (resolve_knn_method(m, N) == KnnMethod::Hnsw)
    knn_hnsw(X, N, D, k, q0, q1, idx, d2);
  else
    knn_exact(X, N, D, k, q0, q1, idx, d2);
}

}  // namespace sieve::embed
