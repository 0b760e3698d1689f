// The communicator's array reductions, exchanges, point-to-point and non-blocking operations
// (comm/comm.hpp, request.hpp, in_flight.hpp) under mpiexec -n 2 and -n 3, each against the
// value worked out by hand from what every rank contributed.
#include <gtest/gtest.h>

#include <numeric>

#include "comm/comm.hpp"
#include "comm/in_flight.hpp"

using namespace sieve;

TEST(Comm, ArrayMaxAndMinAreElementWise) {
  const Comm c = Comm::world();
  const int p = c.size(), r = c.rank();
  // Element i: rank r contributes (r + i) % p, so every element sees 0..p-1.
  std::vector<int32_t> mx(5), mn(5);
  std::vector<int64_t> mx64(3);
  for (int i = 0; i < 5; ++i) mx[size_t(i)] = mn[size_t(i)] = (r + i) % p;
  for (int i = 0; i < 3; ++i) mx64[size_t(i)] = int64_t(r) * 1000000000000LL - i;
  c.allreduce_max(mx.data(), mx.size());
  c.allreduce_min(mn.data(), mn.size());
  c.allreduce_max(mx64.data(), mx64.size());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(mx[size_t(i)], p - 1);
    EXPECT_EQ(mn[size_t(i)], 0);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(mx64[size_t(i)], int64_t(p - 1) * 1000000000000LL - i);
  EXPECT_EQ(c.allreduce_min(r + 7), 7);
}

TEST(Comm, AlltoallvReturnsWhatEachRankSentAndTheCounts) {
  const Comm c = Comm::world();
  const int p = c.size(), r = c.rank();
  // Rank r sends d + 1 values to rank d, each 100 * r + d.
  std::vector<int64_t> send;
  std::vector<int> counts;
  for (int d = 0; d < p; ++d) {
    counts.push_back(d + 1);
    for (int k = 0; k <= d; ++k) send.push_back(100 * r + d);
  }
  std::vector<int> got_counts;
  const std::vector<int64_t> got = c.alltoallv(send, counts, &got_counts);
  ASSERT_EQ(got_counts, std::vector<int>(size_t(p), r + 1));
  ASSERT_EQ(got.size(), size_t(p) * size_t(r + 1));
  for (int s = 0; s < p; ++s)
    for (int k = 0; k <= r; ++k) EXPECT_EQ(got[size_t(s * (r + 1) + k)], 100 * s + r);
}

TEST(Comm, AllgathervInPlaceFillsEveryBlock) {
  const Comm c = Comm::world();
  const int p = c.size(), r = c.rank();
  std::vector<int> counts, displs;
  for (int q = 0, at = 0; q < p; at += q + 1, ++q) counts.push_back(q + 1), displs.push_back(at);
  std::vector<double> y(size_t(displs.back() + counts.back()), -1.0);
  for (int k = 0; k < counts[size_t(r)]; ++k) y[size_t(displs[size_t(r)] + k)] = r + 0.5;
  c.allgatherv_in_place(y.data(), counts, displs);
  for (int q = 0; q < p; ++q)
    for (int k = 0; k < counts[size_t(q)]; ++k)
      EXPECT_EQ(y[size_t(displs[size_t(q)] + k)], q + 0.5);
}

TEST(Comm, SendRecvPassAlongTheRanks) {
  const Comm c = Comm::world();
  const int p = c.size(), r = c.rank();
  constexpr int kTag = 17;
  // A chain: each rank adds its rank to every element and passes it on.
  std::vector<double> v(4, 0.0);
  if (r > 0) c.recv(v.data(), v.size(), r - 1, kTag);
  for (double& x : v) x += r;
  if (r + 1 < p) c.send(v.data(), v.size(), r + 1, kTag);
  if (r == p - 1)
    for (double x : v) EXPECT_EQ(x, p * (p - 1) / 2.0);
}

TEST(Comm, NonBlockingPointToPointAndCollectives) {
  const Comm c = Comm::world();
  const int p = c.size(), r = c.rank();
  constexpr int kTag = 23;
  // Shifted exchange: send to r + 1, receive from r - 1 (mod p).
  std::vector<float> out(3, float(r)), in(3, -1.0f);
  std::vector<Request> reqs;
  reqs.push_back(c.isend(out.data(), out.size(), (r + 1) % p, kTag));
  Request rx = c.irecv(in.data(), in.size(), (r - 1 + p) % p, kTag);
  EXPECT_TRUE(rx.active());
  rx.wait();
  EXPECT_FALSE(rx.active());
  wait_all(reqs);
  for (float x : in) EXPECT_EQ(x, float((r - 1 + p) % p));

  std::vector<float> s(4, float(r + 1));
  Request a = c.iallreduce_sum(s.data(), s.size());
  while (!a.test()) {
  }
  for (float x : s) EXPECT_EQ(x, float(p * (p + 1) / 2));

  const uint64_t mine[2] = {~uint64_t(0) ^ (uint64_t(1) << r), uint64_t(0xF0) | uint64_t(r)};
  uint64_t band[2] = {0, 0};
  c.iallreduce_band(mine, band, 2).wait();
  uint64_t want0 = ~uint64_t(0);
  for (int q = 0; q < p; ++q) want0 ^= uint64_t(1) << q;
  EXPECT_EQ(band[0], want0);
  EXPECT_EQ(band[1], uint64_t(0xF0));  // 0 | 1 | 2 share no low bit with rank 0's 0

  int mx_in[2] = {r, -r}, mx_out[2] = {0, 0};
  c.iallreduce_max(mx_in, mx_out, 2).wait();
  EXPECT_EQ(mx_out[0], p - 1);
  EXPECT_EQ(mx_out[1], 0);

  // Reduce onto the last rank, then broadcast from it.
  const int root = p - 1;
  std::vector<double> g(5, double(r));
  c.ireduce_sum(g.data(), g.size(), root).wait();
  if (r == root)
    for (double x : g) EXPECT_EQ(x, p * (p - 1) / 2.0);
  std::vector<double> b(5, r == root ? 42.0 : 0.0);
  c.ibcast(b.data(), b.size(), root).wait();
  for (double x : b) EXPECT_EQ(x, 42.0);
}

TEST(Comm, InFlightRetiresEveryRequest) {
  const Comm c = Comm::world();
  std::vector<std::vector<float>> bufs(6, std::vector<float>(64, 1.0f));
  InFlight in_flight;
  for (auto& b : bufs) in_flight.add(c.iallreduce_sum(b.data(), b.size()), "t", 256.0);
  in_flight.poll();
  EXPECT_GE(in_flight.wait_all(), 0.0);
  EXPECT_TRUE(in_flight.empty());
  for (auto& b : bufs)
    for (float x : b) EXPECT_EQ(x, float(c.size()));
}

TEST(Comm, DupIsAPrivateChannelWithTheSameRanks) {
  const Comm c = Comm::world();
  const Comm d = c.dup();
  EXPECT_EQ(d.rank(), c.rank());
  EXPECT_EQ(d.size(), c.size());
  EXPECT_NE(d.raw(), c.raw());
  // A message on the duplicate is not received on the original, even with the same tag:
  // the original's message, posted second, is the one the original's receive gets.
  const int p = c.size(), r = c.rank();
  constexpr int kTag = 5;
  int on_dup = 1000 + r, on_orig = 2000 + r, got_dup = -1, got_orig = -1;
  Request s1 = d.isend(&on_dup, 1, (r + 1) % p, kTag);
  Request s2 = c.isend(&on_orig, 1, (r + 1) % p, kTag);
  c.recv(&got_orig, 1, (r - 1 + p) % p, kTag);
  d.recv(&got_dup, 1, (r - 1 + p) % p, kTag);
  s1.wait();
  s2.wait();
  EXPECT_EQ(got_orig, 2000 + (r - 1 + p) % p);
  EXPECT_EQ(got_dup, 1000 + (r - 1 + p) % p);
  EXPECT_EQ(Comm::self().size(), 1);
}

TEST(Comm, SplitGroupsRanksByColourInTheirOrder) {
  const Comm c = Comm::world();
  const int r = c.rank(), p = c.size();
  // Colour by parity: group 0 holds the even ranks, group 1 the odd ones (np 3: 2 and 1).
  const Comm g = c.split(r % 2);
  const int expected_size = r % 2 == 0 ? (p + 1) / 2 : p / 2;
  EXPECT_EQ(g.size(), expected_size);
  EXPECT_EQ(g.rank(), r / 2);
  EXPECT_EQ(g.is_root(), r < 2);
  // A reduction stays inside the group: the sum of the world ranks of its members.
  int expected_sum = 0;
  for (int q = r % 2; q < p; q += 2) expected_sum += q;
  EXPECT_EQ(g.allreduce_sum(r), expected_sum);
  // Node placement is the group's own (one node here: every member is local).
  EXPECT_EQ(g.local_size(), g.size());
}
