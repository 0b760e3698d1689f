// Optimizers and LR schedules against independent double-precision references.
#include <gtest/gtest.h>

#include <cmath>

#include "train/optimizer.hpp"
#include "util/error.hpp"

using namespace sieve::train;

namespace {
// Two tensors: a weight [0,4) and a BN/bias [4,6) with padding [6,8) between nothing.
std::vector<ParamSlice> slices() {
  return {{"fc.weight", 0, 4, false}, {"fc.bias", 4, 2, true}};
}
std::vector<float> w0() { return {0.5f, -1.0f, 2.0f, 0.25f, 0.1f, -0.2f, 0.0f, 0.0f}; }
std::vector<float> g0() { return {0.1f, 0.2f, -0.3f, 0.05f, 1.0f, -1.0f, 0.0f, 0.0f}; }
}  // namespace

TEST(TrainOptim, SgdMomentumNesterovL2MatchesReference) {
  for (bool nesterov : {false, true}) {
    OptimizerOptions o;
    o.momentum = 0.9;
    o.nesterov = nesterov;
    o.weight_decay = 0.01;
    SgdOptimizer opt(slices(), 8, o);
    auto w = w0();
    std::vector<double> rw(w.begin(), w.end()), rv(8, 0.0);
    const double lr = 0.1;
    for (int step = 0; step < 3; ++step) {
      auto g = g0();
      for (size_t i = 0; i < 8; ++i) g[i] *= float(step + 1);
      opt.step(w.data(), g.data(), lr);
      for (size_t i = 0; i < 8; ++i) {
        double gi = double(g0()[i]) * (step + 1);
        if (i < 4) gi += 0.01 * rw[i];  // bias/BN excluded from decay by default
        rv[i] = 0.9 * rv[i] + gi;
        double d = nesterov ? gi + 0.9 * rv[i] : rv[i];
        rw[i] -= lr * d;
      }
    }
    for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(w[i], rw[i], 1e-6) << i << " nesterov " << nesterov;
  }
}

TEST(TrainOptim, DecoupledDecayAndBnBiasOption) {
  OptimizerOptions o;
  o.momentum = 0.0;
  o.nesterov = false;
  o.weight_decay = 0.1;
  o.decoupled = true;
  o.decay_bn_bias = true;
  SgdOptimizer opt(slices(), 8, o);
  auto w = w0();
  auto g = g0();
  opt.step(w.data(), g.data(), 0.5);
  for (size_t i = 0; i < 6; ++i) {
    double ref = w0()[i] - 0.5 * 0.1 * w0()[i] - 0.5 * g0()[i];
    EXPECT_NEAR(w[i], ref, 1e-6) << i;
  }
}

TEST(TrainOptim, LarsTrustRatioPerLayerExcludesBias) {
  OptimizerOptions o;
  o.momentum = 0.0;
  o.nesterov = false;
  o.weight_decay = 0.001;
  o.lars = true;
  o.lars_eta = 0.02;
  SgdOptimizer opt(slices(), 8, o);
  auto w = w0();
  auto g = g0();
  opt.step(w.data(), g.data(), 1.0);
  double wn = 0, gn = 0;
  for (int i = 0; i < 4; ++i) {
    wn += double(w0()[i]) * w0()[i];
    gn += double(g0()[i]) * g0()[i];
  }
  wn = std::sqrt(wn);
  gn = std::sqrt(gn);
  const double trust = 0.02 * wn / (gn + 0.001 * wn);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(w[i], w0()[i] - trust * (g0()[i] + 0.001 * w0()[i]), 1e-6) << i;
  for (int i = 4; i < 6; ++i) EXPECT_NEAR(w[i], w0()[i] - g0()[i], 1e-6) << i;  // plain SGD
}

TEST(TrainOptim, ScheduleLinearScalingWarmupStepAndCosine) {
  ScheduleOptions s;
  s.base_lr = 0.1;
  s.ref_batch = 256;
  s.global_batch = 1024;
  s.warmup_epochs = 2;
  s.epochs = 10;
  s.steps_per_epoch = 5;
  s.decay = Decay::Step;
  s.milestones = {5, 8};
  s.gamma = 0.1;
  LrSchedule a(s);
  EXPECT_DOUBLE_EQ(a.peak(), 0.4);
  EXPECT_NEAR(a.lr_at(0), 0.4 / 10, 1e-12);  // warm-up: 10 steps
  EXPECT_NEAR(a.lr_at(4), 0.4 * 5 / 10, 1e-12);
  EXPECT_NEAR(a.lr_at(9), 0.4, 1e-12);
  EXPECT_NEAR(a.lr_at(24), 0.4, 1e-12);       // epoch 4
  EXPECT_NEAR(a.lr_at(25), 0.04, 1e-12);      // epoch 5
  EXPECT_NEAR(a.lr_at(40), 0.004, 1e-12);     // epoch 8
  s.decay = Decay::Cosine;
  LrSchedule c(s);
  EXPECT_NEAR(c.lr_at(10), 0.4, 1e-12);                                   // right after warm-up
  EXPECT_NEAR(c.lr_at(30), 0.5 * 0.4 * (1 + std::cos(M_PI * 0.5)), 1e-12);  // half-way
  EXPECT_LT(c.lr_at(49), 0.01);
  s.ref_batch = 0;
  s.warmup_epochs = 0;
  s.decay = Decay::None;
  EXPECT_DOUBLE_EQ(LrSchedule(s).lr_at(33), 0.1);
  EXPECT_THROW(parse_decay("linear"), sieve::UsageError);
}

// Peak LR against the batch ratio r = global_batch / ref_batch for each scaling rule.
TEST(TrainOptim, ScheduleScalingRules) {
  ScheduleOptions s;
  s.base_lr = 0.1;
  s.ref_batch = 256;
  auto peak = [&](LrScaling rule, int64_t batch) {
    s.scaling = rule;
    s.global_batch = batch;
    return LrSchedule(s).peak();
  };
  EXPECT_NEAR(peak(LrScaling::Linear, 4096), 0.1 * 16, 1e-12);
  EXPECT_NEAR(peak(LrScaling::Sqrt, 4096), 0.1 * 4, 1e-12);
  EXPECT_NEAR(peak(LrScaling::Sqrt, 64), 0.1 * 0.5, 1e-12);  // smaller batches too
  // auto: linear while r <= 8, then grows as sqrt from there (continuous at r = 8).
  EXPECT_NEAR(peak(LrScaling::Auto, 1024), 0.1 * 4, 1e-12);
  EXPECT_NEAR(peak(LrScaling::Auto, 2048), 0.1 * 8, 1e-12);
  EXPECT_NEAR(peak(LrScaling::Auto, 8192), 0.1 * 8 * 2, 1e-12);  // r = 32: 8 * sqrt(4)
  EXPECT_NEAR(peak(LrScaling::Auto, 20480), 0.1 * 8 * std::sqrt(10.0), 1e-12);
  EXPECT_LT(peak(LrScaling::Auto, 20480), peak(LrScaling::Linear, 20480));
  EXPECT_NEAR(peak(LrScaling::Auto, 128), 0.05, 1e-12);
  EXPECT_EQ(parse_scaling("sqrt"), LrScaling::Sqrt);
  EXPECT_EQ(parse_scaling("auto"), LrScaling::Auto);
  EXPECT_THROW(parse_scaling("quadratic"), sieve::UsageError);
}
