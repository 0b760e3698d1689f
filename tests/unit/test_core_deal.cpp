// deal_largest_first (comm/comm.hpp): the plan that spreads whole classes or groups over the
// ranks (embed/reduce.cpp, cluster/filter.cpp), against plans worked out by hand.
#include <gtest/gtest.h>

#include "comm/comm.hpp"

using namespace sieve;

using Plan = std::vector<std::vector<int>>;

TEST(DealLargestFirst, LargestToTheLeastLoadedRank) {
  // Sizes 5 9 2 9 4 on 2 ranks: 9 (item 1) -> r0; 9 (item 3) -> r1 (r0 has 9);
  // 5 (item 0) -> r0 (tie 9/9: the lower rank); 4 (item 4) -> r1 (14 vs 9);
  // 2 (item 2) -> r1 (14 vs 13).
  EXPECT_EQ(deal_largest_first({5, 9, 2, 9, 4}, 2), (Plan{{1, 0}, {3, 4, 2}}));
}

TEST(DealLargestFirst, TiesKeepTheItemOrderAndFewerItemsThanRanksLeaveRanksEmpty) {
  EXPECT_EQ(deal_largest_first({3, 3, 3}, 3), (Plan{{0}, {1}, {2}}));
  EXPECT_EQ(deal_largest_first({1, 7}, 4), (Plan{{1}, {0}, {}, {}}));
  EXPECT_EQ(deal_largest_first({4, 1, 2}, 1), (Plan{{0, 2, 1}}));
  EXPECT_EQ(deal_largest_first({}, 2), (Plan{{}, {}}));
}

TEST(DealLargestFirst, EveryItemDealtOnce) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 50; ++i) sizes.push_back((i * 37) % 11);
  const Plan plan = deal_largest_first(sizes, 7);
  std::vector<int> seen(sizes.size(), 0);
  for (const auto& items : plan)
    for (int i : items) ++seen[size_t(i)];
  EXPECT_EQ(seen, std::vector<int>(sizes.size(), 1));
}

TEST(Request, AnUnstartedRequestIsDone) {
  Request r;
  EXPECT_FALSE(r.active());
  EXPECT_TRUE(r.test());
  r.wait();
  std::vector<Request> none(3);
  wait_all(none);
}
