// Exact k nearest neighbours by blocked distance GEMM.
//
// d(i,j)^2 = ||x_i||^2 - 2 x_i.x_j + ||x_j||^2: the cross term for a block of query rows
// against a block of reference rows is one cblas_sgemm (BLAS threads), then every query
// row keeps its partial top-k in a bounded max-heap (OpenMP over rows). For D <= 4 (the
// embedding itself) a sweep is used instead: points sorted by their first coordinate, each
// query scans outwards until the coordinate gap alone exceeds its current k-th distance
// (exact; about N sqrt(N) work for 2-D data instead of N^2).
// Results are sorted by (distance, index), so ties are broken the same way on any rank
// count or thread count; the query point itself is excluded.
#pragma once
#include <cstdint>

namespace sieve::embed {

// For query rows [q0,q1) of X [N,D] (row-major), the k nearest other rows among all N:
// idx [(q1-q0),k] and squared distances d2 [(q1-q0),k], nearest first. Needs k <= N-1.
void knn_exact(const float* X, int64_t N, int64_t D, int64_t k, int64_t q0, int64_t q1,
               int32_t* idx, float* d2);

// The streaming form, for references that arrive block by block (a distributed search):
// merges the reference rows R [nr,D] into the running lists of the query rows Q [nq,D].
// Rows carry global ids qid [nq], rid [nr] (ids < 2^31); a reference with the query's own
// id is skipped. idx/d2 [nq,k] hold the best so far, nearest first, empty slots as index -1
// (fill them with -1 before the first block). The lists are the k smallest (distance, id)
// pairs over all blocks merged, whatever the order of the blocks.
void knn_merge_block(const float* Q, const int64_t* qid, int64_t nq, const float* R,
                     const int64_t* rid, int64_t nr, int64_t D, int64_t k, int32_t* idx, float* d2);

// Same for an arbitrary list of query rows (for D <= 4 the sweep, else the GEMM path).
void knn_queries(const float* X, int64_t N, int64_t D, int64_t k, const int64_t* queries,
                 int64_t nq, int32_t* idx, float* d2);

}  // namespace sieve::embed
