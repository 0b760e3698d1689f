// The in-process fake communicator (comm/fake.hpp): every Comm operation gives on N threads
// what MPI gives on N processes, a failing rank releases the others, and multi-rank logic
// (error agreement here; the gradient reduction strategies in test_train_gradsync.cpp) runs
// in a unit test without mpirun.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "comm/fake.hpp"
#include "util/error.hpp"

using namespace sieve;

TEST(FakeComm, CollectivesGiveMpisAnswers) {
  constexpr int kRanks = 3;
  std::atomic<int> checked{0};
  run_fake_ranks(kRanks, [&](const Comm& c) {
    const int r = c.rank();
    EXPECT_EQ(c.size(), kRanks);
    EXPECT_EQ(c.local_size(), kRanks);  // one node
    std::vector<int64_t> v = {r, 10 * r + 1};
    c.allreduce_sum(v.data(), v.size());
    EXPECT_EQ(v, std::vector<int64_t>({0 + 1 + 2, 1 + 11 + 21}));
    EXPECT_FLOAT_EQ(c.allreduce_max(float(r) - 0.5f), 1.5f);
    EXPECT_EQ(c.allreduce_min(int32_t(7 - r)), 5);
    double d[2] = {r == 2 ? 3.25 : -1.0, r == 2 ? -4.0 : 0.0};
    c.bcast(d, 2, 2);
    EXPECT_EQ(d[0], 3.25);
    EXPECT_EQ(d[1], -4.0);
    std::string s = r == 1 ? "from rank one" : "";
    c.bcast_string(s, 1);
    EXPECT_EQ(s, "from rank one");
    EXPECT_EQ(c.exscan_sum(int64_t(r + 1)), r == 0 ? 0 : r == 1 ? 1 : 3);
    EXPECT_EQ(c.allgather(int32_t(100 + r)), std::vector<int32_t>({100, 101, 102}));
    // Rank r gives r + 1 copies of r.
    EXPECT_EQ(c.allgatherv(std::vector<uint8_t>(size_t(r + 1), uint8_t(r))),
              std::vector<uint8_t>({0, 1, 1, 2, 2, 2}));
    std::vector<float> blocks(6, -1.0f);
    const std::vector<int> counts = {1, 2, 3}, displs = {0, 1, 3};
    for (int i = 0; i < counts[size_t(r)]; ++i) blocks[size_t(displs[size_t(r)] + i)] = float(r);
    c.allgatherv_in_place(blocks.data(), counts, displs);
    EXPECT_EQ(blocks, std::vector<float>({0, 1, 1, 2, 2, 2}));
    // Rank r sends q + 1 values "10 r + q" to rank q.
    std::vector<int32_t> send;
    std::vector<int> send_counts;
    for (int q = 0; q < kRanks; ++q) {
      send_counts.push_back(q + 1);
      for (int i = 0; i <= q; ++i) send.push_back(10 * r + q);
    }
    std::vector<int> recv_counts;
    const std::vector<int32_t> got = c.alltoallv(send, send_counts, &recv_counts);
    EXPECT_EQ(recv_counts, std::vector<int>(kRanks, r + 1));
    std::vector<int32_t> want;
    for (int q = 0; q < kRanks; ++q)
      for (int i = 0; i <= r; ++i) want.push_back(10 * q + r);
    EXPECT_EQ(got, want);
    ++checked;
  });
  EXPECT_EQ(checked.load(), kRanks);
}

TEST(FakeComm, PointToPointAndNonBlockingOperations) {
  run_fake_ranks(3, [](const Comm& c) {
    const int r = c.rank(), right = (r + 1) % 3, left = (r + 2) % 3;
    // A ring posted receive-first on every rank: complete only if irecv does not block.
    int64_t from_left = -1;
    Request in = c.irecv(&from_left, 1, left, 7);
    const int64_t mine = 1000 + r;
    Request out = c.isend(&mine, 1, right, 7);
    in.wait();
    out.wait();
    EXPECT_EQ(from_left, 1000 + left);
    // Blocking send/recv, two messages of one tag arrive in order.
    if (r == 0) {
      const float a = 1.5f, b = 2.5f;
      c.send(&a, 1, 2, 3);
      c.send(&b, 1, 2, 3);
    } else if (r == 2) {
      float a = 0, b = 0;
      c.recv(&a, 1, 0, 3);
      c.recv(&b, 1, 0, 3);
      EXPECT_EQ(a, 1.5f);
      EXPECT_EQ(b, 2.5f);
    }
    std::vector<float> g = {float(r), 1.0f};
    Request sum = c.iallreduce_sum(g.data(), g.size());
    sum.wait();
    EXPECT_EQ(g, std::vector<float>({3.0f, 3.0f}));
    const int32_t bits = r == 1 ? 0b0110 : 0b0111;
    int32_t all = 0;
    c.iallreduce_band(&bits, &all, 1).wait();
    EXPECT_EQ(all, 0b0110);
    std::vector<int32_t> part = {r, 2 * r};
    c.ireduce_sum(part.data(), part.size(), 1).wait();
    if (r == 1) {
      EXPECT_EQ(part, std::vector<int32_t>({3, 6}));
    } else {
      EXPECT_EQ(part, std::vector<int32_t>({r, 2 * r}));  // only read off the others
    }
    int64_t root_value = r == 2 ? 42 : 0;
    c.ibcast(&root_value, 1, 2).wait();
    EXPECT_EQ(root_value, 42);
    // A duplicate's messages never match the original's.
    const Comm d = c.dup();
    if (r == 0) {
      const int on_dup = 5, on_orig = 6;
      d.send(&on_dup, 1, 1, 9);
      c.send(&on_orig, 1, 1, 9);
    } else if (r == 1) {
      int x = 0, y = 0;
      c.recv(&x, 1, 0, 9);
      d.recv(&y, 1, 0, 9);
      EXPECT_EQ(x, 6);
      EXPECT_EQ(y, 5);
    }
    d.barrier();
  });
}

// agree_on_error: one rank's failure becomes every rank's, with that rank's message.
TEST(FakeComm, OneRanksErrorIsEveryRanks) {
  std::atomic<int> threw{0};
  run_fake_ranks(3, [&](const Comm& c) {
    try {
      agree_on_error(c, c.rank() == 1 ? "rank 1: disk full" : "");
      ADD_FAILURE() << "rank " << c.rank() << " did not throw";
    } catch (const CollectiveError& e) {
      EXPECT_STREQ(e.what(), "rank 1: disk full");
      ++threw;
    }
    try {
      on_root_agreed(c, [] { throw UsageError("bad key, seen by the root"); });
      ADD_FAILURE() << "rank " << c.rank() << " did not throw";
    } catch (const UsageError& e) {
      EXPECT_STREQ(e.what(), "bad key, seen by the root");
      ++threw;
    }
  });
  EXPECT_EQ(threw.load(), 6);
}

// A rank that fails outside any collective leaves the others waiting in one: they are
// released, and the runner hands back the failed rank's own error.
TEST(FakeComm, AFailedRankReleasesTheOthers) {
  try {
    run_fake_ranks(3, [](const Comm& c) {
      if (c.rank() == 2) throw Error("rank 2 failed on its own");
      std::vector<float> v(4, 1.0f);
      c.allreduce_sum(v.data(), v.size());
      c.barrier();
    });
    FAIL() << "no error came back";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rank 2 failed on its own");
  }
}
