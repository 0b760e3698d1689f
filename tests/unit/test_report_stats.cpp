// The report's statistics against textbook values: Student-t quantiles from a printed
// table, and a confidence interval worked by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "report/stats.hpp"

using namespace sieve::report;

TEST(ReportStats, StudentTQuantilesMatchTheTable) {
  // Two-sided 95 % critical values (any t table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
  EXPECT_NEAR(t_quantile(0.975, 1), 12.706, 5e-4);
  EXPECT_NEAR(t_quantile(0.975, 2), 4.303, 5e-4);
  EXPECT_NEAR(t_quantile(0.975, 4), 2.776, 5e-4);
  EXPECT_NEAR(t_quantile(0.975, 30), 2.042, 5e-4);
  EXPECT_NEAR(t_quantile(0.5, 7), 0.0, 1e-12);
}

TEST(ReportStats, MeanCiOfOneToFiveByHand) {
  // mean 3, sd = sqrt(10/4) = 1.5811, se = 0.7071, half = 2.7764 * 0.7071 = 1.9632.
  MeanCI m = mean_ci({1, 2, 3, 4, 5});
  ASSERT_EQ(m.n, 5);
  ASSERT_TRUE(m.has_ci());
  EXPECT_DOUBLE_EQ(m.mean, 3.0);
  EXPECT_NEAR(m.sd, 1.5811, 1e-4);
  EXPECT_NEAR(m.half, 1.963, 1e-3);
  EXPECT_NEAR(m.lo, 3.0 - 1.963, 1e-3);
  EXPECT_NEAR(m.hi, 3.0 + 1.963, 1e-3);
  EXPECT_EQ(format_ci(m, 1, 3, false), "3.000 ± 1.963 (95 % CI 1.037 to 4.963, n=5)");
  // NaNs are not values: the same interval.
  MeanCI m2 = mean_ci({1, NAN, 2, 3, 4, 5});
  EXPECT_EQ(m2.n, 5);
  EXPECT_DOUBLE_EQ(m2.half, m.half);
}

TEST(ReportStats, OneValueHasNoInterval) {
  MeanCI m = mean_ci({0.7});
  EXPECT_EQ(m.n, 1);
  EXPECT_DOUBLE_EQ(m.mean, 0.7);
  EXPECT_FALSE(m.has_ci());
  EXPECT_TRUE(std::isnan(m.half));
  EXPECT_TRUE(std::isnan(m.lo));
  EXPECT_EQ(format_ci(m, 100, 2, false), "70.00 (n=1, no interval)");
  EXPECT_EQ(verdict_of(m), Verdict::TooFew);
  EXPECT_EQ(format_ci(mean_ci({}), 100, 2, false), "n/a (n=0)");
}

TEST(ReportStats, PairedDifferencesUseOnlySharedSeeds) {
  // Seeds 1..3 in both arms: differences {0.02, 0.03, 0.04}: mean 0.03, sd 0.01,
  // half = 4.3027 * 0.01 / sqrt(3) = 0.024842.
  std::map<int64_t, double> filtered{{1, 0.82}, {2, 0.83}, {3, 0.84}, {4, 0.99}};
  std::map<int64_t, double> full{{1, 0.80}, {2, 0.80}, {3, 0.80}, {5, 0.10}};
  PairedDiff p = paired_difference(filtered, full);
  ASSERT_EQ(p.diff.n, 3);
  EXPECT_EQ(p.seeds, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(p.only_a, 1);
  EXPECT_EQ(p.only_b, 1);
  EXPECT_NEAR(p.diff.mean, 0.03, 1e-12);
  EXPECT_NEAR(p.diff.sd, 0.01, 1e-12);
  EXPECT_NEAR(p.diff.half, 4.302653 * 0.01 / std::sqrt(3.0), 1e-6);
  EXPECT_EQ(verdict_of(p.diff), Verdict::Higher);  // 0.03 - 0.0248 > 0
  // Reversed arms: the same interval mirrored.
  PairedDiff q = paired_difference(full, filtered);
  EXPECT_NEAR(q.diff.hi, -p.diff.lo, 1e-12);
  EXPECT_EQ(verdict_of(q.diff), Verdict::Lower);
  // An interval that straddles 0: differences {+0.01, -0.01}.
  PairedDiff z = paired_difference({{1, 0.51}, {2, 0.49}}, {{1, 0.5}, {2, 0.5}});
  EXPECT_EQ(verdict_of(z.diff), Verdict::NoDifference);
  // One shared seed: a difference, no interval, no verdict.
  PairedDiff one = paired_difference({{7, 0.6}}, {{7, 0.5}, {8, 0.4}});
  EXPECT_EQ(one.diff.n, 1);
  EXPECT_EQ(verdict_of(one.diff), Verdict::TooFew);
  EXPECT_EQ(format_ci(one.diff, 100, 2, true), "+10.00 (n=1, no interval)");
}
