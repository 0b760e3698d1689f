// The gradient communication strategies (train/grad_sync.hpp) on 2-3 ranks (and 1, through
// MPI_COMM_SELF): buckets, fusion-queue and the synchronous parameter server train the same
// weights up to float summation order; every rank ends with identical weights; the step
// timeline (--trace) parses and covers every model unit and every bucket on every rank.
//
// Tolerance: 2e-3 relative (1e-3 absolute floor), as test_train_parallel uses for R ranks
// against one rank: 2 epochs x 4 steps of SGD with momentum amplify the ~1e-7 relative
// differences of the reduction order. Measured worst on this machine: printed by the test.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "mpi/train_mpi_util.hpp"
#include "support/test_util.hpp"
#include "train/fusion_queue.hpp"
#include "train/param_server.hpp"
#include "train/reducer.hpp"
#include "train/stream.hpp"
#include "train/trainer.hpp"
#include "util/trace.hpp"

using namespace sieve;
using namespace sieve::train;

namespace {

using Data = test::ImageData;
using test::image_data;

TrainOptions options(const std::string& arch, int64_t micro, const std::string& strategy,
                     int servers = 1) {
  TrainOptions o = test::short_run_options(arch, micro);
  o.comm.strategy = strategy;
  o.comm.servers = servers;
  // Small pieces so that the tiny models still get several buckets / fused buffers / shards.
  o.comm.bucket_mb = 0.004;
  o.comm.fusion_mb = 0.004;
  o.comm.cycle_ms = 0.2;
  return o;
}

struct Trained {
  std::vector<float> weights;
  double final_acc = -1;  // on the evaluation split, when one is given
  SyncStats stats;
  size_t buckets = 0;
  std::vector<std::string> param_names;
};

Trained train_with(const Comm& comm, const Data& d, const TrainOptions& o,
                   const SplitData* eval = nullptr) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < d.train.n; ++i) all.push_back(i);
  auto source = std::make_unique<MemorySource>(d.train, all, o.global_batch, o.seed, comm.rank(),
                                               comm.size());
  EvalSplit ev;
  if (eval) ev.mem = eval, ev.rows = eval->n;
  Trainer t(comm, o, std::move(source), d.train, ev, d.meta, test::scratch_dir("train_comm"), "",
            "test: {}\n");
  const TrainResult res = t.run(false);
  Trained r;
  r.final_acc = res.final_test_acc;
  r.weights.assign(t.model().params(), t.model().params() + t.model().num_params());
  r.stats = t.grad_sync()->stats();
  r.buckets = t.grad_sync()->num_buckets();
  for (const auto& p : t.model().param_info()) r.param_names.push_back(p.name);
  return r;
}

double worst_relative(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / (1e-3 + std::abs(double(b[i]))));
  return worst;
}

void expect_same_on_all_ranks(const Comm& comm, const std::vector<float>& w) {
  std::vector<float> sum = w;
  comm.allreduce_sum(sum.data(), sum.size());
  for (size_t i = 0; i < w.size(); ++i)
    ASSERT_NEAR(sum[i], w[i] * comm.size(), 1e-5 * (1 + std::abs(w[i] * comm.size()))) << i;
}

// "layer2.1.conv1.weight" -> "layer2.1", "fc.bias" -> "fc" (nn::Model::set_unit_hook).
std::string unit_of(const std::string& param) {
  size_t dot = param.find('.');
  if (param.rfind("layer", 0) == 0) dot = param.find('.', dot + 1);
  return param.substr(0, dot);
}

}  // namespace

TEST(TrainComm, StrategiesTrainTheSameWeightsOnOneTwoAndThreeRanks) {
  Comm world = Comm::world();
  Comm self(MPI_COMM_SELF);
  const int R = world.size();
  Data d = image_data(48);  // 4 steps per epoch
  for (const char* arch : {"mlp", "resnet18"}) {
    const Trained ref = train_with(world, d, options(arch, 0, "buckets"));
    // One rank with micro-batches of the R per-rank parts: the same BN batches.
    const Trained one = train_with(self, d, options(arch, 12 / R, "buckets"));
    EXPECT_LT(worst_relative(ref.weights, one.weights), 2e-3) << arch;
    for (const auto& [strategy, servers] : std::vector<std::pair<std::string, int>>{
             {"fusion-queue", 1}, {"parameter-server", 1}, {"parameter-server", R}}) {
      const Trained got = train_with(world, d, options(arch, 0, strategy, servers));
      const double worst = worst_relative(got.weights, ref.weights);
      if (world.is_root())
        std::printf("%s %s servers=%d ranks=%d: worst relative difference to buckets %.3g\n", arch,
                    strategy.c_str(), servers, R, worst);
      EXPECT_LT(worst, 2e-3) << arch << " " << strategy << " servers=" << servers;
      expect_same_on_all_ranks(world, got.weights);
      EXPECT_EQ(got.stats.steps, 8) << strategy;
      EXPECT_GT(got.stats.messages, 0) << strategy;
      if (strategy == "fusion-queue") {
        EXPECT_GE(got.stats.negotiations, got.stats.steps);
      }
      // On one rank a strategy reduces nothing and must match buckets bitwise.
      const Trained single = train_with(self, d, options(arch, 12 / R, strategy, servers));
      EXPECT_EQ(single.weights, one.weights) << arch << " " << strategy << " on one rank";
    }
  }
}

TEST(TrainComm, FusionQueueSumsEveryTensorWhateverTheReadyOrder) {
  Comm world = Comm::world();
  const int R = world.size();
  std::vector<std::pair<size_t, size_t>> cov = {{0, 1500}, {1504, 2000}, {3504, 700}, {4208, 10}};
  const size_t total = 4224;
  std::vector<float> g(total, -1.0f);
  for (auto [o, c] : cov)
    for (size_t i = o; i < o + c; ++i) g[i] = float((i % 97) * (world.rank() + 1)) * 0.01f;
  // Fusion buffer of 2600 floats: tensors 3 and 2 fuse, tensor 1 alone, tensor 0 alone.
  FusionQueue q(world, g.data(), total, cov, 0.0, 2600 * sizeof(float));
  for (int step = 0; step < 3; ++step) {
    std::vector<float> start = g;
    q.arm();
    // Ranks report in different orders (rank 1 backwards): agreement must still pair them.
    if (world.rank() % 2 == 0)
      for (auto it = cov.rbegin(); it != cov.rend(); ++it) q.ready(it->first, it->second);
    else
      for (auto [o, c] : cov) q.ready(o, c);
    q.finish();
    std::vector<float> sum = start;
    world.allreduce_sum(sum.data(), sum.size());
    for (auto [o, c] : cov)
      for (size_t i = o; i < o + c; ++i)
        ASSERT_FLOAT_EQ(g[i], sum[i]) << "step " << step << " element " << i;
    for (size_t i = 1500; i < 1504; ++i) ASSERT_EQ(g[i], -1.0f) << "padding is never touched";
    g = start;  // keep magnitudes small over the steps
  }
  if (R > 1) {
    EXPECT_GE(q.stats().negotiations, 3);
  }
}

TEST(TrainComm, ParameterServerShardsFollowTensorEdgesAndSpreadOverRanks) {
  Comm world = Comm::world();
  const int R = world.size();
  std::vector<std::pair<size_t, size_t>> cov = {
      {0, 1000}, {1008, 1000}, {2016, 1000}, {3024, 1000}};
  std::vector<float> g(4032, 0.0f);
  ParamServer ps(world, g.data(), g.size(), cov, R, 1 << 20);
  EXPECT_EQ(ps.num_shards(), std::min(R, 4));
  std::set<size_t> starts = {0, 1008, 2016, 3024};
  std::set<int> owners;
  for (int s = 0; s < ps.num_shards(); ++s) {
    EXPECT_TRUE(starts.count(ps.shard_begin(s))) << "shard " << s << " starts inside a tensor";
    owners.insert(ps.owner(s));
  }
  EXPECT_EQ(int(owners.size()), ps.num_shards()) << "each shard on its own rank";
}

// Stale-synchronous compensation, step by step against a sequential reference: with staleness
// k, after step t every rank computes on the true weights (rounds up to t-k applied) moved
//   momentum:        by the momentum alone for k steps, w - lr*v*sum_{i=1..k} mu^(i+1) (Nesterov);
//   local-gradient:  by the k rounds in flight replayed with the shard owner's own gradient of
//                    each round x ranks, on a copy of the velocity;
// and drain() leaves every rank the true weights. Gradients are multiples of 1/64 small enough
// that every order of summation gives the same floats, so the comparison is exact up to the
// compiler's contraction of multiply-adds.
TEST(TrainComm, StaleCompensationPredictsTheWeightsAndDrainRestoresTheTrueOnes) {
  using C = ParamServer::Compensation;
  Comm world = Comm::world();
  const int R = world.size();
  const std::vector<std::pair<size_t, size_t>> cov = {{0, 600}, {600, 600}, {1200, 300}};
  const size_t total = 1500;
  std::vector<ParamSlice> slices = {
      {"a.weight", 0, 600, false}, {"b.weight", 600, 600, false}, {"b.bias", 1200, 300, true}};
  OptimizerOptions oo;
  oo.momentum = 0.9;
  oo.nesterov = true;
  oo.weight_decay = 5e-4;
  auto grad = [&](int step, int rank, size_t i) {
    return float(int((i * 7 + size_t(step) * 13 + size_t(rank) * 5) % 33) - 16) / 64.0f;
  };
  auto summed = [&](int step) {
    std::vector<float> sum(total, 0.0f);
    for (int r = 0; r < R; ++r)
      for (size_t i = 0; i < total; ++i) sum[i] += grad(step, r, i);
    return sum;
  };
  for (C comp : {C::Momentum, C::LocalGradient})
    for (int k : {1, 2}) {
      const std::string what = cat(comp == C::Momentum ? "momentum" : "local-gradient", " k ", k);
      std::vector<float> w(total), g(total);
      for (size_t i = 0; i < total; ++i) w[i] = float(int(i % 41) - 20) / 32.0f;
      std::vector<float> truth = w;  // the reference's true weights
      SgdOptimizer opt(slices, total, oo), ref(slices, total, oo);
      ParamServer ps(world, g.data(), total, cov, R, 1024 * sizeof(float), k, comp);
      std::vector<int> owner_of(total);
      for (int s = 0; s < ps.num_shards(); ++s)
        for (size_t i = ps.shard_begin(s); i < ps.shard_begin(s + 1); ++i)
          owner_of[i] = ps.owner(s);
      const double lr = 0.05;
      const int steps = 6;
      for (int t = 0; t < steps; ++t) {
        for (size_t i = 0; i < total; ++i) g[i] = grad(t, world.rank(), i);
        ps.arm();
        for (auto it = cov.rbegin(); it != cov.rend(); ++it) ps.ready(it->first, it->second);
        ps.finish();
        ps.update(opt, w.data(), g.data(), lr);
        if (R == 1) continue;       // one rank: no staleness, checked below
        const int applied = t - k;  // rounds 0..t-k have landed
        if (applied >= 0) ref.step(truth.data(), summed(applied).data(), lr);
        std::vector<float> expect = truth;
        if (applied >= 0 && comp == C::Momentum) {
          float f = 0, p = float(oo.momentum);
          for (int i = 0; i < k; ++i) f += (p *= float(oo.momentum));
          for (size_t i = 0; i < total; ++i) expect[i] -= float(lr) * f * ref.momentum()[i];
        } else if (applied >= 0) {
          SgdOptimizer replay = ref;
          for (int r = applied + 1; r <= t; ++r) {
            std::vector<float> est(total);
            for (size_t i = 0; i < total; ++i) est[i] = float(R) * grad(r, owner_of[i], i);
            replay.step(expect.data(), est.data(), lr);
          }
        }
        for (size_t i = 0; i < total; ++i)
          ASSERT_FLOAT_EQ(w[i], expect[i]) << what << " step " << t << " element " << i;
      }
      ps.drain();
      if (R == 1) {
        EXPECT_EQ(ps.max_staleness(), 0) << "one rank has nothing to be stale against";
        continue;
      }
      for (int r = steps - k; r < steps; ++r) ref.step(truth.data(), summed(r).data(), lr);
      EXPECT_EQ(w, truth) << what << ": after drain every rank holds the true weights";
      expect_same_on_all_ranks(world, w);
    }
}

TEST(TrainComm, TraceParsesAndCoversEveryUnitAndBucket) {
  Comm world = Comm::world();
  Data d = image_data(48);
  const std::string path = test::scratch_dir("train_comm_trace") + "/trace.json";
  for (const char* strategy : {"buckets", "fusion-queue", "parameter-server"}) {
    trace::clear();
    trace::enable(path);
    const Trained t = train_with(world, d, options("resnet18", 0, strategy, world.size()));
    trace::enable("");
    if (!world.is_root()) continue;
    std::ifstream f(path);
    const nlohmann::json j = nlohmann::json::parse(f);  // throws if the file is not JSON
    ASSERT_TRUE(j.contains("traceEvents"));
    EXPECT_EQ(j["otherData"]["strategy"], strategy);
    // Per rank: the names seen and the time per category.
    std::map<int, std::set<std::string>> names;
    std::map<int, std::map<std::string, double>> by_cat;
    for (const auto& e : j["traceEvents"]) {
      if (e["ph"] != "X") continue;
      ASSERT_GE(e["dur"].get<double>(), 0.0);
      names[e["pid"].get<int>()].insert(e["name"].get<std::string>());
      by_cat[e["pid"].get<int>()][e["cat"].get<std::string>()] += e["dur"].get<double>();
    }
    ASSERT_EQ(int(names.size()), world.size()) << "one process per rank";
    // On every track (pid, tid) spans are disjoint or nested, which trace viewers need:
    // reductions in flight overlap, so they are spread over several lanes.
    std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
    for (const auto& e : j["traceEvents"])
      if (e["ph"] == "X")
        tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(
            {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    for (auto& [track, spans] : tracks) {
      std::sort(spans.begin(), spans.end(), [](auto& a, auto& b) {
        return a.first != b.first ? a.first < b.first : a.second > b.second;
      });
      std::vector<double> open;  // ends of the enclosing spans
      for (auto [t0, t1] : spans) {
        while (!open.empty() && open.back() <= t0 + 1e-3) open.pop_back();
        ASSERT_TRUE(open.empty() || t1 <= open.back() + 1e-3)
            << strategy << " rank " << track.first << " tid " << track.second
            << ": a span overlaps another without nesting at ts " << t0;
        open.push_back(t1);
      }
    }
    for (auto& [rank, seen] : names) {
      for (const auto& p : t.param_names) {
        EXPECT_TRUE(seen.count("fwd " + unit_of(p))) << strategy << " rank " << rank << " " << p;
        EXPECT_TRUE(seen.count("bwd " + unit_of(p))) << strategy << " rank " << rank << " " << p;
      }
      for (size_t b = 0; std::string(strategy) == "buckets" && b < t.buckets; ++b)
        EXPECT_TRUE(seen.count(cat("bucket ", b))) << "rank " << rank << " bucket " << b;
      for (const char* c : {"compute", "layer", "data", "optimizer", "wait", "step", "comm"})
        EXPECT_GT(by_cat[rank][c], 0.0) << strategy << " rank " << rank << " category " << c;
      if (std::string(strategy) == "fusion-queue") {
        EXPECT_GT(by_cat[rank]["negotiate"], 0.0);
      }
    }
  }
  trace::clear();
}

// Stale-synchronous parameter server (comm.mode async): a round's update lands max_staleness
// steps late. With a single step per epoch the epoch-end drain applies it at once, so the
// weights are bitwise the synchronous ones; over many steps they differ (the staleness is
// real) but training reaches the synchronous accuracy within one point.
TEST(TrainComm, StaleSynchronousParameterServer) {
  Comm world = Comm::world();
  const int R = world.size();
  Data one_step = image_data(12);  // global batch 12: one step per epoch
  TrainOptions sync = options("resnet18", 0, "parameter-server", R);
  TrainOptions async = sync;
  async.comm.mode = "async";
  async.comm.max_staleness = 2;
  EXPECT_EQ(train_with(world, one_step, async).weights, train_with(world, one_step, sync).weights)
      << "one step per epoch: the drain applies the only round exactly as sync does";

  Data d = image_data(192);                    // 16 steps per epoch
  const Data held = image_data(96, 11, 5000);  // other samples of the same classes
  // An easy task (a bright quadrant per class), so both must get it right: 4 epochs of
  // width-1/8 ResNet with augmentation stayed near chance even in sync mode.
  for (TrainOptions* o : {&sync, &async}) {
    o->epochs = 6;
    o->augment = {};
    o->spec.width = 0.25;
  }
  const Trained s = train_with(world, d, sync, &held.train);
  const Trained a = train_with(world, d, async, &held.train);
  if (world.is_root())
    std::printf("held-out accuracy: sync %.4f, async (staleness 2) %.4f, ranks %d\n", s.final_acc,
                a.final_acc, R);
  EXPECT_NE(a.weights, s.weights) << "16 steps with stale updates cannot equal sync bitwise";
  expect_same_on_all_ranks(world, a.weights);
  EXPECT_GT(s.final_acc, 0.5) << "the task must be learnt for the comparison to mean anything";
  EXPECT_GE(a.final_acc, s.final_acc - 0.01) << "async within one point of sync";
  EXPECT_EQ(a.stats.steps, 96);
}
