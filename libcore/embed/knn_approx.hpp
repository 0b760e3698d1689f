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
#include <vector>

namespace sieve::embed {

enum class KnnMethod { Auto, Exact, Hnsw, Ivf };
KnnMethod parse_knn_method(const std::string& name);  // "auto", "exact", "hnsw", "ivf"
const char* knn_method_name(KnnMethod m);

// `auto` switches to the inverted-file search (ivf) from this many points on. Whole t-SNE runs
// on the benchmark's 10 clusters in 50-D (docs/embed.md): at 200 k ivf took 55 s against
// exact's 89 s and kept 0.0342 of the 10-NN against 0.0330; at 300 k 82 s against 178 s,
// 0.0260 against 0.0257; at 1 M 6 m 12 s against ~40 min. At 100 k it saved only 10 s and
// kept 2 % fewer neighbours (0.0584 against 0.0597), so exact stays below 200 k.
constexpr int64_t kApproxKnnMinPoints = 200000;
// Auto -> Exact below kApproxKnnMinPoints, Ivf from there on; other methods unchanged.
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

// Inverted-file search over k-means cells, cell-blocked: k-means (faiss, Debian libfaiss-dev)
// cuts the rows into `lists` cells of about sqrt N rows; the rows of a cell are searched
// together, by the exact GEMM search of knn.hpp (knn_merge_block), against the rows of the
// `probes` cells whose centres are nearest to the cell's centre (the cell itself included).
// A row whose true neighbour lies in a cell outside that set misses it: the search is
// approximate, its recall set by `probes`. Batching the queries of a cell turns the scan
// into GEMMs (~20x faster a candidate than faiss's per-query IVF scan on this VM).
//
// Determinism: the k-means sample and initial centres come from `seed`; faiss's
// assignment is a GEMM per row and its centre sums are split by centre, not by row, so
// the cells do not depend on the thread count; a row's answer depends on its cell alone,
// so neither the thread count nor the query split changes it, and every rank computes the
// same cells (test_embed_knn_approx, test_embed_mpi).
struct IvfParams {
  int64_t lists = 0;            // 0: round(sqrt N), at most N / 64 (at least 1)
  int64_t probes = 0;           // 0: kIvfDefaultProbes, at most lists
  int64_t train_per_list = 64;  // k-means sample: this many rows per list (at most N)
  int iterations = 10;          // k-means iterations
  // ivf_cells only (knn_ivf ignores it): 0, or a row budget for a probe set: cells are taken
  // nearest first until they hold this many rows (at most 2 x probes cells, more only to
  // reach min_probe_rows), so that a large cell's queries probe fewer cells and the work
  // stays near budget x N however unequal the cells (k-means on tight classes makes cells
  // of one to several classes).
  int64_t probe_rows = 0;
  uint64_t seed = 1234;
};
constexpr int64_t kIvfDefaultProbes = 64;
int64_t ivf_lists(int64_t N, const IvfParams& params = {});  // the list count used for N

// The inverted file's cells over the rows of X [N, D] (the k-means and probe sets of
// knn_ivf): rows of cell c are rows[start[c], start[c+1]) (ascending); its probe set is
// probe[probe_start[c], probe_start[c+1]), itself first, then the `probes` - 1 cells whose
// centres (means of their rows) are nearest to its own (or, with params.probe_rows, as many
// as hold that budget), then, only where those cells hold fewer than `min_probe_rows` rows
// together, the next nearest until they do (so that a search that needs k others can ask
// for k + 1 and never come back short).
// centres [lists, D]: the k-means centres a row is assigned to (its nearest; empty when
// lists == 1, every row in cell 0).
struct IvfCells {
  int64_t lists = 1;
  std::vector<float> centres;        // [lists, D]
  std::vector<int64_t> start;        // [lists + 1]
  std::vector<int64_t> rows;         // [N]
  std::vector<int64_t> probe_start;  // [lists + 1]
  std::vector<int32_t> probe;        // [probe_start[lists]]
};
IvfCells ivf_cells(const float* X, int64_t N, int64_t D, const IvfParams& params = {},
                   int64_t min_probe_rows = 0);

// Same contract as knn_exact: for query rows [q0,q1) of X [N,D] (row-major), the k nearest
// other rows among all N, idx [(q1-q0),k] and squared distances d2 [(q1-q0),k], nearest
// first, ties by index, the query itself excluded; approximate (a true neighbour may be
// replaced by a slightly farther row). The distances are recomputed from X in double, so
// they do not depend on hnswlib's SIMD kernel. Needs k <= N-1 and N < 2^31.
void knn_hnsw(const float* X, int64_t N, int64_t D, int64_t k, int64_t q0, int64_t q1, int32_t* idx,
              float* d2, const HnswParams& params = {});

// knn_hnsw's contract, searched through the inverted file above.
void knn_ivf(const float* X, int64_t N, int64_t D, int64_t k, int64_t q0, int64_t q1, int32_t* idx,
             float* d2, const IvfParams& params = {});

// An order of the rows that keeps near rows near in memory: seeded k-means (faiss) of the
// rows into about sqrt N cells, of the cell centres into about sqrt(cells) groups, then the
// rows group by group, cell by cell, in their original order inside a cell. t-SNE's
// attractive loop gathers the positions of each row's ~130 neighbours every iteration; in
// this order they sit in a few cells of one group instead of anywhere in [0, N)
// (docs/embed.md has the effect on the loop's time). Deterministic for a given X (any
// thread count). Returns the permutation: order[t] is the row to place t-th.
std::vector<int64_t> locality_order(const float* X, int64_t N, int64_t D, uint64_t seed = 1234);
// `auto` reorders from this many points on (the positions outgrow a core's L2 cache).
constexpr int64_t kLocalityOrderMinPoints = 100000;

// knn_exact, knn_hnsw or knn_ivf by `m` (Auto resolved against N).
void knn_search(KnnMethod m, const float* X, int64_t N, int64_t D, int64_t k, int64_t q0,
                int64_t q1, int32_t* idx, float* d2);

}  // namespace sieve::embed
