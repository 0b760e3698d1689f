// The a-priori cost model against hand-computed values, and parameter counts against the
// published sizes of the CIFAR ResNets (github.com/kuangliu/pytorch-cifar: ResNet-18
// 11,173,962 and ResNet-50 23,520,842 parameters with 10 classes).
#include <gtest/gtest.h>

#include <cmath>

#include "pipeline/schema.hpp"
#include "report/estimates.hpp"
#include "report/plot.hpp"

using namespace sieve;
using namespace sieve::report;

TEST(ReportEstimates, RingAllreduceMatchesHandComputation) {
  NetworkModel net{100.0, 5.0};  // 12.5 GB/s, 5 us
  EXPECT_EQ(ring_allreduce_s(1e9, 1, net), 0.0);
  // p = 4, 1 GB: 2*3/4 * 1e9 / 12.5e9 = 0.12 s, + 2*3*5e-6 = 30 us.
  EXPECT_NEAR(ring_allreduce_s(1e9, 4, net), 0.12 + 30e-6, 1e-12);
  // Large p: the bandwidth term tends to 2*bytes/BW, latency grows linearly.
  EXPECT_NEAR(ring_allreduce_s(1e9, 1536, net), 2.0 * 1535 / 1536 * 0.08 + 2 * 1535 * 5e-6, 1e-12);
}

TEST(ReportEstimates, RankCountsArePowersOfTwoThenTheMaximum) {
  EXPECT_EQ(rank_counts(1536),
            (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1536}));
  EXPECT_EQ(rank_counts(8), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(rank_counts(1), (std::vector<int64_t>{1}));
}

TEST(ReportEstimates, StrongWeakAndOverlappedScaling) {
  EstimateInputs in;
  in.num_samples = 50000;
  in.bytes_per_sample = 3072;
  in.num_params = 1000000;  // 4 MB of fp32 gradients
  in.images_per_s_per_rank = 1000;
  in.global_batch = 1024;
  in.net = {80.0, 0.0};  // 10 GB/s, no latency
  in.max_ranks = 8;
  in.activation_bytes_per_sample = 1000;
  Estimates e = estimate(in);
  EXPECT_DOUBLE_EQ(e.dataset_bytes, 50000.0 * 3072);
  EXPECT_DOUBLE_EQ(e.grad_bytes, 4e6);
  EXPECT_DOUBLE_EQ(e.memory_per_rank_bytes, 12e6 + 1024 * 1000.0);
  ASSERT_EQ(e.rows.size(), 4u);
  EXPECT_DOUBLE_EQ(e.rows[0].efficiency, 1.0);
  // p = 4: b = 256 -> 0.256 s compute; comm 2*3/4*4e6/1e10 = 0.0006 s.
  const ScalingRow& r4 = e.rows[2];
  EXPECT_DOUBLE_EQ(r4.per_rank_batch, 256);
  EXPECT_NEAR(r4.comm_s, 0.0006, 1e-15);
  EXPECT_NEAR(r4.efficiency, 0.256 / 0.2566, 1e-12);
  EXPECT_NEAR(r4.images_per_s, 1024 / 0.2566, 1e-9);
  // Efficiency = tau_p / (p * tau_1) by definition.
  for (auto& r : e.rows)
    EXPECT_NEAR(r.efficiency, r.images_per_s / (double(r.ranks) * e.rows[0].images_per_s), 1e-12);

  in.per_rank_batch = 32;  // weak scaling: b fixed
  in.grad_bytes_per_param = 2;
  Estimates w = estimate(in);
  EXPECT_DOUBLE_EQ(w.rows[3].per_rank_batch, 32);
  EXPECT_NEAR(w.rows[3].comm_s, 2.0 * 7 / 8 * 2e6 / 1e10, 1e-15);
  EXPECT_NEAR(w.rows[3].efficiency, 0.032 / (0.032 + w.rows[3].comm_s), 1e-12);

  in.overlap = true;  // compute 0.032 s hides the 0.00035 s reduction entirely
  EXPECT_DOUBLE_EQ(estimate(in).rows[3].efficiency, 1.0);
}

TEST(ReportEstimates, InfeasibleRowsWhenBatchRunsOut) {
  EstimateInputs in;
  in.num_params = 10;
  in.images_per_s_per_rank = 100;
  in.global_batch = 256;
  in.max_ranks = 1536;
  Estimates e = estimate(in);
  for (auto& r : e.rows) EXPECT_EQ(r.feasible, r.ranks <= 256) << r.ranks;
}

TEST(ReportEstimates, ParamCountsMatchPublishedCifarResNets) {
  Config cfg = Config::load(pipeline_schema(), "", {"scaled.model.arch=resnet18"});
  EXPECT_EQ(model_param_count(cfg, "scaled", {32, 32, 3}, 10), 11173962);
  cfg.set("scaled.model.arch", YAML::Node("resnet50"), "test");
  EXPECT_EQ(model_param_count(cfg, "scaled", {32, 32, 3}, 10), 23520842);
  // MLP on 4 features, hidden [8]: 4*8+8 + 8*3+3.
  cfg.set("scaled.model.arch", YAML::Node("mlp"), "test");
  cfg.set("scaled.model.hidden", YAML::Load("[8]"), "test");
  EXPECT_EQ(model_param_count(cfg, "scaled", {4}, 3), 67);
}

TEST(ReportEstimates, ActivationEstimateScalesWithResolutionAndWidth) {
  Config cfg = Config::load(pipeline_schema(), "", {"scaled.model.arch=resnet18"});
  const double a32 = activation_bytes_estimate(cfg, "scaled", {32, 32, 3});
  const double a64 = activation_bytes_estimate(cfg, "scaled", {64, 64, 3});
  EXPECT_GT(a32, 4.0 * 64 * 32 * 32 * 2);  // at least the stem conv + BN outputs
  EXPECT_NEAR(a64 / a32, 4.0, 0.1);        // 4x the pixels, ~4x the activations
  cfg.set("scaled.model.width", YAML::Node(2.0), "test");
  EXPECT_NEAR(activation_bytes_estimate(cfg, "scaled", {32, 32, 3}) / a32, 2.0, 0.05);
}

TEST(ReportPlot, FormattingAndCsvQuoting) {
  EXPECT_EQ(fmt(NAN), "");
  EXPECT_EQ(fmt(0.125), "0.125");
  EXPECT_EQ(pct(0.8321), "83.21");
  EXPECT_EQ(pct(NAN), "n/a");
  EXPECT_EQ(gp_quote("it's"), "'it''s'");
}
