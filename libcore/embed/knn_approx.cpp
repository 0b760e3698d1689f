#include "embed/knn_approx.hpp"

#include <faiss/Clustering.h>
#include <faiss/IndexFlat.h>
#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include "embed/knn.hpp"
#include "embed/parallel.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/threads.hpp"

#include <omp.h>  // OpenMP is required by the build (CMakeLists.txt)

namespace sieve::embed {

KnnMethod parse_knn_method(const std::string& name) {
  if (name == "auto") return KnnMethod::Auto;
  if (name == "exact") return KnnMethod::Exact;
  if (name == "hnsw") return KnnMethod::Hnsw;
  if (name == "ivf") return KnnMethod::Ivf;
  throw UsageError(cat("unknown k-NN method '", name, "' (auto, exact, hnsw, ivf)"));
}

const char* knn_method_name(KnnMethod m) {
  switch (m) {
    case KnnMethod::Auto:
      return "auto";
    case KnnMethod::Exact:
      return "exact";
    case KnnMethod::Hnsw:
      return "hnsw";
    case KnnMethod::Ivf:
      return "ivf";
  }
  return "?";
}

KnnMethod resolve_knn_method(KnnMethod m, int64_t N) {
  if (m != KnnMethod::Auto) return m;
  return N >= kApproxKnnMinPoints ? KnnMethod::Ivf : KnnMethod::Exact;
}

namespace {

// Progress lines come from the team's first thread only (the others count into the same
// atomic), so that two threads never write the line at once.
void progress_from_first_thread(log::Progress& progress, int64_t n) {
  if (omp_get_thread_num() == 0) progress.update(n);
}

void check_search_args(int64_t N, int64_t k, int64_t q0, int64_t q1) {
  SIEVE_CHECK(k >= 1 && k <= N - 1, "k-NN: k = ", k, " needs 1 <= k <= N-1 (N = ", N, ")");
  SIEVE_CHECK(N < int64_t(std::numeric_limits<int32_t>::max()), "k-NN: ", N,
              " points exceed the int32 neighbour ids");
  SIEVE_CHECK(0 <= q0 && q0 <= q1 && q1 <= N, "k-NN: query rows [", q0, ",", q1, ") outside [0,", N,
              ")");
}

// One query's answer from an approximate search's candidates (any order; the row itself
// and -1 entries are skipped): distances recomputed from X in double, so that they do not
// depend on the library's SIMD kernel, then (distance, index) order as knn_exact, the
// farthest dropped when the row itself was not among the candidates. False when fewer than
// k other rows came back (the caller answers that row exactly).
template <class Id>
bool finish_row(const float* X, int64_t D, int64_t k, int64_t i, const Id* cand, int64_t ncand,
                std::vector<std::pair<float, int32_t>>& hits, int32_t* idx_row, float* d2_row) {
  const float* xi = X + i * D;
  hits.clear();
  for (int64_t t = 0; t < ncand; ++t) {
    const int64_t j = int64_t(cand[t]);
    if (j < 0 || j == i) continue;
    double s = 0.0;
    for (int64_t c = 0; c < D; ++c) {
      const double u = double(xi[c]) - double(X[j * D + c]);
      s += u * u;
    }
    hits.emplace_back(float(s), int32_t(j));
  }
  if (int64_t(hits.size()) < k) return false;
  std::sort(hits.begin(), hits.end());
  for (int64_t t = 0; t < k; ++t) {
    idx_row[t] = hits[size_t(t)].second;
    d2_row[t] = hits[size_t(t)].first;
  }
  return true;
}

// A search that ends with fewer than k other rows (a graph region it could not leave, many
// exact duplicates, probed lists too small) is answered exactly; on clustered data this
// did not happen.
void answer_short_rows_exactly(const char* what, std::vector<int64_t>& short_rows, const float* X,
                               int64_t N, int64_t D, int64_t k, int64_t q0, int64_t nq,
                               int32_t* idx, float* d2) {
  if (short_rows.empty()) return;
  std::sort(short_rows.begin(), short_rows.end());
  log::infof("k-NN (", what, "): ", short_rows.size(), " of ", nq,
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

}  // namespace

void knn_hnsw(const float* X, int64_t N, int64_t D, int64_t k, int64_t q0, int64_t q1, int32_t* idx,
              float* d2, const HnswParams& params) {
  check_search_args(N, k, q0, q1);
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
    std::vector<int64_t> cand, my_short;
#pragma omp for schedule(dynamic, 64) nowait
    for (int64_t q = 0; q < nq; ++q) {
      const int64_t i = q0 + q;
      cand.clear();
      try {
        for (auto found = index.searchKnn(X + i * D, size_t(k + 1)); !found.empty(); found.pop())
          cand.push_back(int64_t(found.top().second));
      } catch (...) {
#pragma omp critical(sieve_knn_hnsw_failure)
        if (!failure) failure = std::current_exception();
        cand.clear();
      }
      if (!finish_row(X, D, k, i, cand.data(), int64_t(cand.size()), hits, idx + q * k,
                      d2 + q * k)) {
        my_short.push_back(i);
        continue;
      }
      const int64_t n = done.fetch_add(1, std::memory_order_relaxed) + 1;
      progress_from_first_thread(progress, n);
    }
#pragma omp critical(sieve_knn_hnsw_short)
    short_rows.insert(short_rows.end(), my_short.begin(), my_short.end());
  }
  if (failure) std::rethrow_exception(failure);
  progress.update(nq);
  progress.finish();
  answer_short_rows_exactly("hnsw", short_rows, X, N, D, k, q0, nq, idx, d2);
}

namespace {

// Seeded k-means of the n rows of X [n,D] into `cells` centres; returns each row's centre,
// and the centres [cells, D] in `centres_out` when given.
std::vector<faiss::Index::idx_t> kmeans_cells(const float* X, int64_t n, int64_t D, int64_t cells,
                                              uint64_t seed, int iterations = 8,
                                              int64_t train_per_cell = 64,
                                              std::vector<float>* centres_out = nullptr) {
  faiss::ClusteringParameters cp;
  cp.niter = iterations;
  cp.seed = int(seed);
  cp.max_points_per_centroid = int(std::max<int64_t>(1, train_per_cell));
  cp.min_points_per_centroid = 1;
  faiss::Clustering kmeans(int(D), size_t(cells), cp);
  faiss::IndexFlatL2 centres(D);
  kmeans.train(n, X, centres);
  std::vector<faiss::Index::idx_t> cell_of(static_cast<size_t>(n));
  std::vector<float> dist(static_cast<size_t>(n));
  centres.search(n, X, 1, dist.data(), cell_of.data());
  if (centres_out) *centres_out = kmeans.centroids;
  return cell_of;
}

double dist2_rows(const float* a, const float* b, int64_t D) {
  double s = 0.0;
  for (int64_t c = 0; c < D; ++c) s += (double(a[c]) - b[c]) * (double(a[c]) - b[c]);
  return s;
}

// Mean of each cell's rows [cells, D] (0 for an empty cell), summed in row order.
std::vector<float> cell_centres(const float* X, int64_t N, int64_t D,
                                const std::vector<faiss::Index::idx_t>& cell_of, int64_t cells) {
  std::vector<double> sum(static_cast<size_t>(cells * D), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(cells), 0);
  for (int64_t i = 0; i < N; ++i) {
    const int64_t c = cell_of[size_t(i)];
    ++count[size_t(c)];
    for (int64_t j = 0; j < D; ++j) sum[size_t(c * D + j)] += X[i * D + j];
  }
  std::vector<float> centre(sum.size(), 0.f);
  for (int64_t c = 0; c < cells; ++c)
    for (int64_t j = 0; j < D; ++j)
      if (count[size_t(c)] > 0)
        centre[size_t(c * D + j)] = float(sum[size_t(c * D + j)] / double(count[size_t(c)]));
  return centre;
}

}  // namespace

int64_t ivf_lists(int64_t N, const IvfParams& params) {
  if (params.lists > 0) return std::min(params.lists, N);
  const int64_t by_size = std::llround(std::sqrt(double(N)));
  return std::max<int64_t>(1, std::min(by_size, N / 64));
}

namespace {
int64_t params_probes(int64_t lists, const IvfParams& params) {
  return std::min(lists, params.probes > 0 ? params.probes : kIvfDefaultProbes);
}
}  // namespace

IvfCells ivf_cells(const float* X, int64_t N, int64_t D, const IvfParams& params,
                   int64_t min_probe_rows) {
  IvfCells cells;
  const int64_t lists = N > 0 ? ivf_lists(N, params) : 1;
  const int64_t probes = params_probes(lists, params);
  cells.lists = lists;
  const std::vector<faiss::Index::idx_t> cell_of =
      lists > 1 ? kmeans_cells(X, N, D, lists, params.seed, params.iterations,
                               params.train_per_list, &cells.centres)
                : std::vector<faiss::Index::idx_t>(static_cast<size_t>(N), 0);
  // Rows by cell (CSR, rows ascending inside a cell), and each cell's probe set: the
  // `probes` cells whose centres are nearest to its centre, itself first.
  std::vector<int64_t>&start = cells.start, &rows = cells.rows;
  start.assign(size_t(lists) + 1, 0);
  rows.resize(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) ++start[size_t(cell_of[size_t(i)]) + 1];
  for (int64_t c = 0; c < lists; ++c) start[size_t(c + 1)] += start[size_t(c)];
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < N; ++i) rows[size_t(fill[size_t(cell_of[size_t(i)])]++)] = i;
  }
  const std::vector<float> centre = cell_centres(X, N, D, cell_of, lists);
  // With a row budget, cells are taken nearest first until they hold it, from up to twice
  // the nominal count of candidates (more only through the sweep below).
  const int64_t budget = params.probe_rows > 0 ? params.probe_rows : 0;
  const int64_t want = budget > 0 ? std::min(lists, 2 * probes) : probes;
  std::vector<int32_t> near(static_cast<size_t>(lists * (want - 1)));
  {
    std::vector<float> nd(near.size());
    if (want > 1) knn_exact(centre.data(), lists, D, want - 1, 0, lists, near.data(), nd.data());
  }
  const int64_t enough = min_probe_rows;
  auto rows_in = [&](int64_t c) { return start[size_t(c + 1)] - start[size_t(c)]; };
  cells.probe_start.assign(1, 0);
  for (int64_t c = 0; c < lists; ++c) {
    cells.probe.push_back(int32_t(c));
    int64_t held = rows_in(c);
    for (int64_t p = 0; p < want - 1 && !(budget > 0 && held >= budget); ++p) {
      cells.probe.push_back(near[size_t(c * (want - 1) + p)]);
      held += rows_in(cells.probe.back());
    }
    if (held < enough && int64_t(cells.probe.size()) - cells.probe_start.back() < lists) {
      // Too few rows in reach (small cells, or few rows in all): add the next nearest cells
      // until there are enough, so that no row's list stays short. Rare, so one distance
      // sweep over the centres per such cell.
      std::vector<std::pair<double, int32_t>> by_dist;
      for (int64_t o = 0; o < lists; ++o)
        by_dist.emplace_back(dist2_rows(centre.data() + c * D, centre.data() + o * D, D),
                             int32_t(o));
      std::sort(by_dist.begin(), by_dist.end());
      const std::set<int32_t> taken(cells.probe.begin() + cells.probe_start.back(),
                                    cells.probe.end());
      for (const auto& [dd, o] : by_dist) {
        if (held >= enough) break;
        if (taken.count(o)) continue;
        cells.probe.push_back(o);
        held += rows_in(o);
      }
    }
    cells.probe_start.push_back(int64_t(cells.probe.size()));
  }
  return cells;
}

void knn_ivf(const float* X, int64_t N, int64_t D, int64_t k, int64_t q0, int64_t q1, int32_t* idx,
             float* d2, const IvfParams& params) {
  check_search_args(N, k, q0, q1);
  const auto t0 = std::chrono::steady_clock::now();
  const IvfCells cells = ivf_cells(X, N, D, params);
  const int64_t lists = cells.lists, probes = params_probes(cells.lists, params);
  const std::vector<int64_t>&start = cells.start, &rows = cells.rows;
  log::infof("k-NN (ivf): ", lists, " k-means cells of ", N, " rows in ",
             log::format_duration(
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()),
             "; each cell's rows search the rows of the ", probes, " cells nearest to it");
  // Cell by cell: the cell's query rows against its probe set's rows, one GEMM search each
  // (knn_merge_block, single-threaded inside; the cells are spread over the threads). A
  // query's answer depends on its cell alone: the same for any thread count or query split.
  const int64_t nq = q1 - q0;
  std::vector<int64_t> short_rows;
  std::atomic<int64_t> done{0};
  log::Progress progress("k-NN (ivf): queries", nq, "points", 10.0);
  ScopedSerialBlas serial_blas;
#pragma omp parallel if (N >= kMinPointsForThreads)
  {
    std::vector<float> Q, R;
    std::vector<int64_t> qid, rid, my_short;
    std::vector<int32_t> li;
    std::vector<float> ld;
    std::vector<std::pair<float, int32_t>> hits;
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t c = 0; c < lists; ++c) {
      qid.clear();
      for (int64_t t = start[size_t(c)]; t < start[size_t(c + 1)]; ++t)
        if (rows[size_t(t)] >= q0 && rows[size_t(t)] < q1) qid.push_back(rows[size_t(t)]);
      if (qid.empty()) continue;
      rid.clear();
      for (int64_t p = cells.probe_start[size_t(c)]; p < cells.probe_start[size_t(c + 1)]; ++p) {
        const int64_t pc = cells.probe[size_t(p)];
        rid.insert(rid.end(), rows.begin() + start[size_t(pc)],
                   rows.begin() + start[size_t(pc + 1)]);
      }
      const int64_t nqc = int64_t(qid.size()), nr = int64_t(rid.size());
      Q.resize(size_t(nqc * D));
      R.resize(size_t(nr * D));
      for (int64_t t = 0; t < nqc; ++t)
        std::copy(X + qid[t] * D, X + (qid[t] + 1) * D, Q.begin() + t * D);
      for (int64_t t = 0; t < nr; ++t)
        std::copy(X + rid[t] * D, X + (rid[t] + 1) * D, R.begin() + t * D);
      li.assign(size_t(nqc * k), -1);
      ld.assign(li.size(), std::numeric_limits<float>::infinity());
      knn_merge_block(Q.data(), qid.data(), nqc, R.data(), rid.data(), nr, D, k, li.data(),
                      ld.data());
      for (int64_t t = 0; t < nqc; ++t) {
        const int64_t q = qid[t] - q0;
        if (!finish_row(X, D, k, qid[t], li.data() + t * k, k, hits, idx + q * k, d2 + q * k))
          my_short.push_back(qid[t]);
      }
      const int64_t n = done.fetch_add(nqc, std::memory_order_relaxed) + nqc;
      progress_from_first_thread(progress, n);
    }
#pragma omp critical(sieve_knn_ivf_short)
    short_rows.insert(short_rows.end(), my_short.begin(), my_short.end());
  }
  progress.update(nq);
  progress.finish();
  answer_short_rows_exactly("ivf", short_rows, X, N, D, k, q0, nq, idx, d2);
}

std::vector<int64_t> locality_order(const float* X, int64_t N, int64_t D, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(N, 0)));
  std::iota(order.begin(), order.end(), int64_t(0));
  const int64_t cells = ivf_lists(N);  // the same cell count as the ivf search's
  if (cells < 2) return order;
  // Two levels: rows into ~sqrt N cells, and the cells' centres into ~sqrt(cells) groups,
  // so that the cells of one region of space (whose rows are each other's neighbours) are
  // also adjacent; one level alone leaves them in an arbitrary order.
  const std::vector<faiss::Index::idx_t> cell_of = kmeans_cells(X, N, D, cells, seed);
  const std::vector<float> centre = cell_centres(X, N, D, cell_of, cells);
  const int64_t groups = std::llround(std::sqrt(double(cells)));
  std::vector<faiss::Index::idx_t> group_of(static_cast<size_t>(cells), 0);
  if (groups >= 2) group_of = kmeans_cells(centre.data(), cells, D, groups, seed + 1);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const int64_t ca = cell_of[size_t(a)], cb = cell_of[size_t(b)];
    const int64_t ga = group_of[size_t(ca)], gb = group_of[size_t(cb)];
    return ga != gb ? ga < gb : ca < cb;
  });
  return order;
}

void knn_search(KnnMethod m, const float* X, int64_t N, int64_t D, int64_t k, int64_t q0,
                int64_t q1, int32_t* idx, float* d2) {
  switch (resolve_knn_method(m, N)) {
    case KnnMethod::Hnsw:
      knn_hnsw(X, N, D, k, q0, q1, idx, d2);
      return;
    case KnnMethod::Ivf:
      knn_ivf(X, N, D, k, q0, q1, idx, d2);
      return;
    default:
      knn_exact(X, N, D, k, q0, q1, idx, d2);
  }
}

}  // namespace sieve::embed
