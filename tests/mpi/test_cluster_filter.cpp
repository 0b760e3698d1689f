// run_filter over MPI ranks (classes dealt to ranks, or each class split spatially)
// gives exactly the single-rank result, for DBSCAN (auto eps too) and GMM.
#include <gtest/gtest.h>

#include <random>

#include "cluster/filter.hpp"
#include "comm/comm.hpp"

using namespace sieve;
using namespace sieve::cluster;

namespace {

struct Data {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

Data make_data() {
  Data d;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> N(0, 0.4f);
  std::uniform_real_distribution<float> U(-10, 10);
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 1500; ++i) {
      bool bg = i % 25 == 0;
      d.x.push_back(bg ? U(rng) : float(3 * (i % 4) - c) + N(rng));
      d.x.push_back(bg ? U(rng) : float(2 * (i % 3)) + N(rng));
      d.labels.push_back((c * 7) % 5);  // classes 0, 2, 4, 1: not contiguous in order
    }
  return d;
}

void expect_same(const FilterResult& a, const FilterResult& b) {
  EXPECT_EQ(a.cluster, b.cluster);
  EXPECT_EQ(a.keep, b.keep);
  EXPECT_EQ(a.random_keep, b.random_keep);
  EXPECT_EQ(a.clusters, b.clusters);
  EXPECT_EQ(a.noise, b.noise);
  EXPECT_DOUBLE_EQ(a.eps, b.eps);
  ASSERT_EQ(a.table.size(), b.table.size());
  for (size_t i = 0; i < a.table.size(); ++i) {
    EXPECT_EQ(a.table[i].noise, b.table[i].noise);
    EXPECT_EQ(a.table[i].clusters, b.table[i].clusters);
  }
}

}  // namespace

TEST(FilterDistributed, SameResultForEveryLayout) {
  Comm world = Comm::world();
  Comm self(MPI_COMM_SELF);
  Data d = make_data();
  const int64_t n = int64_t(d.labels.size());
  FilterOptions o;
  o.dbscan = {0.35, 6};
  o.seed = 99;
  for (bool auto_eps : {false, true}) {
    o.auto_eps = auto_eps;
    for (bool per_class : {true, false}) {
      o.per_class = per_class;
      o.parallel = "auto";
      FilterResult serial = run_filter(self, d.x.data(), n, 2, d.labels.data(), o);
      EXPECT_GT(serial.noise, 0);
      for (std::string mode : {"classes", "spatial", "auto"}) {
        SCOPED_TRACE(mode + (per_class ? " per class" : " all points") +
                     (auto_eps ? " auto eps" : ""));
        o.parallel = mode;
        expect_same(run_filter(world, d.x.data(), n, 2, d.labels.data(), o), serial);
      }
    }
  }
  o.method = "gmm";
  o.gmm.k = 4;
  o.gmm.n_init = 2;
  o.per_class = true;
  FilterResult serial = run_filter(self, d.x.data(), n, 2, d.labels.data(), o);
  FilterResult dist = run_filter(world, d.x.data(), n, 2, d.labels.data(), o);
  expect_same(dist, serial);
  EXPECT_DOUBLE_EQ(dist.log_likelihood, serial.log_likelihood);
}
