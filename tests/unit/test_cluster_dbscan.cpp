// Exactness of the grid DBSCAN against an independent all-pairs reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "cluster/dbscan.hpp"
#include "cluster/eps_select.hpp"
#include "comm/fake.hpp"
#include "unit/test_cluster_reference.hpp"
#include "util/error.hpp"

using namespace sieve;
using namespace sieve::cluster;

TEST(Dbscan, MatchesBruteForceOnRandomAndAdversarialSets) {
  for (const auto& c : test::dbscan_cases()) {
    SCOPED_TRACE(c.name);
    int64_t n = int64_t(c.x.size()) / c.d;
    DbscanResult r = dbscan(c.x.data(), n, c.d, {c.eps, c.min_samples});
    auto ref = test::reference_dbscan(c.x, c.d, c.eps, c.min_samples);
    test::expect_matches_reference(c.x, c.d, c.eps, ref, r.label, r.core);
    int64_t ref_noise = 0;
    for (auto v : ref.noise) ref_noise += v;
    EXPECT_EQ(r.num_noise, ref_noise);
    int ref_clusters = 0;
    for (auto v : ref.comp) ref_clusters = std::max(ref_clusters, v + 1);
    EXPECT_EQ(r.num_clusters, ref_clusters);
  }
}

TEST(Dbscan, ClusterIdsAreNumberedBySmallestIndex) {
  auto cs = test::dbscan_cases();
  const auto& c = cs[1];
  int64_t n = int64_t(c.x.size()) / c.d;
  DbscanResult r = dbscan(c.x.data(), n, c.d, {c.eps, c.min_samples});
  ASSERT_GT(r.num_clusters, 1);
  int32_t next = 0;  // first core occurrence of each id must be in increasing order
  for (int64_t i = 0; i < n; ++i)
    if (r.core[i] && r.label[i] >= next) {
      EXPECT_EQ(r.label[i], next);
      next = r.label[i] + 1;
    }
  EXPECT_EQ(next, r.num_clusters);
}

TEST(Dbscan, KnownTinyExample) {
  // Two groups of three points 1 apart on a line plus an isolated point; eps exactly 1.
  std::vector<float> x = {0, 0, 1, 0, 2, 0, 10, 0, 11, 0, 12, 0, 50, 50};
  DbscanResult r = dbscan(x.data(), 7, 2, {1.0, 3});
  EXPECT_EQ(r.label, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, -1}));
  EXPECT_EQ(r.core, (std::vector<uint8_t>{0, 1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(r.num_noise, 1);
}

TEST(Dbscan, BadParametersAndNaNAreErrors) {
  std::vector<float> x = {0, 0, 1, 1};
  EXPECT_THROW(dbscan(x.data(), 2, 2, {0.0, 3}), UsageError);
  EXPECT_THROW(dbscan(x.data(), 2, 2, {-1.0, 3}), UsageError);
  EXPECT_THROW(dbscan(x.data(), 2, 2, {0.5, 0}), UsageError);
  x[3] = std::nanf("");
  EXPECT_THROW(dbscan(x.data(), 2, 2, {0.5, 2}), Error);
  EXPECT_EQ(dbscan(x.data(), 0, 2, {0.5, 2}).label.size(), 0u);
}

TEST(Dbscan, IndexWidthIsChosenByN) {
  // 32-bit positions, cell numbers and parents as long as n itself fits an int32.
  EXPECT_EQ(dbscan_index_bits(0), 32);
  EXPECT_EQ(dbscan_index_bits(100'000'000), 32);
  EXPECT_EQ(dbscan_index_bits((int64_t(1) << 31) - 1), 32);
  EXPECT_EQ(dbscan_index_bits(int64_t(1) << 31), 64);
  EXPECT_EQ(dbscan_index_bits(int64_t(1) << 40), 64);
  std::vector<float> x = {0, 0, 1, 1};
  EXPECT_THROW(dbscan(x.data(), 2, 2, {0.5, 2}, 16), Error);
}

namespace {

// Two tight blobs 10^4 eps apart: the key span is far above 8 n, so the cells are found by
// binary search (no dense key table), with clusters to join across cells.
test::Case far_blobs_case() {
  test::Case c{"far_blobs_sparse_keys", 2, 0.05, 5, {}};
  std::mt19937_64 rng(99);
  std::normal_distribution<float> N(0, 0.1f);
  for (int i = 0; i < 1500; ++i) {
    const float off = i % 2 ? 500.f : 0.f;
    c.x.push_back(off + N(rng));
    c.x.push_back(off + N(rng));
  }
  return c;
}

}  // namespace

TEST(Dbscan, BothIndexWidthsGiveIdenticalResults) {
  auto cases = test::dbscan_cases();
  cases.push_back(far_blobs_case());
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t n = int64_t(c.x.size()) / c.d;
    const DbscanParams p{c.eps, c.min_samples};
    DbscanResult r32 = dbscan(c.x.data(), n, c.d, p, 32);
    DbscanResult r64 = dbscan(c.x.data(), n, c.d, p, 64);
    DbscanResult by_n = dbscan(c.x.data(), n, c.d, p);
    EXPECT_EQ(r32.label, r64.label);
    EXPECT_EQ(r32.core, r64.core);
    EXPECT_EQ(r32.num_clusters, r64.num_clusters);
    EXPECT_EQ(r32.num_noise, r64.num_noise);
    EXPECT_EQ(by_n.label, r32.label);
    test::expect_matches_reference(c.x, c.d, c.eps,
                                   test::reference_dbscan(c.x, c.d, c.eps, c.min_samples),
                                   r32.label, r32.core);
    // The cell layout itself is the same in both widths.
    std::vector<double> lo(c.d, 1e30), hi(c.d, -1e30);
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < c.d; ++k) {
        lo[k] = std::min(lo[k], double(c.x[i * c.d + k]));
        hi[k] = std::max(hi[k], double(c.x[i * c.d + k]));
      }
    const Grid g = make_grid(lo, hi, c.eps);
    auto a = build_cell_index<int32_t>(g, c.x.data(), n);
    auto b = build_cell_index<int64_t>(g, c.x.data(), n);
    EXPECT_TRUE(std::equal(a.order.begin(), a.order.end(), b.order.begin(), b.order.end()));
    EXPECT_TRUE(std::equal(a.cell_start.begin(), a.cell_start.end(), b.cell_start.begin(),
                           b.cell_start.end()));
    EXPECT_EQ(a.cell_key, b.cell_key);
    EXPECT_EQ(a.dense_span, b.dense_span);
    for (int64_t k = 0; a.dense_span > 0 && k <= a.dense_span; ++k) {  // finds the cells
      const int64_t want =
          std::lower_bound(a.cell_key.begin(), a.cell_key.end(), a.dense_base + k) -
          a.cell_key.begin();
      ASSERT_EQ(a.first_cell(k), want) << "key " << k;
      ASSERT_EQ(b.first_cell(k), want) << "key " << k;
    }
    if (c.name == "far_blobs_sparse_keys") {
      EXPECT_EQ(a.dense_span, 0);
      EXPECT_GE(r32.num_clusters, 2);  // the two blobs (and a stray group in a tail)
    }
  }
}

// auto_eps's k-distance curve: the grid ring search (d <= 3, on the index DBSCAN builds)
// gives every query's k-th neighbour distance exactly as a full scan does, for dense
// clusters, sparse outliers (the ring search gives up and scans) and duplicated points.
TEST(Dbscan, KDistancesFromTheGridEqualAFullScan) {
  std::mt19937 rng(7);
  std::normal_distribution<float> blob(0.f, 0.3f);
  std::uniform_real_distribution<float> far(-40.f, 40.f);
  for (int d : {1, 2, 3}) {
    const int64_t n = 3000, k = 5;
    std::vector<float> x(size_t(n) * d);
    for (int64_t i = 0; i < n; ++i)
      for (int t = 0; t < d; ++t)
        x[size_t(i) * d + t] = i % 50 == 0  ? far(rng)
                               : i % 7 == 0 ? 1.f
                                            : float(i % 3) * 4 + blob(rng);
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> dist(n);
      for (int64_t j = 0; j < n; ++j) dist[j] = test::ref_d2(x, d, i, j);
      std::nth_element(dist.begin(), dist.begin() + (k - 1), dist.end());
      want[i] = std::sqrt(dist[k - 1]);
    }
    std::sort(want.begin(), want.end());
    const std::vector<double> got = k_distances(x.data(), n, d, k, n, 1);
    ASSERT_EQ(got.size(), want.size());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-9 * (1 + want[i])) << d << "-D, " << i;
  }
}

// The distributed DBSCAN (spatial split, halo exchange, label merge) on 4 ranks of the
// in-process fake communicator, a rank count the mpi tests (2 and 3 ranks) do not run:
// identical to the serial result on every case.
TEST(Dbscan, DistributedOnFourFakeRanksEqualsSerial) {
  for (const auto& c : test::dbscan_cases()) {
    const int64_t n = int64_t(c.x.size()) / c.d;
    const DbscanResult serial = dbscan(c.x.data(), n, c.d, {c.eps, c.min_samples});
    std::vector<DbscanResult> dist(4);
    run_fake_ranks(4,
                   [&](const Comm& comm) { dist[size_t(comm.rank())] = test::run_split(comm, c); });
    for (int r = 0; r < 4; ++r) {
      SCOPED_TRACE(c.name + ", rank " + std::to_string(r));
      EXPECT_EQ(dist[size_t(r)].label, serial.label);
      EXPECT_EQ(dist[size_t(r)].core, serial.core);
      EXPECT_EQ(dist[size_t(r)].num_clusters, serial.num_clusters);
      EXPECT_EQ(dist[size_t(r)].num_noise, serial.num_noise);
    }
  }
}
