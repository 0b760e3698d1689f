// Gradient checks in double precision for every op's reference forward/backward pair
// (ref_ops.hpp, the same code the "ref" backend runs in float and the oracle the oneDNN ops are
// compared against in test_nn_backends). Loss L = sum(y * r) for a fixed random r, so dL/dy = r.
#include <gtest/gtest.h>

#include <random>

#include "nn/gradcheck.hpp"
#include "nn/model.hpp"
#include "nn/ref_ops.hpp"

using namespace sieve::nn;
using Vec = std::vector<double>;

namespace {

Vec randn(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0.0, scale);
  Vec v(n);
  for (double& x : v) x = d(g);
  return v;
}
double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
void expect_ok(const GradCheckResult& r, const char* what) {
  EXPECT_TRUE(r.ok()) << what << ": checked " << r.checked << " skipped " << r.skipped << " failed "
                      << r.failed << " " << r.first_failure;
  EXPECT_LE(r.skipped, r.checked / 10 + 2) << what << ": too many kinks skipped";
}

}  // namespace

TEST(NnGradcheck, ConvStridedPadded) {
  for (int stride : {1, 2}) {
    ConvShape s{2, 3, 7, 6, 4, 3, 3, stride, 1};
    size_t ny = size_t(s.n) * s.k * s.oh() * s.ow();
    Vec x = randn(size_t(s.n) * s.c * s.h * s.w, 1), w = randn(size_t(s.k) * s.c * 9, 2),
        r = randn(ny, 3), y(ny);
    auto f = [&] {
      ref::conv_forward(s, x.data(), w.data(), y.data());
      return dot(y, r);
    };
    Vec dx(x.size()), dw(w.size(), 0.0);
    ref::conv_backward_data(s, r.data(), w.data(), dx.data());
    ref::conv_backward_weights(s, x.data(), r.data(), dw.data());
    expect_ok(check_gradient<double>(f, x.data(), x.size(), dx, {}), "conv dx");
    expect_ok(check_gradient<double>(f, w.data(), w.size(), dw, {}), "conv dw");
  }
}

TEST(NnGradcheck, Conv1x1Stride2) {
  ConvShape s{2, 4, 5, 5, 3, 1, 1, 2, 0};
  size_t ny = size_t(s.n) * s.k * s.oh() * s.ow();
  Vec x = randn(size_t(s.n) * s.c * s.h * s.w, 4), w = randn(size_t(s.k) * s.c, 5),
      r = randn(ny, 6), y(ny);
  auto f = [&] {
    ref::conv_forward(s, x.data(), w.data(), y.data());
    return dot(y, r);
  };
  Vec dx(x.size()), dw(w.size(), 0.0);
  ref::conv_backward_data(s, r.data(), w.data(), dx.data());
  ref::conv_backward_weights(s, x.data(), r.data(), dw.data());
  expect_ok(check_gradient<double>(f, x.data(), x.size(), dx, {}), "conv1x1 dx");
  expect_ok(check_gradient<double>(f, w.data(), w.size(), dw, {}), "conv1x1 dw");
}

TEST(NnGradcheck, BatchNormTrainWithAndWithoutRelu) {
  for (bool relu : {false, true}) {
    const int m = 12, c = 3;
    Vec x = randn(size_t(m) * c, 7, 2.0), gamma = randn(c, 8), beta = randn(c, 9),
        r = randn(size_t(m) * c, 10), y(x.size()), mean(c), var(c);
    auto f = [&] {
      ref::bn_forward_train(m, c, x.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                            var.data(), 1e-5, relu);
      return dot(y, r);
    };
    f();
    Vec dx(x.size()), dg(c, 0.0), db(c, 0.0);
    ref::bn_backward(m, c, x.data(), y.data(), r.data(), gamma.data(), mean.data(), var.data(),
                     dx.data(), dg.data(), db.data(), 1e-5, relu);
    expect_ok(check_gradient<double>(f, x.data(), x.size(), dx, {}), "bn dx");
    expect_ok(check_gradient<double>(f, gamma.data(), c, dg, {}), "bn dgamma");
    expect_ok(check_gradient<double>(f, beta.data(), c, db, {}), "bn dbeta");
  }
}

TEST(NnGradcheck, MaxPoolAndRelu) {
  PoolShape s{2, 3, 7, 7, 3, 2, 1};
  size_t ny = size_t(s.n) * s.c * s.oh() * s.ow();
  Vec x = randn(size_t(s.n) * s.c * s.h * s.w, 11), r = randn(ny, 12), y(ny);
  auto f = [&] {
    ref::maxpool_forward(s, x.data(), y.data());
    return dot(y, r);
  };
  Vec dx(x.size());
  ref::maxpool_backward(s, x.data(), r.data(), dx.data());
  expect_ok(check_gradient<double>(f, x.data(), x.size(), dx, {}), "maxpool dx");

  Vec xr = randn(50, 13), rr = randn(50, 14), yr(50), dxr(50);
  auto g = [&] {
    ref::relu_forward(xr.data(), yr.data(), 50);
    return dot(yr, rr);
  };
  g();
  ref::relu_backward(yr.data(), rr.data(), dxr.data(), 50);
  expect_ok(check_gradient<double>(g, xr.data(), 50, dxr, {}), "relu dx");
}

TEST(NnGradcheck, AvgPoolAndLinear) {
  const int n = 3, c = 4, hw = 5;
  Vec x = randn(size_t(n) * c * hw, 15), r = randn(size_t(n) * c, 16), y(size_t(n) * c);
  auto f = [&] {
    ref::avgpool_forward(x.data(), y.data(), n, c, hw);
    return dot(y, r);
  };
  Vec dx(x.size());
  ref::avgpool_backward(r.data(), dx.data(), n, c, hw);
  expect_ok(check_gradient<double>(f, x.data(), x.size(), dx, {}), "avgpool dx");

  const int in = 6, out = 4;
  Vec a = randn(size_t(n) * in, 17), w = randn(size_t(out) * in, 18), b = randn(out, 19),
      ro = randn(size_t(n) * out, 20), yo(size_t(n) * out);
  auto g = [&] {
    ref::linear_forward(n, in, out, a.data(), w.data(), b.data(), yo.data());
    return dot(yo, ro);
  };
  Vec da(a.size()), dw(w.size(), 0.0), db(out, 0.0);
  ref::linear_backward(n, in, out, a.data(), ro.data(), w.data(), da.data(), dw.data(), db.data());
  expect_ok(check_gradient<double>(g, a.data(), a.size(), da, {}), "linear dx");
  expect_ok(check_gradient<double>(g, w.data(), w.size(), dw, {}), "linear dw");
  expect_ok(check_gradient<double>(g, b.data(), b.size(), db, {}), "linear db");
}

// The loss works in float: a looser check, with label smoothing on.
TEST(NnGradcheck, SoftmaxCrossEntropy) {
  const int n = 4, k = 5;
  std::vector<float> z(n * k), dz(n * k);
  std::mt19937 g(21);
  std::normal_distribution<float> d(0.f, 1.f);
  for (float& v : z) v = d(g);
  std::vector<int32_t> y = {0, 3, 4, 1};
  for (float eps : {0.f, 0.1f}) {
    softmax_cross_entropy(z.data(), y.data(), n, k, eps, dz.data(), nullptr);
    auto f = [&] { return softmax_cross_entropy(z.data(), y.data(), n, k, eps, nullptr, nullptr); };
    Vec ana(dz.begin(), dz.end());
    GradCheckOptions o;
    o.h = 1e-2, o.rtol = 1e-2, o.atol = 1e-4, o.kink_tol = 0.5;
    expect_ok(check_gradient<float>(f, z.data(), z.size(), ana, o), "softmax CE");
  }
  // Loss value against a hand computation: uniform logits -> log(k).
  std::vector<float> u(k, 0.5f);
  int correct = -1;
  int32_t lab = 2;
  EXPECT_NEAR(softmax_cross_entropy(u.data(), &lab, 1, k, 0.f, nullptr, &correct), std::log(5.0),
              1e-6);
  EXPECT_EQ(correct, 0);  // ties: argmax is the first class
}

// Generalized cross-entropy: the gradient matches finite differences for several q, the
// value at uniform logits is (1 - k^-q) / q, and the gradient is the cross-entropy's scaled
// by p_y^q per sample (what makes a sample the model disagrees with pull less).
TEST(NnGradcheck, GeneralizedCrossEntropy) {
  const int n = 4, k = 5;
  std::vector<float> z(n * k), dz(n * k), dce(n * k);
  std::mt19937 g(22);
  std::normal_distribution<float> d(0.f, 1.5f);
  for (float& v : z) v = d(g);
  std::vector<int32_t> y = {1, 0, 4, 2};
  for (float q : {0.3f, 0.7f, 1.f}) {
    generalized_cross_entropy(z.data(), y.data(), n, k, q, dz.data(), nullptr);
    auto f = [&] {
      return generalized_cross_entropy(z.data(), y.data(), n, k, q, nullptr, nullptr);
    };
    Vec ana(dz.begin(), dz.end());
    GradCheckOptions o;
    o.h = 1e-2, o.rtol = 1e-2, o.atol = 1e-4, o.kink_tol = 0.5;
    expect_ok(check_gradient<float>(f, z.data(), z.size(), ana, o), "GCE");
    softmax_cross_entropy(z.data(), y.data(), n, k, 0.f, dce.data(), nullptr);
    for (int i = 0; i < n; ++i) {
      const float* zi = z.data() + i * k;
      double sum = 0;
      for (int j = 0; j < k; ++j) sum += std::exp(double(zi[j]));
      const double py_q = std::pow(std::exp(double(zi[y[i]])) / sum, double(q));
      for (int j = 0; j < k; ++j)
        EXPECT_NEAR(dz[i * k + j], py_q * dce[i * k + j], 1e-6) << "q " << q << " sample " << i;
    }
  }
  std::vector<float> u(k, -2.f);
  int correct = -1;
  int32_t lab = 3;
  EXPECT_NEAR(generalized_cross_entropy(u.data(), &lab, 1, k, 0.5f, nullptr, &correct),
              (1.0 - std::pow(5.0, -0.5)) / 0.5, 1e-6);
  EXPECT_EQ(correct, 0);
}
