// The communication calibration fit, the step-timeline summary and the per-strategy model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "comm/calibration.hpp"
#include "pipeline/schema.hpp"
#include "report/estimates.hpp"
#include "report/sections.hpp"
#include "report/timeline.hpp"
#include "support/test_util.hpp"
#include "util/error.hpp"

using namespace sieve;
using namespace sieve::report;

TEST(CommCalibration, FitRecoversAlphaAndBetaOfExactPoints) {
  CommCalibration c;
  c.ranks = 4;
  for (double n = 4; n <= 16e6; n *= 4) c.points.push_back({n, 12e-6 + n * 2.5e-9});
  fit_alpha_beta(c);
  EXPECT_NEAR(c.alpha_s, 12e-6, 1e-9);
  EXPECT_NEAR(c.beta_s_per_byte, 2.5e-9, 1e-13);
  EXPECT_NEAR(c.r2_relative, 1.0, 1e-9);
  // Ring equivalent at p = 4: alpha = 2(p-1) l, beta = 2(p-1)/p / BW.
  const RingEquivalent r = ring_equivalent(c);
  EXPECT_NEAR(r.latency_s, 12e-6 / 6, 1e-12);
  EXPECT_NEAR(r.bandwidth_bytes_per_s, 1.5 / 2.5e-9, 1.0);
  // Round trip through the JSON file the report reads.
  const std::string path = test::scratch_dir("report_comm") + "/cal.json";
  std::ofstream(path) << calibration_to_json(c);
  const CommCalibration back = read_calibration(path);
  EXPECT_EQ(back.ranks, 4);
  EXPECT_NEAR(back.alpha_s, c.alpha_s, 1e-12);
  EXPECT_NEAR(back.beta_s_per_byte, c.beta_s_per_byte, 1e-15);
  EXPECT_EQ(back.points.size(), c.points.size());
}

TEST(CommCalibration, NegativeInterceptIsClampedAndNotJsonIsAnError) {
  CommCalibration c;
  c.ranks = 2;
  // Noise that pulls the line below the origin: alpha clamps to 0, the slope stays positive.
  c.points = {{4, 1e-7}, {4096, 1e-5}, {4194304, 1e-2}, {16777216, 4.5e-2}};
  fit_alpha_beta(c);
  EXPECT_GE(c.alpha_s, 0.0);
  EXPECT_GT(c.beta_s_per_byte, 1e-9);
  const std::string path = test::scratch_dir("report_comm_bad") + "/bad.json";
  std::ofstream(path) << "{\"schema\": \"something else\"}";
  EXPECT_THROW(read_calibration(path), Error);
}

namespace {

// A trace as the trainer writes it: two ranks, two steps each; a step after the first: 100 us
// = 60 compute (with a nested 20 us layer span), 25 wait, 5 data, 8 optimizer holding a 3 us
// wait, 2 left over. The first step is 5x slower (warm-up).
void write_synthetic_trace(const std::string& path) {
  std::ofstream f(path);
  f << R"({"otherData":{"strategy":"buckets","ranks":2,"arch":"resnet18","width":0.25,
  "global_batch":64,"params":1000,"tensors":3},"traceEvents":[)";
  for (int pid = 0; pid < 2; ++pid)
    for (int step = 0; step < 2; ++step) {
      const double t = step * 1000.0 + pid;  // step 0 is a slow warm-up on every rank
      const double k = step == 0 ? 5.0 : 1.0;
      auto ev = [&](const char* name, const char* cat, double ts, double dur, int tid = 0) {
        f << "{\"name\":\"" << name << "\",\"cat\":\"" << cat << "\",\"ph\":\"X\",\"pid\":" << pid
          << ",\"tid\":" << tid << ",\"ts\":" << t + ts * k << ",\"dur\":" << dur * k << "},";
      };
      ev("step", "step", 0, 100);
      ev("wait for batch", "data", 0, 5);
      ev("forward", "compute", 5, 30);
      ev("fwd fc", "layer", 10, 20);
      ev("backward", "compute", 35, 30);
      ev("bucket 0", "comm", 40, 40, 1);  // overlapped: another lane, not in the split
      ev("wait for buckets", "wait", 65, 25);
      ev("optimizer step", "optimizer", 90, 8);
      ev("wait for pulls", "wait", 92, 3);
    }
  f << R"({"name":"trace_end","ph":"M","pid":0,"args":{}}]})";
}

}  // namespace

TEST(StepTimeline, SummaryCountsExclusiveTimePerCategoryAndSkipsTheFirstStep) {
  const std::string path = test::scratch_dir("report_timeline") + "/trace-buckets-np2.json";
  write_synthetic_trace(path);
  const StepSplit s = summarize_trace(path);
  EXPECT_EQ(s.strategy, "buckets");
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.steps, 1);
  EXPECT_EQ(s.tensors, 3);
  EXPECT_NEAR(s.step_s, 100e-6, 1e-12);
  EXPECT_NEAR(s.compute_s, 60e-6, 1e-12);
  EXPECT_NEAR(s.exposed_comm_s, 28e-6, 1e-12);
  EXPECT_NEAR(s.data_s, 5e-6, 1e-12);
  EXPECT_NEAR(s.optimizer_s, 5e-6, 1e-12);
  EXPECT_NEAR(s.other_s, 2e-6, 1e-12);
  EXPECT_EQ(summarize_traces(test::scratch_dir("report_timeline_none")).size(), 0u);
}

TEST(StrategyModel, OrderingAtScaleAndNoCommunicationOnOneRank) {
  StrategyModelInputs in;
  in.grad_bytes = 44.7e6;  // ResNet-18 fp32
  in.compute_s_per_sample = 2e-3;
  in.per_rank_batch = 32;
  in.bucket_bytes = 25 << 20;
  in.cycle_s = 1e-3;
  in.tensors = 62;
  in.latency_s = 5e-6;
  in.bandwidth_bytes_per_s = 12.5e9;
  const auto pts = predict_strategies(in, 1536);
  std::map<std::string, std::map<int64_t, double>> step;
  for (const auto& p : pts) {
    step[p.strategy][p.ranks] = p.step_s;
    if (p.ranks == 1) {
      EXPECT_DOUBLE_EQ(p.step_s, p.compute_s) << p.strategy;
    }
    EXPECT_GE(p.step_s, p.compute_s);
  }
  ASSERT_EQ(step["buckets"].rbegin()->first, 1536);
  // At 1,536 ranks DDP-style buckets are ahead of the negotiated fusion queue (the paper's
  // ordering: each fused buffer pays the ring's 2(p-1) latencies, and there are more of them
  // than buckets). The parameter server's pull is never overlapped: behind buckets at every p.
  EXPECT_LT(step["buckets"][1536], step["fusion-queue"][1536]);
  for (const auto& [p, t] : step["buckets"]) {
    if (p > 1) {
      EXPECT_LT(t, step["parameter-server"][p]) << "p=" << p;
    }
  }
  // Communication grows with p: step time never falls in weak scaling.
  for (const auto& [name, by_p] : step) {
    double prev = 0;
    for (const auto& [p, t] : by_p) {
      EXPECT_GE(t, prev - 1e-12) << name << " p=" << p;
      prev = t;
    }
  }
}

TEST(StepTimeline, ReportSectionShowsStrategiesCalibrationAndModel) {
  namespace fs = std::filesystem;
  const std::string bench = test::scratch_dir("report_comm_bench");
  write_synthetic_trace(bench + "/trace-buckets-np2.json");
  CommCalibration cal;
  cal.ranks = 2;
  cal.machine = "test";
  for (double n = 4; n <= 16e6; n *= 4) cal.points.push_back({n, 1e-6 + n * 1e-9});
  fit_alpha_beta(cal);
  std::ofstream(bench + "/calibration-np2.json") << calibration_to_json(cal);
  const Config cfg = Config::load(pipeline_schema(), std::vector<std::string>{},
                                  {"report.comm.bench_dir=" + bench});
  const std::string dir = test::scratch_dir("report_comm_out");
  fs::create_directories(dir + "/figures");
  fs::create_directories(dir + "/data");
  RunData data;
  Document doc("t");
  SectionContext c{cfg, data, dir, FigureFormat::Png, doc};
  section_comm(c);
  const std::string md = doc.markdown();
  EXPECT_NE(md.find("Communication strategies side by side"), std::string::npos);
  EXPECT_NE(md.find("| buckets | 2 | 0.1 | 0.1 |"), std::string::npos) << md;  // step, compute ms
  EXPECT_NE(md.find("Allreduce calibration"), std::string::npos);
  EXPECT_NE(md.find("Predicted step time per strategy"), std::string::npos);
  for (const char* f : {"data/comm_timeline.csv", "data/comm_prediction.csv"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  // Without a benchmark directory: a note, nothing else.
  Document empty("t");
  const Config none = Config::load(pipeline_schema(), std::vector<std::string>{}, {});
  SectionContext c2{none, data, dir, FigureFormat::Png, empty};
  section_comm(c2);
  EXPECT_NE(empty.markdown().find("section omitted"), std::string::npos);
}
