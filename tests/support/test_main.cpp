// GoogleTest main for every Sieve test binary: MPI is initialised (singleton when run
// directly, real ranks under mpiexec) and only rank 0 prints test results.
#include <gtest/gtest.h>

#include <cstdlib>

#include "comm/comm.hpp"
#include "util/log.hpp"

int main(int argc, char** argv) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  ::testing::InitGoogleTest(&argc, argv);
  sieve::MpiSession mpi(&argc, &argv, /*serialized_threads=*/true);
  sieve::Comm world = sieve::Comm::world();
  sieve::log::set_rank(world.rank(), world.size());
  if (world.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  // A failure on any rank fails the test on every rank.
  int any = world.allreduce_max(rc);
  return any;
}
