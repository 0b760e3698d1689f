// The optimised "cpu" backend (oneDNN + OpenBLAS) agrees with the "ref" backend (naive loops)
// forward and backward on random inputs, for every op, including odd sizes and strides.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nn/backend.hpp"
#include "util/error.hpp"

using namespace sieve::nn;
using Vec = std::vector<float>;

namespace {

Vec randn(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  Vec v(n);
  for (float& x : v) x = d(g);
  return v;
}
// max |a-b| / (1 + max|b|): relative to the scale of the reference values.
double rel_diff(const Vec& a, const Vec& b) {
  double m = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, double(std::abs(a[i] - b[i])));
    s = std::max(s, double(std::abs(b[i])));
  }
  return m / (1.0 + s);
}
constexpr double kTol = 1e-5;  // float accumulation-order differences only
Backend& cpu() {
  return backend("cpu");
}
Backend& ref() {
  return backend("ref");
}

}  // namespace

TEST(NnBackends, Conv) {
  for (ConvShape s :
       {ConvShape{3, 3, 9, 9, 8, 3, 3, 1, 1}, ConvShape{2, 16, 8, 8, 32, 3, 3, 2, 1},
        ConvShape{2, 16, 8, 8, 32, 1, 1, 2, 0}, ConvShape{2, 3, 15, 15, 16, 7, 7, 2, 3},
        ConvShape{4, 5, 4, 4, 6, 3, 3, 1, 1}}) {
    size_t nx = size_t(s.n) * s.c * s.h * s.w, nw = size_t(s.k) * s.c * s.r * s.s,
           ny = size_t(s.n) * s.k * s.oh() * s.ow();
    Vec x = randn(nx, 1), w = randn(nw, 2), dy = randn(ny, 3);
    auto a = cpu().conv2d(s), b = ref().conv2d(s);
    Vec y1(ny), y2(ny), dx1(nx), dx2(nx), dw1(nw, 0.5f), dw2(nw, 0.5f);  // dw accumulates
    a->forward(x.data(), w.data(), y1.data());
    b->forward(x.data(), w.data(), y2.data());
    EXPECT_LT(rel_diff(y1, y2), kTol) << "conv fwd k=" << s.r;
    a->backward_data(dy.data(), w.data(), dx1.data());
    b->backward_data(dy.data(), w.data(), dx2.data());
    EXPECT_LT(rel_diff(dx1, dx2), kTol) << "conv bwd data k=" << s.r;
    a->backward_weights(x.data(), dy.data(), dw1.data());
    b->backward_weights(x.data(), dy.data(), dw2.data());
    EXPECT_LT(rel_diff(dw1, dw2), kTol) << "conv bwd weights k=" << s.r;
  }
}

TEST(NnBackends, BatchNormTrainEvalFused) {
  for (bool relu : {false, true}) {
    const int n = 4, c = 19, h = 5, w = 3;
    size_t nx = size_t(n) * c * h * w;
    Vec x = randn(nx, 4), g = randn(c, 5), bta = randn(c, 6), dy = randn(nx, 7);
    for (float& v : x) v = 3.f * v + 1.f;
    auto a = cpu().batchnorm(n, c, h, w, relu, 0.1f, 1e-5f);
    auto b = ref().batchnorm(n, c, h, w, relu, 0.1f, 1e-5f);
    Vec rm1(c, 0.f), rv1(c, 1.f), rm2(c, 0.f), rv2(c, 1.f), y1(nx), y2(nx);
    a->forward(x.data(), g.data(), bta.data(), rm1.data(), rv1.data(), y1.data(), true);
    b->forward(x.data(), g.data(), bta.data(), rm2.data(), rv2.data(), y2.data(), true);
    EXPECT_LT(rel_diff(y1, y2), kTol);
    EXPECT_LT(rel_diff(rm1, rm2), kTol);
    EXPECT_LT(rel_diff(rv1, rv2), kTol);
    Vec dx1(nx), dx2(nx), dg1(c, 0.f), dg2(c, 0.f), db1(c, 0.f), db2(c, 0.f);
    a->backward(x.data(), y1.data(), dy.data(), g.data(), dx1.data(), dg1.data(), db1.data());
    b->backward(x.data(), y2.data(), dy.data(), g.data(), dx2.data(), dg2.data(), db2.data());
    EXPECT_LT(rel_diff(dx1, dx2), 1e-4);
    EXPECT_LT(rel_diff(dg1, dg2), 1e-4);
    EXPECT_LT(rel_diff(db1, db2), 1e-4);
    a->forward(x.data(), g.data(), bta.data(), rm1.data(), rv1.data(), y1.data(), false);
    b->forward(x.data(), g.data(), bta.data(), rm2.data(), rv2.data(), y2.data(), false);
    EXPECT_LT(rel_diff(y1, y2), kTol) << "eval";
  }
  // Running stats as PyTorch: momentum 0.1, unbiased variance. One channel, values 0 and 2:
  // mean 1, biased var 1, unbiased var 2 -> running mean 0.1, running var 0.9 + 0.2 = 1.1.
  auto a = cpu().batchnorm(2, 1, 1, 1, false, 0.1f, 1e-5f);
  Vec x{0.f, 2.f}, y(2), one{1.f}, zero{0.f}, rm{0.f}, rv{1.f};
  a->forward(x.data(), one.data(), zero.data(), rm.data(), rv.data(), y.data(), true);
  EXPECT_NEAR(rm[0], 0.1f, 1e-6);
  EXPECT_NEAR(rv[0], 1.1f, 1e-6);
}

TEST(NnBackends, MaxPool) {
  for (PoolShape s : {PoolShape{2, 5, 9, 9, 3, 2, 1}, PoolShape{2, 16, 8, 8, 2, 2, 0}}) {
    size_t nx = size_t(s.n) * s.c * s.h * s.w, ny = size_t(s.n) * s.c * s.oh() * s.ow();
    Vec x = randn(nx, 8), dy = randn(ny, 9), y1(ny), y2(ny), dx1(nx), dx2(nx);
    auto a = cpu().maxpool(s), b = ref().maxpool(s);
    a->forward(x.data(), y1.data(), true);
    b->forward(x.data(), y2.data(), true);
    EXPECT_EQ(y1, y2);
    a->backward(x.data(), dy.data(), dx1.data());
    b->backward(x.data(), dy.data(), dx2.data());
    EXPECT_LT(rel_diff(dx1, dx2), kTol);
  }
}

TEST(NnBackends, LinearReluAvgPoolAdd) {
  const int n = 7, in = 33, out = 10;
  Vec x = randn(size_t(n) * in, 10), w = randn(size_t(out) * in, 11), b = randn(out, 12),
      dy = randn(size_t(n) * out, 13);
  auto a = cpu().linear(n, in, out), r = ref().linear(n, in, out);
  Vec y1(n * out), y2(n * out), dx1(n * in), dx2(n * in), dw1(out * in, 1.f), dw2(out * in, 1.f),
      db1(out, 1.f), db2(out, 1.f);
  a->forward(x.data(), w.data(), b.data(), y1.data());
  r->forward(x.data(), w.data(), b.data(), y2.data());
  EXPECT_LT(rel_diff(y1, y2), kTol);
  a->backward(x.data(), dy.data(), w.data(), dx1.data(), dw1.data(), db1.data());
  r->backward(x.data(), dy.data(), w.data(), dx2.data(), dw2.data(), db2.data());
  EXPECT_LT(rel_diff(dx1, dx2), kTol);
  EXPECT_LT(rel_diff(dw1, dw2), kTol);
  EXPECT_LT(rel_diff(db1, db2), kTol);

  const size_t m = 1000;
  Vec u = randn(m, 14), du = randn(m, 15), v1(m), v2(m), g1(m), g2(m);
  cpu().relu_forward(u.data(), v1.data(), m);
  ref().relu_forward(u.data(), v2.data(), m);
  EXPECT_EQ(v1, v2);
  cpu().relu_backward(v1.data(), du.data(), g1.data(), m);
  ref().relu_backward(v2.data(), du.data(), g2.data(), m);
  EXPECT_EQ(g1, g2);
  cpu().add(u.data(), du.data(), v1.data(), m);
  ref().add(u.data(), du.data(), v2.data(), m);
  EXPECT_EQ(v1, v2);

  const int c = 6, hw = 9;
  Vec p = randn(size_t(n) * hw * c, 16), q1(n * c), q2(n * c), dp1(p.size()), dp2(p.size());
  cpu().avgpool_forward(p.data(), q1.data(), n, c, hw);
  ref().avgpool_forward(p.data(), q2.data(), n, c, hw);
  EXPECT_LT(rel_diff(q1, q2), kTol);
  cpu().avgpool_backward(q1.data(), dp1.data(), n, c, hw);
  ref().avgpool_backward(q1.data(), dp2.data(), n, c, hw);
  EXPECT_LT(rel_diff(dp1, dp2), kTol);
}

TEST(NnBackends, RegistryNamesAndUnknown) {
  EXPECT_EQ(backend_names(), (std::vector<std::string>{"cpu", "ref"}));
  EXPECT_THROW(backend("tpu"), sieve::UsageError);
}
