// The op-by-op suite every backend x dtype passes: each op of backend.hpp against the fp32
// "ref" backend (the truth), forward and backward, on fresh random inputs with outputs
// poisoned (NaN) before each call, so an op that skips part of its output fails.
//
// Parameterised (gtest TEST_P) by OpCase {backend, dtype, tolerance}; a test binary includes
// this header once and instantiates it for the cases it runs:
//   using namespace sieve::nn::op_suite;
//   INSTANTIATE_TEST_SUITE_P(Host, BackendOps, ::testing::Values(OpCase{"cpu", DType::f32, 1e-5}),
//                            op_case_name);
// Cases the machine cannot run (no GPU, a CPU without bf16) are skipped with the reason.
//
// bf16 cases: the inputs given to both sides are first rounded to bf16, so the comparison
// measures the op's own error (bf16 weights inside the op, bf16 outputs), not the inputs'
// rounding. Tolerances are max|a - b| / (1 + max|b|) over each output.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "nn/backend.hpp"

namespace sieve::nn::op_suite {

struct OpCase {
  std::string backend;
  DType dtype;
  double tol;  // relative tolerance of every comparison (see above)
};

// gtest prints a failing case's parameter with this (not as raw bytes).
inline void PrintTo(const OpCase& c, std::ostream* os) {
  *os << c.backend << " " << dtype_name(c.dtype) << " tol " << c.tol;
}

inline std::string op_case_name(const ::testing::TestParamInfo<OpCase>& info) {
  return info.param.backend + "_" + dtype_name(info.param.dtype);
}

using Vec = std::vector<float>;

inline Vec randn(size_t n, uint32_t seed, float scale = 1.f, float shift = 0.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  Vec v(n);
  for (float& x : v) x = scale * d(g) + shift;
  return v;
}

// max |a-b| / (1 + max|b|): relative to the scale of the reference values. NaN counts as
// infinitely wrong.
inline double rel_diff(const Vec& a, const Vec& b) {
  double m = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = std::abs(double(a[i]) - double(b[i]));
    if (!(d == d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
    s = std::max(s, double(std::abs(b[i])));
  }
  return m / (1.0 + s);
}

inline std::string testing_shape(const ConvShape& s) {
  std::ostringstream o;
  o << "n" << s.n << " c" << s.c << " " << s.h << "x" << s.w << " k" << s.k << " " << s.r << "x"
    << s.s << "/" << s.stride << " pad " << s.pad;
  return o.str();
}

class BackendOps : public ::testing::TestWithParam<OpCase> {
 protected:
  void SetUp() override {
    std::string why;
    if (!backend_supports(GetParam().backend, GetParam().dtype, false, &why))
      GTEST_SKIP() << GetParam().backend << " " << dtype_name(GetParam().dtype) << ": " << why;
    be_ = &backend(GetParam().backend, GetParam().dtype);
  }
  Backend& be() { return *be_; }
  Backend& truth() { return backend("ref"); }
  double tol() const { return GetParam().tol; }
  bool bf16() const { return GetParam().dtype == DType::bf16; }

  // Host values as the dtype represents them (rounded to bf16 in bf16 cases).
  Vec exact(Vec v) const {
    if (bf16())
      for (float& x : v) x = from_bf16(to_bf16(x));
    return v;
  }
  // An activation buffer on the backend's device holding `v`.
  Tensor act(const Vec& v) {
    Tensor t(be(), be().dtype());
    t.resize({int64_t(v.size())});
    be().act_from_host(v.data(), t.raw(), v.size());
    return t;
  }
  // An activation buffer of n elements, poisoned with NaN.
  Tensor poisoned(size_t n) { return act(Vec(n, std::numeric_limits<float>::quiet_NaN())); }
  Vec host(const Tensor& t, size_t n) {
    Vec v(n);
    be().act_to_host(t.raw(), v.data(), n);
    return v;
  }
  // fp32 parameters (or gradients, statistics) on the device.
  Tensor param(const Vec& v) {
    Tensor t(be(), DType::f32);
    t.resize({int64_t(v.size())});
    be().to_device(t.raw(), v.data(), v.size() * sizeof(float));
    return t;
  }
  Vec host_f32(const Tensor& t, size_t n) {
    Vec v(n);
    be().to_host(v.data(), t.raw(), n * sizeof(float));
    return v;
  }

 private:
  Backend* be_ = nullptr;
};

TEST_P(BackendOps, Conv) {
  for (ConvShape s :
       {ConvShape{3, 3, 9, 9, 8, 3, 3, 1, 1}, ConvShape{2, 16, 8, 8, 32, 3, 3, 2, 1},
        ConvShape{2, 16, 8, 8, 32, 1, 1, 2, 0}, ConvShape{2, 3, 15, 15, 16, 7, 7, 2, 3},
        ConvShape{4, 5, 4, 4, 6, 3, 3, 1, 1}, ConvShape{2, 4, 8, 8, 8, 3, 3, 2, 1},
        ConvShape{2, 4, 8, 8, 8, 1, 1, 2, 0},    // the last two: a 4-channel downsample
        ConvShape{3, 16, 7, 5, 24, 1, 1, 1, 0},  // a bottleneck's 1x1 (a GEMM on cuda fp32)
        // 3x3 over 1x1 and 2x2 maps (ResNet's last stages on small images), strided and not,
        // and a non-square one: where oneDNN's AVX2 build has no jit kernel for the weight
        // gradient, the cpu backend's own im2col + sgemm computes it.
        ConvShape{4, 16, 1, 1, 24, 3, 3, 1, 1}, ConvShape{4, 8, 2, 2, 16, 3, 3, 1, 1},
        ConvShape{4, 8, 2, 2, 16, 3, 3, 2, 1}, ConvShape{3, 5, 2, 3, 7, 3, 3, 1, 1}}) {
    const size_t nx = size_t(s.n) * s.c * s.h * s.w, nw = size_t(s.k) * s.c * s.r * s.s,
                 ny = size_t(s.n) * s.k * s.oh() * s.ow();
    const Vec x = exact(randn(nx, 1)), w = randn(nw, 2), dy = exact(randn(ny, 3));
    const std::string what = testing_shape(s);
    auto op = be().conv2d(s);
    auto ref = truth().conv2d(s);
    Tensor xd = act(x), dyd = act(dy), wd = param(w), y = poisoned(ny), dx = poisoned(nx);
    Tensor dw = param(Vec(nw, 0.5f));  // weight gradients accumulate onto what is there
    Vec y2(ny), dx2(nx), dw2(nw, 0.5f);
    op->forward(xd.raw(), wd.data(), y.raw());
    ref->forward(x.data(), w.data(), y2.data());
    EXPECT_LT(rel_diff(host(y, ny), y2), tol()) << "conv forward " << what;
    op->backward_data(dyd.raw(), wd.data(), dx.raw());
    ref->backward_data(dy.data(), w.data(), dx2.data());
    EXPECT_LT(rel_diff(host(dx, nx), dx2), tol()) << "conv backward data " << what;
    op->backward_weights(xd.raw(), dyd.raw(), dw.data());
    ref->backward_weights(x.data(), dy.data(), dw2.data());
    EXPECT_LT(rel_diff(host_f32(dw, nw), dw2), tol()) << "conv backward weights " << what;
  }
}

// What makes a convolution bf16: bf16 x bf16 products (exact in fp32) summed in fp32 and
// rounded once to bf16. Given bf16 inputs, it is the fp32 reference on the same inputs with
// the weights rounded to bf16, rounded once: equal to the last bit except where the fp32 sum
// sits next to a rounding boundary (the order of summation differs), and never more than one
// bf16 step apart, plus what fp32 summation in any order may lose (a small multiple of 2^-24
// of sum |x||w|: it matters only for outputs that cancel to near zero). Fails if a backend
// keeps fp32 weights or rounds anywhere else.
TEST_P(BackendOps, Bf16ConvIsBf16ProductsSummedInFp32) {
  if (!bf16()) GTEST_SKIP() << "bf16 cases only";
  const ConvShape s{2, 16, 8, 8, 32, 3, 3, 1, 1};
  const size_t nx = size_t(s.n) * s.c * s.h * s.w, nw = size_t(s.k) * s.c * s.r * s.s,
               ny = size_t(s.n) * s.k * s.oh() * s.ow();
  const Vec x = exact(randn(nx, 11)), w = randn(nw, 12), dy = exact(randn(ny, 13));
  auto op = be().conv2d(s);
  auto ref = truth().conv2d(s);
  Tensor xd = act(x), dyd = act(dy), wd = param(w), y = poisoned(ny), dx = poisoned(nx);
  Vec y2(ny), dx2(nx), y_abs(ny), dx_abs(nx);
  auto abs_of = [](Vec v) {
    for (float& e : v) e = std::abs(e);
    return v;
  };
  op->forward(xd.raw(), wd.data(), y.raw());
  ref->forward(x.data(), exact(w).data(), y2.data());
  ref->forward(abs_of(x).data(), abs_of(exact(w)).data(), y_abs.data());
  op->backward_data(dyd.raw(), wd.data(), dx.raw());
  ref->backward_data(dy.data(), exact(w).data(), dx2.data());
  ref->backward_data(abs_of(dy).data(), abs_of(exact(w)).data(), dx_abs.data());
  for (auto [got, want, magnitude, what] :
       {std::tuple{host(y, ny), exact(y2), y_abs, "forward"},
        std::tuple{host(dx, nx), exact(dx2), dx_abs, "backward data"}}) {
    size_t same = 0, beyond_one_step = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      same += got[i] == want[i];
      // one bf16 step at |want| (2^-7 of it at most: 8 significant bits), and fp32
      // summation's loss on sum |x||w| (144 terms here; 2^-16 is 4x the worst-case bound)
      beyond_one_step += std::abs(got[i] - want[i]) >
                         std::ldexp(std::abs(want[i]), -7) + std::ldexp(magnitude[i], -16);
    }
    EXPECT_EQ(beyond_one_step, 0u) << what;
    EXPECT_GE(double(same), 0.98 * double(got.size())) << what << ": " << same << " of "
                                                       << got.size() << " equal";
  }
}

TEST_P(BackendOps, BatchNormTrainEvalFused) {
  for (bool relu : {false, true}) {
    const int n = 4, c = 19, h = 5, w = 3;
    const size_t nx = size_t(n) * c * h * w;
    const Vec x = exact(randn(nx, 4, 3.f, 1.f)), g = randn(c, 5), b = randn(c, 6),
              dy = exact(randn(nx, 7));
    auto op = be().batchnorm(n, c, h, w, relu, 0.1f, 1e-5f);
    auto ref = truth().batchnorm(n, c, h, w, relu, 0.1f, 1e-5f);
    Tensor xd = act(x), dyd = act(dy), gd = param(g), bd = param(b), y = poisoned(nx),
           dx = poisoned(nx);
    Tensor rm = param(Vec(c, 0.f)), rv = param(Vec(c, 1.f)), dg = param(Vec(c, 0.25f)),
           db = param(Vec(c, -0.25f));
    Vec y2(nx), dx2(nx), rm2(c, 0.f), rv2(c, 1.f), dg2(c, 0.25f), db2(c, -0.25f);
    op->forward(xd.raw(), gd.data(), bd.data(), rm.data(), rv.data(), y.raw(), true);
    ref->forward(x.data(), g.data(), b.data(), rm2.data(), rv2.data(), y2.data(), true);
    const Vec y1 = host(y, nx);
    EXPECT_LT(rel_diff(y1, y2), tol()) << "bn train forward relu=" << relu;
    // Running statistics are fp32 whatever the dtype: only the input rounding separates them.
    EXPECT_LT(rel_diff(host_f32(rm, c), rm2), 1e-5) << "running mean relu=" << relu;
    EXPECT_LT(rel_diff(host_f32(rv, c), rv2), 1e-5) << "running var relu=" << relu;
    op->backward(xd.raw(), y.raw(), dyd.raw(), gd.data(), dx.raw(), dg.data(), db.data());
    // The reference's backward sees the same forward output the op produced (its ReLU mask).
    ref->backward(x.data(), exact(y1).data(), dy.data(), g.data(), dx2.data(), dg2.data(),
                  db2.data());
    EXPECT_LT(rel_diff(host(dx, nx), dx2), 10 * tol()) << "bn backward dx relu=" << relu;
    EXPECT_LT(rel_diff(host_f32(dg, c), dg2), 10 * tol()) << "bn dgamma relu=" << relu;
    EXPECT_LT(rel_diff(host_f32(db, c), db2), 10 * tol()) << "bn dbeta relu=" << relu;
    Tensor ye = poisoned(nx);
    op->forward(xd.raw(), gd.data(), bd.data(), rm.data(), rv.data(), ye.raw(), false);
    ref->forward(x.data(), g.data(), b.data(), rm2.data(), rv2.data(), y2.data(), false);
    EXPECT_LT(rel_diff(host(ye, nx), y2), tol()) << "bn eval relu=" << relu;
  }
}

// PyTorch's running statistics: momentum 0.1, unbiased variance. One channel, values 0 and
// 2: mean 1, biased var 1, unbiased var 2 -> running mean 0.1, running var 0.9 + 0.2 = 1.1.
TEST_P(BackendOps, BatchNormRunningStatsAsPyTorch) {
  auto op = be().batchnorm(2, 1, 1, 1, false, 0.1f, 1e-5f);
  Tensor x = act({0.f, 2.f}), y = poisoned(2), one = param({1.f}), zero = param({0.f}),
         rm = param({0.f}), rv = param({1.f});
  op->forward(x.raw(), one.data(), zero.data(), rm.data(), rv.data(), y.raw(), true);
  EXPECT_NEAR(host_f32(rm, 1)[0], 0.1f, 1e-6);
  EXPECT_NEAR(host_f32(rv, 1)[0], 1.1f, 1e-6);
  const Vec yh = host(y, 2);  // (x - 1) / sqrt(1 + eps)
  EXPECT_NEAR(yh[0], -1.f, 1e-4);
  EXPECT_NEAR(yh[1], 1.f, 1e-4);
}

TEST_P(BackendOps, MaxPool) {
  for (PoolShape s : {PoolShape{2, 5, 9, 9, 3, 2, 1}, PoolShape{2, 16, 8, 8, 2, 2, 0}}) {
    const size_t nx = size_t(s.n) * s.c * s.h * s.w, ny = size_t(s.n) * s.c * s.oh() * s.ow();
    // Values distinct inside every window and exact in bf16 (k/16, |k| <= 48), so the
    // arg-max, and with it the gradient's route, is the same for every backend and dtype.
    Vec x(nx);
    for (int n = 0; n < s.n; ++n)
      for (int y = 0; y < s.h; ++y)
        for (int xx = 0; xx < s.w; ++xx)
          for (int c = 0; c < s.c; ++c)
            x[((size_t(n) * s.h + y) * s.w + xx) * s.c + c] =
                float((y * 7 + xx * 13 + c * 5 + n * 11) % 97 - 48) / 16.f;
    const Vec dy = exact(randn(ny, 9));
    auto op = be().maxpool(s);
    auto ref = truth().maxpool(s);
    Tensor xd = act(x), dyd = act(dy), y = poisoned(ny), dx = poisoned(nx);
    Vec y2(ny), dx2(nx);
    op->forward(xd.raw(), y.raw(), true);
    ref->forward(x.data(), y2.data(), true);
    EXPECT_EQ(host(y, ny), y2) << "maxpool forward k=" << s.kernel;
    op->backward(xd.raw(), dyd.raw(), dx.raw());
    ref->backward(x.data(), dy.data(), dx2.data());
    EXPECT_LT(rel_diff(host(dx, nx), dx2), tol()) << "maxpool backward k=" << s.kernel;
  }
}

TEST_P(BackendOps, Linear) {
  for (bool with_dx : {true, false}) {
    const int n = 7, in = 33, out = 10;
    const Vec x = exact(randn(size_t(n) * in, 10)), w = randn(size_t(out) * in, 11),
              b = randn(out, 12), dy = exact(randn(size_t(n) * out, 13));
    auto op = be().linear(n, in, out);
    auto ref = truth().linear(n, in, out);
    Tensor xd = act(x), dyd = act(dy), wd = param(w), bd = param(b), y = poisoned(n * out),
           dx = poisoned(n * in), dw = param(Vec(out * in, 1.f)), db = param(Vec(out, 1.f));
    Vec y2(n * out), dx2(n * in), dw2(out * in, 1.f), db2(out, 1.f);
    op->forward(xd.raw(), wd.data(), bd.data(), y.raw());
    ref->forward(x.data(), w.data(), b.data(), y2.data());
    EXPECT_LT(rel_diff(host(y, n * out), y2), tol());
    op->backward(xd.raw(), dyd.raw(), wd.data(), with_dx ? dx.raw() : nullptr, dw.data(),
                 db.data());
    ref->backward(x.data(), dy.data(), w.data(), dx2.data(), dw2.data(), db2.data());
    if (with_dx) {
      EXPECT_LT(rel_diff(host(dx, n * in), dx2), tol());
    }
    EXPECT_LT(rel_diff(host_f32(dw, out * in), dw2), tol()) << "dx=" << with_dx;
    EXPECT_LT(rel_diff(host_f32(db, out), db2), tol()) << "dx=" << with_dx;
  }
}

TEST_P(BackendOps, ReluAddAvgPool) {
  const size_t m = 1000;
  const Vec u = exact(randn(m, 14)), du = exact(randn(m, 15));
  Vec v2(m), g2(m), s2(m);
  truth().relu_forward(u.data(), v2.data(), m);
  truth().relu_backward(v2.data(), du.data(), g2.data(), m);
  truth().add(u.data(), du.data(), s2.data(), m);
  Tensor ud = act(u), dud = act(du), v = poisoned(m), g = poisoned(m), sum = poisoned(m);
  be().relu_forward(ud.raw(), v.raw(), m);
  be().relu_backward(v.raw(), dud.raw(), g.raw(), m);
  be().add(ud.raw(), dud.raw(), sum.raw(), m);
  EXPECT_EQ(host(v, m), v2);  // exact: max(x, 0) needs no rounding
  EXPECT_EQ(host(g, m), g2);
  EXPECT_LT(rel_diff(host(sum, m), s2), tol());

  const int n = 7, c = 6, hw = 9;
  const Vec p = exact(randn(size_t(n) * hw * c, 16)), dq = exact(randn(size_t(n) * c, 17));
  Vec q2(n * c), dp2(p.size());
  truth().avgpool_forward(p.data(), q2.data(), n, c, hw);
  truth().avgpool_backward(dq.data(), dp2.data(), n, c, hw);
  Tensor pd = act(p), dqd = act(dq), q = poisoned(n * c), dp = poisoned(p.size());
  be().avgpool_forward(pd.raw(), q.raw(), n, c, hw);
  be().avgpool_backward(dqd.raw(), dp.raw(), n, c, hw);
  EXPECT_LT(rel_diff(host(q, n * c), q2), tol());
  EXPECT_LT(rel_diff(host(dp, p.size()), dp2), tol());
}

// The edges: a host NCHW batch arrives NHWC in the dtype; activations round-trip to the host.
TEST_P(BackendOps, EdgesAndAxpy) {
  const int n = 3, c = 5, h = 4, w = 6;
  const size_t count = size_t(n) * c * h * w;
  const Vec x = randn(count, 18);
  Tensor y = poisoned(count);
  be().load_input(x.data(), y.raw(), n, c, h, w);
  const Vec got = host(y, count);
  const Vec want = exact(x);
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < h * w; ++p)
        ASSERT_EQ(got[(size_t(i) * h * w + p) * c + ch], want[(size_t(i) * c + ch) * h * w + p])
            << "sample " << i << " channel " << ch << " pixel " << p;
  EXPECT_EQ(host(act(x), count), want);  // act_from_host then act_to_host

  const Vec a = randn(1001, 19), b = randn(1001, 20);
  Tensor ad = param(a), bd = param(b);
  be().axpy(-0.5f, ad.data(), bd.data(), a.size());
  const Vec r = host_f32(bd, a.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_FLOAT_EQ(r[i], b[i] - 0.5f * a[i]) << i;
}

}  // namespace sieve::nn::op_suite
