// Distributed DBSCAN (spatial split + halo exchange) equals the serial one and the
// all-pairs reference, whatever the number of ranks (run under mpiexec -n 2 and -n 3;
// sub-communicators of 1 and 2 ranks are checked inside the same run).
#include <gtest/gtest.h>

#include "cluster/dbscan.hpp"
#include "cluster/dbscan_dist.hpp"
#include "comm/comm.hpp"
#include "unit/test_cluster_reference.hpp"

using namespace sieve;
using namespace sieve::cluster;

namespace {

void check_on(const Comm& comm, bool with_reference) {
  for (const auto& c : test::dbscan_cases()) {
    SCOPED_TRACE(c.name + " on " + std::to_string(comm.size()) + " ranks");
    const int64_t n = int64_t(c.x.size()) / c.d;
    DbscanResult serial = dbscan(c.x.data(), n, c.d, {c.eps, c.min_samples});
    DbscanResult dist = test::run_split(comm, c);
    // Identical, not merely equivalent: same borders, same cluster numbers.
    EXPECT_EQ(dist.label, serial.label);
    EXPECT_EQ(dist.core, serial.core);
    EXPECT_EQ(dist.num_clusters, serial.num_clusters);
    EXPECT_EQ(dist.num_noise, serial.num_noise);
    if (with_reference && comm.rank() == 0) {
      auto ref = test::reference_dbscan(c.x, c.d, c.eps, c.min_samples);
      test::expect_matches_reference(c.x, c.d, c.eps, ref, dist.label, dist.core);
    }
  }
}

}  // namespace

TEST(DbscanDistributed, EqualsSerialOnAllRanks) {
  check_on(Comm::world(), true);
}

TEST(DbscanDistributed, EqualsSerialOnOneAndTwoRanks) {
  Comm world = Comm::world();
  for (int size : {1, 2}) {
    if (size > world.size()) continue;
    MPI_Comm sub;
    SIEVE_MPI_CHECK(
        MPI_Comm_split(world.raw(), world.rank() < size ? 0 : MPI_UNDEFINED, world.rank(), &sub));
    if (sub != MPI_COMM_NULL) {
      check_on(Comm(sub), false);
      MPI_Comm_free(&sub);
    }
    world.barrier();
  }
}

TEST(DbscanDistributed, BothIndexWidthsGiveIdenticalResults) {
  // Each rank's owned + halo points with 32-bit and with 64-bit positions: same labels.
  for (const auto& c : test::dbscan_cases()) {
    SCOPED_TRACE(c.name);
    DbscanResult r32 = test::run_split(Comm::world(), c, 32);
    DbscanResult r64 = test::run_split(Comm::world(), c, 64);
    EXPECT_EQ(r32.label, r64.label);
    EXPECT_EQ(r32.core, r64.core);
    EXPECT_EQ(r32.num_clusters, r64.num_clusters);
    EXPECT_EQ(r32.num_noise, r64.num_noise);
  }
}
