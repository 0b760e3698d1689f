// A reusable gradient checker: central differences against an analytic gradient, with kink
// skipping for piecewise-linear ops (ReLU, max-pool, fused BN+ReLU).
//
// For each checked coordinate i it evaluates f at x, x + h e_i and x - h e_i. If the one-sided
// slopes (f(x+h)-f(x))/h and (f(x)-f(x-h))/h disagree by more than kink_tol (relative), the
// step crossed a kink (an input at the ReLU threshold or a max-pool tie switching), where the
// central difference is meaningless: the coordinate is skipped and counted (callers bound the
// skipped fraction, so a wrong gradient cannot hide as "kinks"). Otherwise the
// central difference must match: |num - ana| <= atol + rtol * max(|num|, |ana|).
//
// Tolerances used by the tests (see docs/engine.md): double precision ops h=1e-6,
// rtol 1e-5, atol 1e-8; a whole float ResNet h=1e-3, rtol 5e-2, atol 1e-3, kink_tol 0.05,
// kink_atol 2e-3 — float rounding of an O(1) loss through ~20 layers is ~1e-6, divided by h
// that is ~1e-3 on a slope, below the O(1e-2..1e-1) gradients checked.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sieve::nn {

struct GradCheckOptions {
  double h = 1e-6;
  double rtol = 1e-5, atol = 1e-8;
  // A kink: |slope+ - slope-| > kink_tol * (|slope+| + |slope-|) + kink_atol (kink_atol is
  // the noise floor of a one-sided slope: ~ rounding error of f / h).
  double kink_tol = 1e-3, kink_atol = 1e-6;
  size_t max_coords = 0;  // 0: check every coordinate; else a deterministic strided subset
};

struct GradCheckResult {
  size_t checked = 0, skipped = 0, failed = 0;
  double max_abs_err = 0;
  std::string first_failure;  // "coord i: numeric a vs analytic b"
  bool ok() const { return failed == 0 && checked > 0; }
};

// f: evaluates the scalar function at the current contents of x (T is float or double).
// x is perturbed in place and restored.
template <typename T>
GradCheckResult check_gradient(const std::function<double()>& f, T* x, size_t n,
                               const std::vector<double>& analytic, const GradCheckOptions& o) {
  GradCheckResult r;
  size_t stride = (o.max_coords == 0 || n <= o.max_coords) ? 1 : n / o.max_coords;
  const double f0 = f();
  for (size_t i = 0; i < n; i += stride) {
    const T orig = x[i];
    x[i] = T(double(orig) + o.h);
    const double fp = f();
    x[i] = T(double(orig) - o.h);
    const double fm = f();
    x[i] = orig;
    const double hp = double(T(double(orig) + o.h)) - double(orig);  // actual steps taken
    const double hm = double(orig) - double(T(double(orig) - o.h));
    const double sp = (fp - f0) / hp, sm = (f0 - fm) / hm;
    if (std::abs(sp - sm) > o.kink_tol * (std::abs(sp) + std::abs(sm)) + o.kink_atol) {
      ++r.skipped;
      continue;
    }
    const double num = (fp - fm) / (hp + hm), ana = analytic[i];
    const double err = std::abs(num - ana);
    r.max_abs_err = std::max(r.max_abs_err, err);
    ++r.checked;
    if (err > o.atol + o.rtol * std::max(std::abs(num), std::abs(ana))) {
      if (r.failed++ == 0)
        r.first_failure = "coord " + std::to_string(i) + ": numeric " + std::to_string(num) +
                          " vs analytic " + std::to_string(ana);
    }
  }
  return r;
}

}  // namespace sieve::nn
