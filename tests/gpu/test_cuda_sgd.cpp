// The CUDA backend's optimizer step (cuda/sgd.cu: sum, sgd_norms, sgd_apply) against
// nn/sgd.hpp's host loops on the same data, and its gradient reducer (cuda/grad_reducer.cpp)
// on the ranks this binary runs with: one under ctest; `mpiexec -n R` on R GPUs runs the
// NCCL path. Exit 77 without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "cuda/device.hpp"
#include "cuda/nccl_comm.hpp"
#include "gpu/cuda_test_env.hpp"
#include "nn/backend.hpp"
#include "nn/sgd.hpp"

using namespace sieve::nn;

namespace {

using Vec = std::vector<float>;
using Kind = SgdTerm::Kind;

Vec randn(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  Vec v(n);
  for (float& x : v) x = scale * d(g);
  return v;
}

Tensor on_device(Backend& be, const Vec& host) {
  Tensor t(be, DType::f32);
  t.resize({int64_t(host.size())});
  be.to_device(t.raw(), host.data(), host.size() * sizeof(float));
  return t;
}

Vec to_host(Backend& be, const Tensor& t) {
  Vec v(t.size());
  be.to_host(v.data(), t.raw(), v.size() * sizeof(float));
  return v;
}

// max over i of |got - want| / (1 + |want|); NaN is infinitely wrong.
double rel_err(const Vec& got, const Vec& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::abs(double(got[i]) - double(want[i])) / (1.0 + std::abs(want[i]));
    if (!(d == d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}

// Terms of every kind over a buffer with plain elements before, between and after them: a
// 1-element l2 term, a lars term over more than 1M elements, a 1-element and an empty lars
// term, decoupled decay alone and with l2; handed over out of offset order.
std::vector<SgdTerm> make_terms(size_t& total) {
  std::vector<SgdTerm> terms;
  size_t at = 3;  // [0, 3) in no term
  auto add = [&](size_t count, Kind kind, float l2, float decoupled, size_t gap_after = 0) {
    SgdTerm t;
    t.offset = at, t.count = count, t.kind = kind, t.l2 = l2, t.decoupled = decoupled;
    terms.push_back(t);
    at += count + gap_after;
  };
  add(1, Kind::l2, 5e-4f, 0.f);
  add(1000, Kind::lars, 5e-4f, 0.f, 26);
  add((size_t(1) << 20) + 7, Kind::lars, 0.f, 1e-3f, 5);
  add(4099, Kind::plain, 0.f, 5e-4f);
  add(777, Kind::l2, 5e-4f, 2e-3f);
  add(1, Kind::lars, 5e-4f, 0.f);
  add(0, Kind::lars, 5e-4f, 0.f);
  add(33, Kind::plain, 0.f, 0.f);
  total = at + 11;
  std::reverse(terms.begin(), terms.end());
  std::swap(terms[1], terms[4]);
  return terms;
}

// The LARS trust ratios from the norms, as train::SgdOptimizer::set_trust computes them.
void set_trust(std::vector<SgdTerm>& terms, const std::vector<double>& norms) {
  const double eta = 0.02;
  for (size_t k = 0; k < terms.size(); ++k) {
    if (terms[k].kind != Kind::lars) continue;
    const double wn = norms[2 * k], gn = norms[2 * k + 1];
    terms[k].trust = wn > 0 && gn > 0 ? float(eta * wn / (gn + terms[k].l2 * wn)) : 1.f;
  }
}

// Both sides' norms of one step: lars terms equal to ~1e-10 (the order of the double sums
// differs), others untouched.
void expect_norms_match(const std::vector<SgdTerm>& terms, const std::vector<double>& dev,
                        const std::vector<double>& host) {
  for (size_t k = 0; k < terms.size(); ++k)
    for (size_t j = 2 * k; j < 2 * k + 2; ++j) {
      if (terms[k].kind != Kind::lars) {
        EXPECT_EQ(dev[j], -1.0) << "norm " << j << " of a term that is not lars was written";
        continue;
      }
      EXPECT_NEAR(dev[j], host[j], 1e-10 * (1.0 + host[j])) << "norm " << j;
    }
}

void run_steps(bool nesterov) {
  SCOPED_TRACE(nesterov ? "nesterov" : "momentum");
  Backend& be = backend("cuda");
  size_t total = 0;
  const std::vector<SgdTerm> terms = make_terms(total);
  const size_t n = terms.size();
  Vec w = randn(total, 1), v = randn(total, 2, 0.1f), scratch(total, 0.f);
  Tensor dw = on_device(be, w), dv = on_device(be, v), ds = on_device(be, scratch);
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const Vec g = randn(total, 100 + step, 0.1f);
    Tensor dg = on_device(be, g);
    std::vector<double> norms_host(2 * n, -1.0), norms_dev(2 * n, -1.0);
    sgd_norms_host(w.data(), g.data(), terms.data(), n, norms_host.data());
    be.sgd_norms(dw.data(), dg.data(), terms.data(), n, norms_dev.data());
    expect_norms_match(terms, norms_dev, norms_host);
    // Each side steps with its own norms, as the trainer would.
    std::vector<SgdTerm> terms_host = terms, terms_dev = terms;
    set_trust(terms_host, norms_host);
    set_trust(terms_dev, norms_dev);
    const SgdStep s{0.1f * float(step + 1), 0.9f, nesterov};
    sgd_apply_host({w.data(), g.data(), v.data(), scratch.data()}, 0, total, terms_host.data(), n,
                   s);
    be.sgd_apply({dw.data(), dg.data(), dv.data(), ds.data()}, total, terms_dev.data(), n, s);
    EXPECT_LE(rel_err(to_host(be, dw), w), 2e-6) << "parameters";
    EXPECT_LE(rel_err(to_host(be, dv), v), 2e-6) << "velocity";
    EXPECT_LE(rel_err(to_host(be, ds), scratch), 2e-6) << "effective gradient (scratch)";
    EXPECT_TRUE(to_host(be, dg) == g) << "the gradients must be left as they are";
  }
}

}  // namespace

TEST(CudaSgd, ApplyMatchesHostWithMomentum) {
  run_steps(false);
}

TEST(CudaSgd, ApplyMatchesHostWithNesterov) {
  run_steps(true);
}

TEST(CudaSgd, NormsLeaveTermsOtherThanLarsAlone) {
  Backend& be = backend("cuda");
  const Vec w = randn(100, 3), g = randn(100, 4);
  Tensor dw = on_device(be, w), dg = on_device(be, g);
  SgdTerm a, b;
  a.offset = 0, a.count = 50, a.kind = Kind::l2, a.l2 = 1e-3f;
  b.offset = 50, b.count = 50, b.kind = Kind::plain;
  const std::vector<SgdTerm> terms{a, b};
  std::vector<double> norms(4, -1.0);
  be.sgd_norms(dw.data(), dg.data(), terms.data(), terms.size(), norms.data());
  EXPECT_EQ(norms, std::vector<double>(4, -1.0));
}

// A step over a buffer with no terms is plain momentum SGD on every element.
TEST(CudaSgd, ApplyWithoutTermsIsPlain) {
  Backend& be = backend("cuda");
  const size_t total = 10007;
  Vec w = randn(total, 5), v(total, 0.f), scratch(total, 0.f);
  const Vec g = randn(total, 6);
  Tensor dw = on_device(be, w), dv = on_device(be, v), ds = on_device(be, scratch);
  Tensor dg = on_device(be, g);
  const SgdStep s{0.05f, 0.9f, false};
  sgd_apply_host({w.data(), g.data(), v.data(), scratch.data()}, 0, total, nullptr, 0, s);
  be.sgd_apply({dw.data(), dg.data(), dv.data(), ds.data()}, total, nullptr, 0, s);
  EXPECT_LE(rel_err(to_host(be, dw), w), 2e-6);
  EXPECT_LE(rel_err(to_host(be, dv), v), 2e-6);
}

TEST(CudaSgd, SumMatchesHostDoubleSum) {
  Backend& be = backend("cuda");
  const size_t n = 3'000'001;
  Vec x = randn(n + 1, 7);
  Tensor dx = on_device(be, x);
  double want = 0, scale = 0;
  for (size_t i = 1; i <= n; ++i) want += x[i], scale += std::abs(x[i]);
  EXPECT_NEAR(be.sum(dx.data() + 1, n), want, 1e-9 * scale) << "unaligned, many blocks";
  EXPECT_EQ(be.sum(dx.data(), 0), 0.0);
  EXPECT_EQ(be.sum(dx.data() + 5, 1), double(x[5]));
  for (size_t count : {size_t(4095), size_t(4096), size_t(4097)}) {
    double part = 0;
    for (size_t i = 0; i < count; ++i) part += x[i];
    EXPECT_NEAR(be.sum(dx.data(), count), part, 1e-12 * (1.0 + std::abs(part))) << count;
  }
  x[2'000'000] = std::numeric_limits<float>::quiet_NaN();
  be.to_device(dx.raw(), x.data(), x.size() * sizeof(float));
  EXPECT_TRUE(std::isnan(be.sum(dx.data(), n + 1)));
  x[2'000'000] = std::numeric_limits<float>::infinity();
  be.to_device(dx.raw(), x.data(), x.size() * sizeof(float));
  EXPECT_FALSE(std::isfinite(be.sum(dx.data(), n + 1)));
}

// Every piece summed over the ranks exactly once per step, whether ready() completed it (in
// backward's order, last layer first), or finish() did: a piece of alignment padding only, or
// a step whose hook reported nothing. Each rank has the same input: the sum is R times it.
TEST(CudaGradReducer, SumsEveryPieceOnceOverRanks) {
  const sieve::Comm world = sieve::Comm::world();
  if (world.size() > sieve::cuda::device_count())
    GTEST_SKIP() << world.size() << " ranks but " << sieve::cuda::device_count() << " GPUs";
  sieve::cuda::select_local_device(world);
  Backend& be = backend("cuda");
  const size_t total = 10000;
  const std::vector<size_t> cuts{0, 1000, 1010, 4000, 10000};  // [1000, 1010): padding only
  const std::vector<std::pair<size_t, size_t>> covered{{0, 1000}, {1010, 2990}, {4000, 5995}};
  Vec input(total);
  for (size_t i = 0; i < total; ++i) input[i] = float(int(i % 251) - 125);  // sums exact
  Tensor dg = on_device(be, input);
  auto reducer = be.device_reducer(world, dg.data(), total, cuts, covered);
  ASSERT_NE(reducer, nullptr);
  EXPECT_EQ(reducer->num_buckets(), cuts.size() - 1);
  const int ranks = world.size();
  for (int step = 0; step < 3; ++step) {
    be.to_device(dg.raw(), input.data(), total * sizeof(float));
    reducer->ready(0, total);  // before arm(): ignored
    reducer->arm();
    if (step != 2)
      for (auto r = covered.rbegin(); r != covered.rend(); ++r)
        for (size_t end = r->first + r->second; end > r->first;) {
          const size_t begin = end - std::min<size_t>(700, end - r->first);
          reducer->ready(begin, end - begin);
          end = begin;
        }
    reducer->finish();
    const Vec got = to_host(be, dg);
    for (size_t i = 0; i < total; ++i)
      ASSERT_EQ(got[i], float(ranks) * input[i]) << "step " << step << ", element " << i;
  }
  if (ranks == 1) {
    EXPECT_EQ(reducer->messages(), 0) << "one rank: nothing to send";
    EXPECT_EQ(reducer->started_early(), 0);
  } else {
    EXPECT_EQ(reducer->messages(), 3 * 4);
    EXPECT_EQ(reducer->started_early(), 2 * 3) << "3 covered pieces completed by ready()";
  }
}
