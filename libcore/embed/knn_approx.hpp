// Approximate k nearest neighbours through an HNSW graph (hnswlib, Debian libhnswlib-dev),
// and the choice between it and the exact search of knn.hpp for the t-SNE affinities.
//
// The exact search costs 2 N^2 D flops: 4.5 s at 50,000 x 50 on 2 cores, about 30 min at
// 1,000,000. The HNSW graph (Malkov & Yashunin) answers a query in roughly log N hops of
// ef_search candidates each, so its cost grows as about N log N, but with a large constant
// (random rows, cache misses): on 50-D clusters at recall >= 0.98 it catches up with the
// exact search only near 1 M points (docs/embed.md).
//
// Determinism. hnswlib's graph depends on the insertion order and on each point's random
// level; inserting from several threads makes both depend on the scheduling. The graph is
// therefore built by one thread, rows in index order, levels from a fixed seed: the same
// input gives the same graph on every run, rank and thread count. The queries (read-only)
// run on all OpenMP threads, each query's answer depending on the graph alone. A rank
// builds the graph over all N rows and queries only its own, so the lists do not depend
// on the rank count either (the build is repeated on every rank; see docs/embed.md).
#pragma once
#include <cstdint>
#include <string>

namespace sieve::embed {

enum class KnnMethod { Auto, Exact, Hnsw };
KnnMethod parse_knn_method(const std::string& name);  // "auto", "exact", "hnsw"
const char* knn_method_name(KnnMethod m);

// `auto` switches to HNSW from this many points on (the crossover estimated from
// measurements at 100k and 200k, docs/embed.md).
constexpr int64_t kHnswMinPoints = 1000000;
// Auto -> Exact below kHnswMinPoints, Hnsw from there on; other methods unchanged.
KnnMethod resolve_knn_method(KnnMethod m, int64_t N);

// Graph and search sizes, chosen by measurement on 10 Gaussian clusters in 50-D (the
// benchmark data, whose 50-D isotropic clusters are the hard case for a graph search):
// recall of the k = 90 lists against the exact ones in docs/embed.md.
struct HnswParams {
  int64_t M = 32;                 // links per node (2M on the bottom layer)
  int64_t ef_construction = 100;  // candidate list while inserting
  int64_t ef_search = 250;        // candidate list while querying; raised to k + 1 if below
  uint64_t seed = 100;            // hnswlib's level generator
};

// Same contract as knn_exact: for query rows [q0,q1) of X [N,D] (row-major), the k nearest
// other rows among all N, idx [(q1-q0),k] and squared distances d2 [(q1-q0),k], nearest
// first, ties by index, the query itself excluded; approximate (a true neighbour may be
// replaced by a slightly farther row). The distances are recomputed from X in double, so
// they do not depend on hnswlib's SIMD kernel. Needs k <= N-1 and N < 2^31.
void knn_hnsw(const float* X, int64_t N, int64_t D, int64_t k, int64_t q0, int64_t q1, int32_t* idx,
              float* d2, const HnswParams& params = {});

// knn_exact or knn_hnsw by `m` (Auto resolved against N).
void knn_search(KnnMethod m, const float* X, int64_t N, int64_t D, int64_t k, int64_t q0,
                int64_t q1, int32_t* idx, float* d2);

}  // namespace sieve::embed
