// The knn noise detector alone (cluster/detect_knn.cpp) on a features file as cluster_filter
// reads it (row-distributed: a block of the file's rows a rank), timed, with the agreement of
// its scores and flags with the exact search on evenly spaced check rows (one rank only:
// there the share holds every row). scripts/bench_knn.sh makes the file and runs this.
//
//   bench_cluster_knn FEATURES.h5 [search=auto|exact|ivf] [check=2000] [k=10] [threshold=0.7]
//                     [probes=cluster::kKnnIvfProbes]
//
// Prints one line of key=value pairs on rank 0 (stdout): rows, width, ranks, threads, the
// search used, the seconds to read and to detect (wall and this rank's CPU), the flagged
// count, peak RSS of rank 0, and the check's flag agreement, mean |score difference| and
// recall (the fraction of the exact k neighbours among the detector's).
#include <omp.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/detect.hpp"
#include "cluster/inputs.hpp"
#include "comm/comm.hpp"
#include "embed/knn.hpp"
#include "embed/knn_approx.hpp"
#include "io/h5.hpp"
#include "util/log.hpp"

namespace {
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

int main(int argc, char** argv) {
  using namespace sieve;
  MpiSession mpi(&argc, &argv);
  Comm comm = Comm::world();
  log::set_rank(comm.rank(), comm.size());  // progress and notes from rank 0 only
  if (argc < 2) {
    if (comm.is_root())
      std::fprintf(stderr,
                   "usage: %s FEATURES.h5 [auto|exact|ivf] [check] [k] [threshold] [probes]\n",
                   argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const embed::KnnMethod search = embed::parse_knn_method(argc > 2 ? argv[2] : "auto");
  const int64_t check = argc > 3 ? std::atoll(argv[3]) : 2000;
  const int k = argc > 4 ? std::atoi(argv[4]) : 10;
  const double threshold = argc > 5 ? std::atof(argv[5]) : 0.7;
  const int64_t probes = argc > 6 ? std::atoll(argv[6]) : cluster::kKnnIvfProbes;

  auto t0 = std::chrono::steady_clock::now();
  std::vector<int64_t> ids;
  std::vector<int32_t> labels;
  {
    h5::File f = h5::File::open(path);
    ids = f.read_all<int64_t>("/train/sample_id");
    labels = f.read_all<int32_t>("/train/labels");
  }
  const int64_t n = int64_t(ids.size());
  cluster::FeatureShares in = cluster::read_feature_shares(comm, path, ids, labels, true, false);
  cluster::RowShare& f = in.feats;
  const int d = f.width;
  comm.barrier();
  const double read_s = since(t0);

  t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  std::vector<int32_t> lists;  // [m, k] the detector's neighbours, for the recall
  cluster::KnnSearch how(search, probes);
  how.lists = &lists;
  const cluster::Detection det = cluster::detect_knn_vote(comm, f, n, labels.data(), k, threshold,
                                                          cluster::kKnnPieceBytes, how);
  const double cpu_s = cpu_seconds() - c0;
  comm.barrier();
  const double detect_s = since(t0);
  int64_t flagged = 0;
  for (const uint8_t b : det.flag) flagged += b;

  // The exact lists of the check rows against every row (the share's rows are normalised,
  // and reordered by the inverted file; f.rows still names them).
  double agree = std::nan(""), score_diff = std::nan(""), recall = std::nan("");
  if (comm.size() == 1 && check > 0) {
    const int64_t nq = std::min(check, n);
    std::unordered_map<int64_t, int64_t> pos;
    for (int64_t q = 0; q < f.size(); ++q) pos[f.rows[size_t(q)]] = q;
    std::vector<float> Q(size_t(nq) * d);
    std::vector<int64_t> qid(static_cast<size_t>(nq));
    for (int64_t s = 0; s < nq; ++s) {
      qid[size_t(s)] = s * n / nq;
      const int64_t p = pos.at(qid[size_t(s)]);
      std::copy(f.x.begin() + p * d, f.x.begin() + (p + 1) * d, Q.begin() + s * d);
    }
    std::vector<int32_t> li(size_t(nq) * k, -1);
    std::vector<float> ld(li.size(), std::numeric_limits<float>::infinity());
    embed::knn_merge_block(Q.data(), qid.data(), nq, f.x.data(), f.rows.data(), f.size(), d, k,
                           li.data(), ld.data());
    int64_t same = 0, found = 0;
    double diff = 0;
    for (int64_t s = 0; s < nq; ++s) {
      const int64_t i = qid[size_t(s)];
      int disagree = 0;
      for (int j = 0; j < k; ++j) disagree += labels[size_t(li[size_t(s * k + j)])] != labels[i];
      const double score = double(disagree) / k;
      same += (score > threshold) == bool(det.flag[size_t(i)]);
      diff += std::abs(score - det.score[size_t(i)]);
      const int32_t* mine = lists.data() + pos.at(i) * k;
      for (int j = 0; j < k; ++j) found += std::count(mine, mine + k, li[size_t(s * k + j)]);
    }
    recall = double(found) / double(nq * k);
    agree = double(same) / double(nq);
    score_diff = diff / double(nq);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  if (comm.is_root())
    std::printf(
        "rows=%lld width=%d ranks=%d threads=%d search=%s probes=%lld read_s=%.1f detect_s=%.1f "
        "detect_cpu_s=%.1f flagged=%lld peak_rss_gb=%.2f check_rows=%lld flag_agreement=%.4f "
        "mean_abs_score_diff=%.4f recall=%.4f\n",
        (long long)n, d, comm.size(), omp_get_max_threads(),
        embed::knn_method_name(embed::resolve_knn_method(search, n) == embed::KnnMethod::Exact
                                   ? embed::KnnMethod::Exact
                                   : embed::KnnMethod::Ivf),
        (long long)probes, read_s, detect_s, cpu_s, (long long)flagged,
        double(ru.ru_maxrss) / (1 << 20), (long long)(comm.size() == 1 ? std::min(check, n) : 0),
        agree, score_diff, recall);
  return 0;
}
