// Collective HDF5 writes and the communicator's collectives, under mpiexec -n 2 and -n 3.
#include <gtest/gtest.h>

#include <numeric>

#include "comm/comm.hpp"
#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "support/test_util.hpp"

using namespace sieve;

TEST(Comm, CollectivesAgreeWithSerialArithmetic) {
  Comm world = Comm::world();
  int p = world.size(), r = world.rank();
  EXPECT_EQ(world.allreduce_sum<int64_t>(r + 1), int64_t(p) * (p + 1) / 2);
  EXPECT_EQ(world.exscan_sum(1), r);
  EXPECT_EQ(world.allreduce_max(r), p - 1);
  std::vector<int32_t> mine(r + 1, r);
  auto all = world.allgatherv(mine);
  EXPECT_EQ(all.size(), size_t(p) * (p + 1) / 2);
  std::string s = world.is_root() ? "hello" : "";
  world.bcast_string(s);
  EXPECT_EQ(s, "hello");
  int64_t total = 0;
  for (int q = 0; q < p; ++q) total += block_range(1001, q, p).size();
  EXPECT_EQ(total, 1001);
}

// mpiexec here starts every rank on this one host: no placement line, so single-node runs
// log nothing new. The two-node case (a line naming both hosts, node rank 0 on each) is
// tests/slurm/two_nodes.sh, on a real second node.
TEST(Comm, PlacementIsSilentWhenAllRanksShareANode) {
  Comm world = Comm::world();
  EXPECT_EQ(world.local_size(), world.size());
  EXPECT_EQ(world.local_rank(), world.rank());
  EXPECT_EQ(describe_placement(world), "");
}

TEST(ParallelH5, EveryRankWritesItsBlockCollectively) {
  Comm world = Comm::world();
  std::string dir = test::scratch_dir("parallel_h5");
  const int64_t n = 1000, cols = 4;
  {
    AtomicOutput out(dir + "/p.h5", false, world);
    h5::File f = h5::File::create(out.tmp_path(), &world);
    f.create_dataset<float>("/x", {hsize_t(n), hsize_t(cols)}, 64);
    Range mine = block_range(n, world.rank(), world.size());
    std::vector<float> rows(mine.size() * cols);
    for (int64_t i = 0; i < mine.size(); ++i)
      for (int64_t c = 0; c < cols; ++c) rows[i * cols + c] = float((mine.begin + i) * 10 + c);
    f.write_rows<float>("/x", mine.begin, mine.size(), rows.data());
    h5::stamp(f, "sieve.test/1", "");
    f.close();
    out.commit();
  }
  if (world.is_root()) {
    h5::File f = h5::File::open(dir + "/p.h5");
    auto x = f.read_all<float>("/x");
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(x[i * cols + c], float(i * 10 + c));
  }
}
