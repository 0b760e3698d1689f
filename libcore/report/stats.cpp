#include "report/stats.hpp"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <cstdio>

#include "util/error.hpp"

namespace sieve::report {

double t_quantile(double p, double df) {
  SIEVE_ASSERT(df > 0 && p > 0 && p < 1, "t_quantile: p=", p, " df=", df);
  return boost::math::quantile(boost::math::students_t(df), p);
}

Stats stats_of(const std::vector<double>& v) {
  Stats s;
  double sum = 0;
  for (double x : v) {
    if (std::isnan(x)) continue;
    sum += x;
    s.min = s.n == 0 ? x : std::min(s.min, x);
    s.max = s.n == 0 ? x : std::max(s.max, x);
    ++s.n;
  }
  if (s.n == 0) return s;
  s.mean = sum / double(s.n);
  double ss = 0;
  for (double x : v)
    if (!std::isnan(x)) ss += (x - s.mean) * (x - s.mean);
  s.std = s.n > 1 ? std::sqrt(ss / double(s.n - 1)) : 0.0;
  return s;
}

MeanCI mean_ci(const std::vector<double>& v, double level) {
  MeanCI m;
  m.level = level;
  Stats s = stats_of(v);
  m.n = s.n;
  m.mean = s.mean;
  if (s.n < 2) return m;  // no spread from one value: no interval, not a zero-width one
  m.sd = s.std;
  m.half = t_quantile(0.5 + level / 2, double(s.n - 1)) * s.std / std::sqrt(double(s.n));
  m.lo = m.mean - m.half;
  m.hi = m.mean + m.half;
  return m;
}

PairedDiff paired_difference(const std::map<int64_t, double>& a,
                             const std::map<int64_t, double>& b, double level) {
  PairedDiff p;
  std::vector<double> d;
  for (auto& [seed, va] : a) {
    if (std::isnan(va)) continue;
    auto it = b.find(seed);
    if (it == b.end() || std::isnan(it->second)) {
      ++p.only_a;
      continue;
    }
    d.push_back(va - it->second);
    p.seeds.push_back(seed);
  }
  for (auto& [seed, vb] : b)
    if (!std::isnan(vb) && (!a.count(seed) || std::isnan(a.at(seed)))) ++p.only_b;
  p.diff = mean_ci(d, level);
  return p;
}

Verdict verdict_of(const MeanCI& d) {
  if (!d.has_ci() || std::isnan(d.lo)) return Verdict::TooFew;
  if (d.lo > 0) return Verdict::Higher;
  if (d.hi < 0) return Verdict::Lower;
  return Verdict::NoDifference;
}

std::string format_ci(const MeanCI& m, double scale, int decimals, bool sign,
                      const std::string& unit) {
  auto num = [&](double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, sign ? "%+.*f" : "%.*f", decimals, scale * x);
    return std::string(buf);
  };
  if (m.n == 0 || std::isnan(m.mean)) return "n/a (n=0)";
  if (!m.has_ci()) return num(m.mean) + unit + " (n=1, no interval)";
  char half[64];
  std::snprintf(half, sizeof half, "%.*f", decimals, scale * m.half);
  return cat(num(m.mean), " ± ", half, unit, " (", int(std::lround(100 * m.level)), " % CI ", num(m.lo),
             " to ", num(m.hi), ", n=", m.n, ")");
}

}  // namespace sieve::report
