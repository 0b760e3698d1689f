// The knn detector over row-distributed features (detect.hpp).
//
// Search: exact (knn_merge_block, every query against every row) below the t-SNE's
// crossover (embed::resolve_knn_method: 200,000 rows), the inverted file from there on
// (embed::IvfBlockSearch: each rank's cells over its own rows, every piece of references
// searched only against the queries of the cells near it). Exact at 1.28 M x 512 is 1.7e15
// flops (hours on 2 cores); the inverted file scans kKnnIvfProbes of ~sqrt(m) cells a query.
// With it the lists depend on the rank count (each rank's cells are its own); exact, they
// do not.
//
// Memory: a rank holds its own rows [m, d] (the queries, and its part of the references)
// plus two message pieces (piece_bytes); nobody holds the whole [n, d]. Every rank needs
// every other rank's rows once as references: in step s = 1..P-1 rank r sends its rows to
// r+s and receives those of r-s (mod P), piece by piece, the next piece in flight while the
// current one is merged into the running top-k lists. Sending from the owner each time (a
// shifted pairwise exchange) rather than passing blocks along a ring keeps the memory at one
// block plus the pieces: a ring forwards what it received, so it must hold a second block.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "cluster/detect.hpp"
#include "embed/knn.hpp"
#include "embed/knn_ivf_blocks.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace sieve::cluster {

namespace {

constexpr int kTag = 4712;

// Cosine distance: the penultimate features of a ReLU network differ mostly in scale between
// easy and hard samples, which should not decide who the neighbours are.
void normalise_rows(float* x, int64_t m, int d) {
  for (int64_t i = 0; i < m; ++i) {
    float* xi = x + i * d;
    double s = 0;
    for (int j = 0; j < d; ++j) s += double(xi[j]) * xi[j];
    const float inv = s > 0 ? float(1.0 / std::sqrt(s)) : 0.0f;
    for (int j = 0; j < d; ++j) xi[j] *= inv;
  }
}

}  // namespace

Detection detect_knn_vote(const Comm& comm, RowShare& f, int64_t n, const int32_t* labels, int k,
                          double threshold, int64_t piece_bytes, const KnnSearch& search) {
  SIEVE_CHECK(k >= 1 && int64_t(k) < n, "knn detector: k = ", k, " needs 1 <= k < samples (", n,
              ")");
  SIEVE_CHECK(n <= std::numeric_limits<int32_t>::max(), "knn detector: ", n,
              " samples; at most 2^31 - 1");
  const int d = f.width;
  const int64_t m = f.size();
  SIEVE_ASSERT(d > 0 && f.x.size() == size_t(m) * size_t(d), "knn share: ", f.x.size(),
               " values for ", m, " rows of ", d);
  normalise_rows(f.x.data(), m, d);
  // The inverted file reorders the rows of the share (cell by cell) before anyone learns
  // their order.
  std::optional<embed::IvfBlockSearch> ivf;
  if (embed::resolve_knn_method(search.method, n) != embed::KnnMethod::Exact) {
    embed::IvfParams params;
    params.probes = search.probes;
    // The work a query, probes x the mean cell, held however unequal the cells come out.
    params.probe_rows = search.probes * m / embed::ivf_lists(std::max<int64_t>(m, 1), params);
    ivf.emplace(f.x.data(), f.rows.data(), m, d, k, params);
    log::infof("knn detector: inverted file over ", n, " rows (rank 0: ", m, " rows in ",
               ivf->lists(), " cells, the largest ", ivf->largest_cell(), "; ", ivf->mean_probes(),
               " cells probed a cell, ", int64_t(ivf->mean_scanned()), " rows a query)");
  }
  // Who holds which rows: the global rows of every rank's share, in rank order ([n] int64).
  const std::vector<int64_t> counts = comm.allgather<int64_t>(m);
  const std::vector<int64_t> all_rows = comm.allgatherv(f.rows);
  std::vector<int64_t> offset(counts.size() + 1, 0);
  for (size_t r = 0; r < counts.size(); ++r) offset[r + 1] = offset[r] + counts[r];
  SIEVE_ASSERT(offset.back() == n, "knn shares hold ", offset.back(), " rows of ", n);

  std::vector<int32_t> idx(size_t(m) * k, -1);  // [m, k] running lists
  std::vector<float> d2(size_t(m) * k, std::numeric_limits<float>::infinity());
  const int P = comm.size(), me = comm.rank();
  const int64_t piece = std::max<int64_t>(1, piece_bytes / (int64_t(sizeof(float)) * d));
  std::vector<float> buf[2];  // [piece, d] each: the piece being merged, the next in flight
  if (P > 1)
    for (auto& b : buf)
      b.resize(size_t(std::min(piece, *std::max_element(counts.begin(), counts.end()))) * d);
  // References R [nr, d] with global rows rid into the running lists, by the chosen search.
  auto merge = [&](const float* R, const int64_t* rid, int64_t nr) {
    if (ivf)
      ivf->merge(R, rid, nr, idx.data(), d2.data());
    else
      embed::knn_merge_block(f.x.data(), f.rows.data(), m, R, rid, nr, d, k, idx.data(), d2.data());
  };
  if (ivf)
    ivf->merge_own(idx.data(), d2.data());
  else
    merge(f.x.data(), f.rows.data(), m);
  for (int s = 1; s < P; ++s) {
    const int dst = (me + s) % P, src = (me - s + P) % P;
    std::vector<Request> sends;
    for (int64_t a = 0; a < m; a += piece)
      sends.push_back(
          comm.isend(f.x.data() + a * d, size_t(std::min(piece, m - a) * d), dst, kTag));
    const int64_t ms = counts[size_t(src)], pieces = (ms + piece - 1) / piece;
    Request recv[2];
    auto rows_of = [&](int64_t p) { return std::min(piece, ms - p * piece); };
    auto post = [&](int64_t p) {
      recv[p % 2] = comm.irecv(buf[p % 2].data(), size_t(rows_of(p) * d), src, kTag);
    };
    if (pieces > 0) post(0);
    for (int64_t p = 0; p < pieces; ++p) {
      if (p + 1 < pieces) post(p + 1);
      recv[p % 2].wait();
      merge(buf[p % 2].data(), all_rows.data() + offset[size_t(src)] + p * piece, rows_of(p));
    }
    wait_all(sends);
  }

  if (search.lists) *search.lists = idx;
  Detection det;
  det.method = "knn";
  // The report shows this: say when the neighbours were searched approximately.
  det.inputs =
      ivf ? cat("penultimate features (cosine k-NN, inverted file: ", search.probes, " probes)")
          : "penultimate features (cosine k-NN)";
  det.score.assign(size_t(n), 0.0f);
  for (int64_t q = 0; q < m; ++q) {
    const int64_t i = f.rows[size_t(q)];
    int disagree = 0;
    for (int j = 0; j < k; ++j) {
      const int32_t nb = idx[size_t(q) * k + j];
      SIEVE_ASSERT(nb >= 0, "knn: row ", i, " has fewer than ", k, " neighbours");
      disagree += labels[nb] != labels[i];
    }
    det.score[size_t(i)] = float(disagree) / float(k);
  }
  comm.allreduce_sum(det.score.data(), det.score.size());  // disjoint rows: the sum gathers
  det.flag.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) det.flag[size_t(i)] = double(det.score[size_t(i)]) > threshold;
  return det;
}

Detection detect_knn_vote(const Comm& comm, const float* x, int64_t n, int d, const int32_t* labels,
                          int k, double threshold, const KnnSearch& search) {
  const Range r = block_range(n, comm.rank(), comm.size());
  RowShare f;
  f.width = d;
  f.x.assign(x + r.begin * d, x + r.end * d);
  for (int64_t i = r.begin; i < r.end; ++i) f.rows.push_back(i);
  return detect_knn_vote(comm, f, n, labels, k, threshold, kKnnPieceBytes, search);
}

}  // namespace sieve::cluster
