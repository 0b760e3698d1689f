// Data parallelism on 2-3 ranks: the bucketed overlapping all-reduce, and training on R
// ranks equals training on one rank with the same global batch (up to float
// reduction order), for an MLP and for a ResNet (BN: one rank accumulates micro-batches
// that match the R per-rank parts).
#include <gtest/gtest.h>

#include <cmath>

#include "mpi/train_mpi_util.hpp"
#include "support/test_util.hpp"
#include "train/reducer.hpp"
#include "train/trainer.hpp"

using namespace sieve;
using namespace sieve::train;

TEST(TrainParallel, BucketReducerSumsEveryCoveredElement) {
  Comm world = Comm::world();
  // Three "tensors" with alignment gaps; tiny buckets (1024 floats) so there are several.
  std::vector<std::pair<size_t, size_t>> cov = {{0, 1500}, {1504, 2000}, {3504, 700}};
  const size_t total = 4208;
  std::vector<float> g(total, 0.0f);
  for (auto [o, c] : cov)
    for (size_t i = o; i < o + c; ++i) g[i] = float((i % 97) * (world.rank() + 1)) * 0.01f;
  GradReducer red(world, g.data(), total, cov, 4096);
  EXPECT_EQ(red.num_buckets(), 5u);
  red.arm();
  // Report as backward does: last tensor first, each in two pieces.
  for (auto it = cov.rbegin(); it != cov.rend(); ++it) {
    red.ready(it->first + it->second / 2, it->second - it->second / 2);
    red.ready(it->first, it->second / 2);
  }
  if (world.size() > 1) {
    EXPECT_GE(red.started_early(), 4);  // all but none started by hooks
  }
  red.finish();
  const int R = world.size();
  for (auto [o, c] : cov)
    for (size_t i = o; i < o + c; ++i)
      ASSERT_NEAR(g[i], float(i % 97) * 0.01f * R * (R + 1) / 2, 1e-4) << i;
}

namespace {

using Data = test::ImageData;
using test::image_data;

TrainOptions options(const std::string& arch, int64_t micro) {
  return test::short_run_options(arch, micro);
}

std::vector<float> train_weights(const Comm& comm, const Data& d, const TrainOptions& o,
                                 const std::string& dir) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < d.train.n; ++i) all.push_back(i);
  Trainer t(comm, o,
            std::make_unique<MemorySource>(d.train, all, o.global_batch, o.seed, comm.rank(),
                                           comm.size()),
            d.train, EvalSplit{}, d.meta, dir, "", "test: {}\n");
  t.run(false);
  return std::vector<float>(t.model().params(), t.model().params() + t.model().num_params());
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / (1e-3 + std::abs(double(b[i]))));
  EXPECT_LT(worst, tol);
}

}  // namespace

TEST(TrainParallel, RanksMatchOneRankWithTheSameGlobalBatch) {
  Comm world = Comm::world();
  Comm self(MPI_COMM_SELF);
  std::string dir = test::scratch_dir("train_parallel");
  Data d = image_data(48);  // 4 steps per epoch
  const int R = world.size();
  for (const char* arch : {"mlp", "resnet18"}) {
    auto par = train_weights(world, d, options(arch, 0), dir);
    auto par2 = train_weights(world, d, options(arch, 0), dir);
    EXPECT_EQ(par, par2) << arch << ": same rank count must be bitwise reproducible";
    // One rank, micro-batches of 12/R = the R per-rank parts (same BN batches).
    auto one = train_weights(self, d, options(arch, 12 / R), dir);
    expect_close(par, one, 2e-3);
    // Every rank holds identical weights.
    std::vector<float> sum = par;
    world.allreduce_sum(sum.data(), sum.size());
    for (size_t i = 0; i < par.size(); ++i)
      ASSERT_NEAR(sum[i], par[i] * R, 1e-5 * (1 + std::abs(par[i] * R)));
  }
}

// BN running statistics follow each rank's own micro-batches; rank 0's are broadcast before
// anything reads them (trainer.cpp broadcast_buffers), not before every step. At the end of a
// run every rank holds rank 0's bitwise, so an evaluation on any rank, and the model rank 0
// writes, agree; and rank 0's are those of a run that broadcasts every step (they never
// depend on the other ranks'), which the bitwise-reproducible weights above rest on.
TEST(TrainParallel, EveryRankEndsWithRankZerosRunningStatistics) {
  Comm world = Comm::world();
  std::string dir = test::scratch_dir(cat("train_parallel_bn_np", world.size()));
  Data d = image_data(48);
  std::vector<int64_t> all;
  for (int64_t i = 0; i < d.train.n; ++i) all.push_back(i);
  const TrainOptions o = options("resnet18", 0);
  Trainer t(world, o,
            std::make_unique<MemorySource>(d.train, all, o.global_batch, o.seed, world.rank(),
                                           world.size()),
            d.train, EvalSplit{}, d.meta, dir, "", "test: {}\n");
  t.run(false);
  const auto buffers = t.model().buffers();
  ASSERT_FALSE(buffers.empty());
  for (const auto& b : buffers) {
    std::vector<float> mine(b.data, b.data + b.size), root = mine;
    world.bcast(root.data(), root.size());
    EXPECT_EQ(mine, root) << b.name << " on rank " << world.rank();
    if (b.name.find("running_var") != std::string::npos) {
      EXPECT_NE(mine, std::vector<float>(b.size, 1.0f)) << b.name << ": never updated";
    }
  }
}

// The streaming loader on R ranks: each rank reads only its own chunks, yet the ranks step
// together and end with identical weights, twice the same (deterministic for a rank count);
// and every rank's first step is its full part of the batch.
TEST(TrainParallel, StreamedRanksStepTogetherDeterministically) {
  Comm world = Comm::world();
  std::string dir = test::scratch_dir(cat("train_parallel_stream_np", world.size()));
  if (world.is_root()) test::write_image_dataset(dir + "/d.h5", 96, 0, 4);
  world.barrier();
  const DatasetMeta meta = read_dataset_meta(dir + "/d.h5");
  SplitData shape;  // geometry only: the samples stream from the file
  shape.image = true, shape.n = 96, shape.h = shape.w = 8, shape.c = 3;
  auto run = [&] {
    std::vector<int64_t> all;
    for (int64_t i = 0; i < 96; ++i) all.push_back(i);
    TrainOptions o = options("resnet18", 0);
    auto src =
        std::make_unique<StreamSource>(dir + "/d.h5", data::Split::Train, all, o.global_batch,
                                       o.seed, world.rank(), world.size(), StreamGeometry{5, 3});
    EXPECT_EQ(int64_t(src->rank_part(0, 0).rows.size()),
              block_range(o.global_batch, world.rank(), world.size()).size());
    Trainer t(world, o, std::move(src), shape, EvalSplit{}, meta, dir, "", "test: {}\n");
    t.run(false);
    return std::vector<float>(t.model().params(), t.model().params() + t.model().num_params());
  };
  const auto a = run(), b = run();
  EXPECT_EQ(a, b);
  std::vector<float> sum = a;
  world.allreduce_sum(sum.data(), sum.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(sum[i], a[i] * world.size(), 1e-5 * (1 + std::abs(a[i] * world.size()))) << i;
}

// The device parameter home with the CPU as the device (train/param_home.hpp): momentum in
// backend memory, the non-finite check and SGD (here with LARS, whose trust ratios come back
// from the backend's norms) as backend ops, the host's bucket reducer on the backend's
// gradient buffer. Bitwise the host home on R ranks; a strategy other than buckets is refused
// naming the key (on any rank count: the other strategies update through the host).
TEST(TrainParallel, DeviceHomeOnTheCpuMatchesTheHostHomeBitwise) {
  Comm world = Comm::world();
  std::string dir = test::scratch_dir(cat("train_parallel_device_home_np", world.size()));
  Data d = image_data(48);
  for (const char* arch : {"mlp", "resnet18"}) {
    for (bool lars : {false, true}) {
      TrainOptions o = options(arch, 0);
      o.opt.lars = lars;
      o.param_home = "host";
      const auto host = train_weights(world, d, o, dir);
      o.param_home = "device";
      EXPECT_EQ(host, train_weights(world, d, o, dir)) << arch << (lars ? " LARS" : "");
    }
  }
  TrainOptions o = options("mlp", 0);
  o.param_home = "device";
  o.param_home_key = "pretrain.param_home";
  o.comm.strategy = "fusion-queue";
  try {  // mpi tests run on 2 and 3 ranks
    train_weights(world, d, o, dir);
    ADD_FAILURE() << "fusion-queue accepted in the device home";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("pretrain.param_home device"), std::string::npos)
        << e.what();
  }
}
