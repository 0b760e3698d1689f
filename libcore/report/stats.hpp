// Small-sample statistics for the report: mean, sample std, Student-t confidence intervals of
// a mean, and paired differences between two arms.
//
// Why t and not mean ± 2·std: a sweep has 1-5 seeds per point, and at n = 3 the 95 % t
// quantile is 4.30, not 1.96; an interval built from the normal quantile (or from the std
// alone) would claim about twice the certainty the data carry. The t quantile comes from
// Boost.Math (header-only), not from a hand-written approximation.
//
// Why paired: the arms of one sweep share seeds, and a seed fixes the initial weights and
// the sample order, so seed-to-seed variation is largely common to both arms. The
// difference per seed removes it; the interval is then over the n differences (df = n - 1).
//
// n = 1 gives a mean but no interval (has_ci() false, half = NaN): one run says nothing
// about the spread, and the report says "n=1, no interval" rather than printing ± 0.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace sieve::report {

// Two-sided Student-t quantile: t such that P(T <= t) = p for df degrees of freedom
// (t_quantile(0.975, 2) = 4.303). df must be positive.
double t_quantile(double p, double df);

// Mean and sample standard deviation (0 for one value) ignoring NaNs; n = values used.
struct Stats {
  double mean = std::numeric_limits<double>::quiet_NaN();
  double std = std::numeric_limits<double>::quiet_NaN();
  double min = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
  int64_t n = 0;
};
Stats stats_of(const std::vector<double>& v);

// Mean with a two-sided confidence interval mean ± t_{(1+level)/2, n-1} · sd / sqrt(n).
struct MeanCI {
  int64_t n = 0;
  double level = 0.95;
  double mean = std::numeric_limits<double>::quiet_NaN();
  double sd = std::numeric_limits<double>::quiet_NaN();    // sample std (n - 1); NaN for n < 2
  double half = std::numeric_limits<double>::quiet_NaN();  // half-width; NaN for n < 2
  double lo = std::numeric_limits<double>::quiet_NaN(), hi = std::numeric_limits<double>::quiet_NaN();
  bool has_ci() const { return n >= 2; }
};
// NaNs are ignored (n counts the finite values).
MeanCI mean_ci(const std::vector<double>& v, double level = 0.95);

// Paired difference a − b over the keys (seeds) present in both maps with finite values.
struct PairedDiff {
  MeanCI diff;                 // over the pairs
  std::vector<int64_t> seeds;  // the paired seeds, ascending
  int64_t only_a = 0, only_b = 0;  // seeds with a value in one arm only (not used)
};
PairedDiff paired_difference(const std::map<int64_t, double>& a,
                             const std::map<int64_t, double>& b, double level = 0.95);

// What an interval of a difference says, never more than it shows.
enum class Verdict {
  Higher,        // the whole interval above 0
  Lower,         // the whole interval below 0
  NoDifference,  // the interval contains 0
  TooFew,        // n < 2: no interval
};
Verdict verdict_of(const MeanCI& d);

// "+2.00 ± 1.23 (95 % CI +0.77 to +3.23, n=3)" in units of `scale` (100: percent points),
// or "+2.00 (n=1, no interval)", or "n/a (n=0)". `sign` prints a leading + on positives;
// `unit` (e.g. " points") follows the mean and half-width.
std::string format_ci(const MeanCI& m, double scale, int decimals, bool sign,
                      const std::string& unit = "");

}  // namespace sieve::report
