// Exactness of the grid DBSCAN against an independent all-pairs reference.
#include <gtest/gtest.h>

#include <cmath>

#include "cluster/dbscan.hpp"
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
