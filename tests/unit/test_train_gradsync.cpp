// Pieces of the gradient strategies: the optimizer's range update (what a parameter-server
// shard owner runs), readiness bookkeeping, each strategy on a one-rank communicator (nothing
// to reduce: the gradients must come out untouched) and on three ranks of the in-process fake
// communicator (comm/fake.hpp; the real multi-rank runs are tests/mpi/test_train_comm.cpp).
#include <gtest/gtest.h>

#include <random>

#include "comm/fake.hpp"
#include "train/grad_sync.hpp"
#include "train/optimizer.hpp"

using namespace sieve;
using namespace sieve::train;

TEST(GradSync, StepRangeOverShardsIsBitwiseTheFullStep) {
  std::vector<ParamSlice> slices = {{"conv.weight", 0, 100, false},
                                    {"bn.weight", 112, 10, true},
                                    {"bn.bias", 128, 10, true},
                                    {"fc.weight", 144, 50, false}};
  const size_t total = 208;
  for (bool lars : {false, true})
    for (bool decoupled : {false, true}) {
      OptimizerOptions o;
      o.weight_decay = 5e-4;
      o.lars = lars;
      o.decoupled = decoupled;
      SgdOptimizer full(slices, total, o), sharded(slices, total, o);
      std::mt19937 rng(3);
      std::normal_distribution<float> nd;
      std::vector<float> w(total), g(total);
      for (auto& v : w) v = nd(rng);
      std::vector<float> w2 = w;
      for (int step = 0; step < 3; ++step) {
        for (auto& v : g) v = nd(rng);
        full.step(w.data(), g.data(), 0.1);
        // Shards at tensor starts, updated in an arbitrary order.
        sharded.step_range(w2.data(), g.data(), 0.1, 112, 144);
        sharded.step_range(w2.data(), g.data(), 0.1, 144, total);
        sharded.step_range(w2.data(), g.data(), 0.1, 0, 112);
      }
      EXPECT_EQ(w, w2) << "lars " << lars << " decoupled " << decoupled;
      EXPECT_EQ(full.momentum(), sharded.momentum());
    }
  SgdOptimizer opt(slices, total, {});
  std::vector<float> w(total), g(total);
  EXPECT_THROW(opt.step_range(w.data(), g.data(), 0.1, 50, 208), Error)
      << "a range edge inside a tensor would split its LARS norm";
}

TEST(GradSync, PieceTrackerCompletesEachPieceOnceWhenItsCoveredElementsAreIn) {
  // Pieces [0,1024) [1024,2048) [2048,2100); tensors leave padding 1500..1503 uncovered.
  PieceTracker t(even_cuts(2100, 1024), {{0, 1500}, {1504, 596}});
  ASSERT_EQ(t.size(), 3u);
  std::vector<size_t> done;
  auto note = [&](size_t p) { done.push_back(p); };
  t.report(1504, 596, note);  // completes pieces 2 and... not 1 (needs 1024..1499 too)
  EXPECT_EQ(done, std::vector<size_t>({2}));
  t.report(0, 1500, note);
  EXPECT_EQ(done, std::vector<size_t>({2, 0, 1}));
  t.report(0, 1500, note);  // repeated reports complete nothing twice
  EXPECT_EQ(done.size(), 3u);
  t.reset();
  done.clear();
  t.report(0, 1500, note);
  EXPECT_EQ(done, std::vector<size_t>({0}));
}

// The schedule a device's own reducer runs (cuda/grad_reducer.cpp), with a start() that
// records: each piece started once per step, those that ready() completes as they complete
// and counted as early, the rest by finish() in ascending order; an unarmed ready() starts
// nothing; finish() without arm() still starts every piece; pieces whose start sent nothing
// are not counted.
TEST(GradSync, PieceScheduleStartsEveryPieceOncePerStep) {
  std::vector<std::pair<size_t, size_t>> started;
  bool send = true;
  PieceSchedule sched(even_cuts(3100, 1024), {{0, 1500}, {1504, 1596}},
                      [&](size_t begin, size_t end) {
                        started.push_back({begin, end});
                        return send;
                      });
  ASSERT_EQ(sched.size(), 4u);  // [0,1024) [1024,2048) [2048,3072) [3072,3100)
  sched.ready(1504, 1596);      // not armed: ignored
  EXPECT_TRUE(started.empty());
  sched.arm();
  sched.ready(2500, 600);  // completes [3072,3100) only
  sched.ready(1504, 996);  // completes [2048,3072); [1024,2048) still needs 1024..1499
  sched.finish();          // the rest, ascending: [0,1024), [1024,2048)
  using R = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(started, R({{3072, 3100}, {2048, 3072}, {0, 1024}, {1024, 2048}}));
  EXPECT_EQ(sched.messages(), 4);
  EXPECT_EQ(sched.started_early(), 2);
  EXPECT_EQ(sched.elements(), 3100.0);
  started.clear();
  sched.finish();  // a step whose hook never fired (no arm): every piece, once, ascending
  EXPECT_EQ(started, R({{0, 1024}, {1024, 2048}, {2048, 3072}, {3072, 3100}}));
  EXPECT_EQ(sched.started_early(), 2);
  started.clear();
  send = false;  // one rank: start() sends nothing, so nothing is counted
  sched.arm();
  sched.ready(0, 3100);
  sched.finish();
  EXPECT_EQ(started.size(), 4u);
  EXPECT_EQ(sched.messages(), 8);
  EXPECT_EQ(sched.started_early(), 2);
}

TEST(GradSync, EveryStrategyLeavesOneRanksGradientsUntouched) {
  Comm self(MPI_COMM_SELF);
  std::vector<std::pair<size_t, size_t>> cov = {{0, 300}, {304, 200}};
  for (const char* s : {"buckets", "fusion-queue", "parameter-server"}) {
    CommOptions o;
    o.strategy = s;
    o.bucket_mb = 0.001;
    std::vector<float> g(504);
    for (size_t i = 0; i < g.size(); ++i) g[i] = float(i) * 0.5f;
    const std::vector<float> before = g;
    auto sync = make_grad_sync(o, self, g.data(), g.size(), cov);
    EXPECT_STREQ(sync->name(), s);
    for (int step = 0; step < 2; ++step) {
      sync->arm();
      for (auto it = cov.rbegin(); it != cov.rend(); ++it) sync->ready(it->first, it->second);
      sync->finish();
    }
    EXPECT_EQ(g, before) << s;
    EXPECT_EQ(sync->stats().steps, 2) << s;
  }
  CommOptions bad;
  bad.strategy = "gossip";
  EXPECT_THROW(check_comm_options(bad, "pretrain"), UsageError);
}

// The all-reduce strategies on three ranks of the fake communicator: every rank ends each step
// with the sum of the ranks' gradients on the covered elements. (The parameter server sums
// each piece on its owner only, which then updates the parameters: tests/mpi.)
TEST(GradSync, AllReduceStrategiesSumOverThreeRanksOfAFakeComm) {
  const std::vector<std::pair<size_t, size_t>> covered = {{0, 300}, {304, 200}};
  auto base = [](size_t i) { return float(i % 17) * 0.25f; };
  for (const char* strategy : {"buckets", "fusion-queue"}) {
    std::vector<std::vector<float>> result(3);
    run_fake_ranks(3, [&](const Comm& c) {
      CommOptions o;
      o.strategy = strategy;
      o.bucket_mb = 0.001;  // several pieces
      std::vector<float> g(504);
      auto sync = make_grad_sync(o, c, g.data(), g.size(), covered);
      for (int step = 0; step < 2; ++step) {
        for (size_t i = 0; i < g.size(); ++i) g[i] = base(i) * float(c.rank() + 1 + step);
        sync->arm();
        for (auto it = covered.rbegin(); it != covered.rend(); ++it)
          sync->ready(it->first, it->second);
        sync->finish();
      }
      result[size_t(c.rank())] = g;
    });
    for (int r = 0; r < 3; ++r)
      for (const auto& [begin, n] : covered)
        for (size_t i = begin; i < begin + n; ++i)
          ASSERT_FLOAT_EQ(result[size_t(r)][i], base(i) * (2 + 3 + 4))
              << strategy << " rank " << r << " element " << i;
  }
}
