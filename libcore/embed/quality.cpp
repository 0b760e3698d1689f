#include "embed/quality.hpp"

#include <cblas.h>

#include <algorithm>

#include "embed/knn.hpp"
#include "embed/parallel.hpp"
#include "util/error.hpp"

namespace sieve::embed {

Quality embedding_quality(const Comm& comm, const float* X, int64_t N, int64_t D,
                          const double* Y, int d, int64_t max_trust_points, int64_t k,
                          const std::vector<int32_t>* in_knn, int64_t in_k) {
  Quality q;
  k = std::min(k, N - 1);
  q.k = k;
  if (k < 1) return q;
  const Range own = block_range(N, comm.rank(), comm.size());
  const int64_t n = own.size();
  std::vector<float> Yf(size_t(N * d));
  for (int64_t t = 0; t < N * d; ++t) Yf[t] = float(Y[t]);

  // Input-space neighbours of the owned rows (reused when given).
  std::vector<int32_t> nin;
  int64_t kin = k;
  if (in_knn && in_k >= k && int64_t(in_knn->size()) == n * in_k) {
    kin = in_k;
  } else {
    nin.resize(size_t(n * k));
    std::vector<float> dd(size_t(n * k));
    knn_exact(X, N, D, k, own.begin, own.end, nin.data(), dd.data());
    in_knn = &nin;
  }
  std::vector<int32_t> nout(size_t(n * k));
  {
    std::vector<float> dd(size_t(n * k));
    knn_exact(Yf.data(), N, d, k, own.begin, own.end, nout.data(), dd.data());
  }
  int64_t hits = 0;
  for (int64_t r = 0; r < n; ++r) {
    const int32_t* a = in_knn->data() + r * kin;
    for (int64_t t = 0; t < k; ++t)
      hits += std::count(a, a + k, nout[r * k + t]);
  }
  hits = comm.allreduce_sum(hits);
  q.knn_preservation = double(hits) / double(N * k);

  // Trustworthiness over m evenly spaced points; each rank takes a share of them.
  const int64_t m = std::min(N, max_trust_points);
  q.trust_points = m;
  Range mine = block_range(m, comm.rank(), comm.size());
  std::vector<float> norms(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) {
    float s = 0.f;
    for (int64_t c = 0; c < D; ++c) s += X[j * D + c] * X[j * D + c];
    norms[j] = s;
  }
  // Embedding neighbours of every sampled point, in one sweep.
  std::vector<int64_t> sample(static_cast<size_t>(mine.size()));
  for (int64_t t = 0; t < mine.size(); ++t) sample[t] = (mine.begin + t) * N / m;
  std::vector<int32_t> sout(static_cast<size_t>(mine.size() * k));
  {
    std::vector<float> dd(static_cast<size_t>(mine.size() * k));
    knn_queries(Yf.data(), N, d, k, sample.data(), mine.size(), sout.data(), dd.data());
  }
  const int64_t QB = 64;
  std::vector<float> dots(size_t(QB * N));  // [QB,N]
  std::vector<float> qx(size_t(QB * D));
  std::vector<int64_t> ids(static_cast<size_t>(QB));
  double penalty = 0.0;
  for (int64_t s0 = mine.begin; s0 < mine.end; s0 += QB) {
    int64_t bq = std::min(QB, mine.end - s0);
    for (int64_t t = 0; t < bq; ++t) {
      ids[t] = sample[s0 - mine.begin + t];  // evenly spaced sample
      std::copy(X + ids[t] * D, X + (ids[t] + 1) * D, qx.begin() + t * D);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(bq), int(N), int(D), -2.0f, qx.data(),
                int(D), X, int(D), 0.0f, dots.data(), int(N));
    std::vector<double> pen(size_t(bq), 0.0);
#pragma omp parallel for schedule(dynamic, 1) if (N >= kMinPointsForThreads)
    for (int64_t t = 0; t < bq; ++t) {
      const int64_t i = ids[t];
      float* din = dots.data() + t * N;  // becomes squared input distances
      for (int64_t j = 0; j < N; ++j) din[j] = std::max(0.f, norms[i] + norms[j] + din[j]);
      const int32_t* oi = sout.data() + (s0 - mine.begin + t) * k;
      // The k-th input distance (ties by index) decides membership of the input k-NN.
      std::vector<std::pair<float, int32_t>> heap;
      for (int64_t j = 0; j < N; ++j) {
        if (j == i) continue;
        std::pair<float, int32_t> e{din[j], int32_t(j)};
        if (int64_t(heap.size()) < k) {
          heap.push_back(e);
          std::push_heap(heap.begin(), heap.end());
        } else if (e < heap.front()) {
          std::pop_heap(heap.begin(), heap.end());
          heap.back() = e;
          std::push_heap(heap.begin(), heap.end());
        }
      }
      const std::pair<float, int32_t> kth = heap.front();
      for (int64_t u = 0; u < k; ++u) {
        const int32_t j = oi[u];
        const std::pair<float, int32_t> key{din[j], j};
        if (!(kth < key)) continue;  // j is an input neighbour too
        // rank of j among i's input neighbours (1 = nearest), self excluded
        int64_t rank = 1;
        for (int64_t v = 0; v < N; ++v)
          if (v != i && std::pair<float, int32_t>{din[v], int32_t(v)} < key) ++rank;
        pen[t] += double(rank - k);
      }
    }
    for (double p : pen) penalty += p;
  }
  penalty = comm.allreduce_sum(penalty);
  const double denom = double(m) * double(k) * (2.0 * double(N) - 3.0 * double(k) - 1.0);
  q.trustworthiness = denom > 0 ? 1.0 - 2.0 * penalty / denom : 1.0;
  return q;
}

}  // namespace sieve::embed
