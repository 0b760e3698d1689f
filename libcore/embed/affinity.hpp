// t-SNE input affinities: perplexity calibration and the symmetrised sparse P.
//
// From the k-NN lists (k = min(N-1, 3 x perplexity); exact, or approximate through HNSW for
// large N: knn_approx.hpp), every point's Gaussian
// bandwidth is found by binary search so that the conditional distribution p(j|i) over
// its neighbours has entropy log(perplexity). P = (P_cond + P_cond^T) / (2N) then sums to
// 1 over all entries. Each rank calibrates its own rows, the conditional rows are
// allgathered (N*k pairs), and each rank keeps the CSR rows of P for the points it owns:
// that is all the attractive forces and the KL divergence need.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.hpp"
#include "embed/knn_approx.hpp"

namespace sieve::embed {

// Rows [row0, row0 + rows()) of the symmetric P in CSR, columns sorted ascending.
struct SparseRows {
  int64_t row0 = 0;
  std::vector<int64_t> ptr;  // [rows+1]
  std::vector<int32_t> col;  // [nnz]
  std::vector<double> val;   // [nnz]
  int64_t rows() const { return int64_t(ptr.size()) - 1; }
};

// Conditional p(j|i) for one point from its k squared distances (nearest first):
// writes p[k] (sums to 1); returns the bandwidth beta = 1/(2 sigma^2) found.
double calibrate_row(const float* d2, int64_t k, double perplexity, double* p);

// Collective. X [N,D] is held whole by every rank; `own` is this rank's row range.
// knn_idx (optional, [own.size(),k]) receives the neighbour lists for reuse. `knn` picks the
// search (Auto resolved against N); with Hnsw every rank builds the graph over all N rows
// and queries its own rows only. knn_used / knn_seconds (optional) receive the search that
// ran and its wall time on this rank.
SparseRows build_affinities(const Comm& comm, const float* X, int64_t N, int64_t D,
                            double perplexity, Range own, std::vector<int32_t>* knn_idx = nullptr,
                            int64_t* knn_k = nullptr, KnnMethod knn = KnnMethod::Exact,
                            KnnMethod* knn_used = nullptr, double* knn_seconds = nullptr);

}  // namespace sieve::embed
