// The inverted-file search of knn_approx.hpp (knn_ivf) for queries that stay where they are
// and references that arrive block by block: the distributed knn noise detector
// (cluster/detect_knn.cpp), where each rank's own rows are its queries and every rank's rows,
// streamed to it in pieces, its references. knn_ivf needs all N rows in one array; here no
// rank ever holds more than its own rows and one piece of another's.
//
// The cells are built over the query rows alone (ivf_cells: seeded k-means into ~sqrt m
// cells, each cell's probe set the cells nearest to it). A reference row goes to the cell of
// its nearest k-means centre, as a query row does; the queries of cell c meet the reference
// rows of the cells in c's probe set, one GEMM search (knn_merge_block) per cell and block.
// So the candidates of a query are the rows of its probe set's cells (which makes the
// search approximate), the same whatever the blocks and their order, but for a reference row
// as near to two centres as rounding can tell (faiss places a block by a GEMM, or by a
// direct loop under 20 rows; test_embed_knn_approx bounds it). Every probe set
// holds at least k + 1 query rows (ivf_cells' min_probe_rows), so the merge of the queries
// with themselves (merge_own) alone fills every list: no list can come back short.
//
// Determinism: the cells depend on the query rows and the seed only; the queries of a cell
// are merged by one thread; so the lists do not depend on the thread count. They do depend
// on which rows are the queries (on a rank count: each rank builds its own cells).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "embed/knn_approx.hpp"

namespace sieve::log {
class Progress;
}
namespace faiss {
struct IndexFlatL2;
}

namespace sieve::embed {

class IvfBlockSearch {
 public:
  // Builds the cells over the query rows Q [m, D] (global ids qid [m]) for lists of k and
  // reorders Q and qid in place, cell by cell, so that a cell's queries are one contiguous
  // block (no copy of the queries per block merged). The lists passed to merge() follow
  // this order. Q and qid must outlive the object.
  IvfBlockSearch(float* Q, int64_t* qid, int64_t m, int64_t D, int64_t k,
                 const IvfParams& params = {});
  ~IvfBlockSearch();
  IvfBlockSearch(const IvfBlockSearch&) = delete;
  IvfBlockSearch& operator=(const IvfBlockSearch&) = delete;

  // The lists idx/d2 [m, k] (knn_merge_block's contract: fill with -1 / +inf before the
  // first merge; nearest first, ties by id, a reference with a query's own id skipped).
  // Merges the query rows themselves as references (with progress lines: on one rank this
  // is the whole search).
  void merge_own(int32_t* idx, float* d2) const;
  // Merges reference rows R [nr, D] with global ids rid [nr] (ids never a query's, except
  // for the query itself, which is skipped).
  void merge(const float* R, const int64_t* rid, int64_t nr, int32_t* idx, float* d2) const;

  int64_t lists() const { return cells_.lists; }
  // Mean number of probed cells per cell (the nominal probes, or more where cells are small).
  double mean_probes() const;
  // Mean number of query rows a query meets in merge_own (the work: unequal cells make it
  // larger than probes x m / lists).
  double mean_scanned() const;
  int64_t largest_cell() const;

 private:
  // Queries of every cell against the references R whose rows, cell by cell, are
  // rrows[rstart[c], rstart[c+1]).
  void search(const float* R, const int64_t* rid, const std::vector<int64_t>& rstart,
              const std::vector<int64_t>& rrows, int32_t* idx, float* d2,
              log::Progress* progress) const;

  const float* Q_;
  const int64_t* qid_;
  int64_t m_, D_, k_;
  IvfCells cells_;                             // over the reordered queries: rows = 0..m-1
  std::unique_ptr<faiss::IndexFlatL2> index_;  // the k-means centres, to place references
};

}  // namespace sieve::embed
