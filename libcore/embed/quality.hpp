// Quality figures of an embedding, measured against its input space.
//
//  - k-NN preservation: the mean over points of |kNN_in(i) ∩ kNN_out(i)| / k (k = 10),
//    exact neighbours in both spaces, self excluded.
//  - trustworthiness (Venna & Kaski): 1 - 2/(m k (2N - 3k - 1)) sum_i sum_{j in U_i}
//    (r(i,j) - k), where U_i are the embedding neighbours of i that are not input
//    neighbours and r(i,j) is j's rank among i's input-space neighbours. The outer sum
//    runs over m points: all of them (m = N) or, for large N, a fixed evenly spaced
//    subsample (each needs O(N D) work); `points` says which.
// Both are collective: the points are split over ranks and the sums allreduced.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.hpp"

namespace sieve::embed {

struct Quality {
  double knn_preservation = 0.0;
  double trustworthiness = 0.0;
  int64_t trust_points = 0;  // m: points the trustworthiness was averaged over
  int64_t k = 10;
};

// X [N,D] input, Y [N,d] embedding (both whole on every rank). in_knn: optional input
// k-NN lists of this rank's block_range rows ([rows, in_k], in_k >= k, nearest first),
// reused instead of searching again.
Quality embedding_quality(const Comm& comm, const float* X, int64_t N, int64_t D,
                          const double* Y, int d, int64_t max_trust_points, int64_t k = 10,
                          const std::vector<int32_t>* in_knn = nullptr, int64_t in_k = 0);

}  // namespace sieve::embed
