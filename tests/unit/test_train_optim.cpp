// Optimizers and LR schedules against independent double-precision references.
#include <gtest/gtest.h>

#include <cmath>

#include "train/optimizer.hpp"
#include "train/options.hpp"
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

// scaled.budget: steps. The smaller arm's epochs bring its steps nearest the full arm's; the
// warm-up and the milestones move with the steps an epoch.
TEST(TrainOptim, SmallerArmMatchesTheFullArmsSteps) {
  TrainOptions o;
  o.epochs = 8;
  o.global_batch = 8192;
  o.sched.warmup_epochs = 1.0;
  o.sched.milestones = {4, 6};
  // 60,000 samples: 7 steps an epoch, 56 in 8 epochs; 48,872: 5 an epoch -> 11 epochs, 55.
  const std::string line = match_full_arm_steps(o, 60000, 48872);
  EXPECT_EQ(o.epochs, 11);
  EXPECT_DOUBLE_EQ(o.sched.warmup_epochs, 7.0 / 5.0);           // 7 steps of warm-up either way
  EXPECT_EQ(o.sched.milestones, (std::vector<int64_t>{6, 8}));  // 5.6, 8.4 epochs
  EXPECT_NE(line.find("11 epochs of 5 steps (55)"), std::string::npos) << line;
  EXPECT_NE(line.find("8 of 7 (56)"), std::string::npos) << line;

  // The full arm itself, or an arm as large in steps, is left alone.
  TrainOptions same;
  same.epochs = 8;
  same.global_batch = 256;
  EXPECT_EQ(match_full_arm_steps(same, 60000, 60000), "");
  EXPECT_EQ(match_full_arm_steps(same, 60000, 59990), "");  // 234 steps an epoch both
  EXPECT_EQ(same.epochs, 8);

  // Whatever the sizes, the arm's steps land within half of one of its epochs of the full
  // arm's steps, and it never trains fewer epochs than asked.
  for (int64_t g : {32, 256, 2048})
    for (int64_t full : {4000, 60000})
      for (int64_t arm : {full / 2 + 7, full * 4 / 5, full - 3 * g})
        for (int64_t epochs : {1, 9, 30}) {
          if (arm < g) continue;  // a batch larger than the arm is refused earlier
          TrainOptions t;
          t.epochs = epochs;
          t.global_batch = g;
          match_full_arm_steps(t, full, arm);
          const int64_t per_epoch = arm / g, full_steps = epochs * (full / g);
          EXPECT_GE(t.epochs, epochs);
          EXPECT_LE(std::abs(t.epochs * per_epoch - full_steps), per_epoch / 2 + 1)
              << "g " << g << " full " << full << " arm " << arm << " epochs " << epochs;
        }
}
