// precision: auto settled per network (train/precision.hpp) on 2-3 ranks: the dtype whose
// training step the ranks' mean time says is faster, the same on every rank even where the
// ranks' own timings disagree; fp32 for steps too short to time; the first answer for a shape
// kept for the rest of the process; a backend without the measurement leaves the dtype; and
// a resumed run trains on in the dtype of its checkpoint, bitwise like an uninterrupted one.
// The timings come from a backend registered here, so every case has a known answer.
#include <gtest/gtest.h>

#include <filesystem>

#include "mpi/train_mpi_util.hpp"
#include "nn/backend_registry.hpp"
#include "support/test_util.hpp"
#include "train/precision.hpp"
#include "train/trainer.hpp"

using namespace sieve;
using namespace sieve::train;
using nn::DType;

namespace {

// What the registered backend reports: rank 0's times, and the other ranks'.
nn::StepTimes g_root, g_others;

bool fake_times(const nn::ModelSpec&, int, nn::StepTimes* out) {
  *out = Comm::world().is_root() ? g_root : g_others;
  return true;
}

void register_timed_backend() {
  static const auto make_nothing = [](DType) -> std::unique_ptr<nn::Backend> { return nullptr; };
  static const auto always = [](DType, bool, std::string*) { return true; };
  nn::register_backend({"test-timed", +make_nothing, +always, nullptr, &fake_times});
}

nn::ModelSpec timed_spec() {
  nn::ModelSpec s;
  s.arch = "resnet18";
  s.width = 0.125;
  s.backend = "test-timed";
  s.dtype = DType::bf16;  // what auto gave for the machine
  return s;
}

}  // namespace

TEST(TrainPrecision, TheRanksMeanStepTimeChoosesOneDtypeForAll) {
  register_timed_backend();
  Comm world = Comm::world();
  const nn::ModelSpec s = timed_spec();
  g_root = g_others = {10.0, 5.0};
  EXPECT_EQ(timed_auto_precision(world, s, 16, "scaled.precision"), DType::bf16);
  g_root = g_others = {5.0, 10.0};
  EXPECT_EQ(timed_auto_precision(world, s, 32, "scaled.precision"), DType::f32);
  // Rank 0 finds bf16 ten times faster, every other rank finds it slower: on 2 ranks the mean
  // is 10 ms fp32 against 6.5 ms bf16, on 3 ranks 10 against 8.3. One answer, on every rank.
  g_root = {10.0, 1.0};
  g_others = {10.0, 12.0};
  const DType mixed = timed_auto_precision(world, s, 64, "scaled.precision");
  EXPECT_EQ(mixed, DType::bf16);
  EXPECT_EQ(world.allreduce_max(int64_t(mixed)), int64_t(mixed));
  EXPECT_EQ(world.allreduce_min(int64_t(mixed)), int64_t(mixed));
  // Steps under kUntimedStepMs: fp32 whatever bf16's time.
  g_root = g_others = {0.5 * kUntimedStepMs, 0.1 * kUntimedStepMs};
  EXPECT_EQ(timed_auto_precision(world, s, 8, "scaled.precision"), DType::f32);
  // A shape already decided keeps its answer (a sweep's runs of one network agree); another
  // width is another shape, timed again.
  g_root = g_others = {5.0, 10.0};
  EXPECT_EQ(timed_auto_precision(world, s, 16, "scaled.precision"), DType::bf16);
  nn::ModelSpec wider = s;
  wider.width = 0.25;
  EXPECT_EQ(timed_auto_precision(world, wider, 16, "scaled.precision"), DType::f32);
  // ref has no per-network measurement: the dtype stays what the machine's answer was.
  nn::ModelSpec ref = s;
  ref.backend = "ref";
  EXPECT_EQ(timed_auto_precision(world, ref, 16, "pretrain.precision"), DType::bf16);
}

// A run checkpointed in bf16 and resumed where auto would now be timed (and the options
// carry fp32, as if the machine's answer had been fp32) trains on in bf16: its checkpoint
// says so. It ends bitwise where the uninterrupted bf16 run ends.
TEST(TrainPrecision, AResumedRunKeepsItsCheckpointsDtype) {
  Comm world = Comm::world();
  const std::string dir = test::scratch_dir(cat("train_precision_np", world.size()));
  if (world.is_root())
    for (const char* sub : {"/whole", "/resumed"}) std::filesystem::create_directories(dir + sub);
  world.barrier();
  test::ImageData d = test::image_data(48);
  std::vector<int64_t> all;
  for (int64_t i = 0; i < d.train.n; ++i) all.push_back(i);
  auto run = [&](TrainOptions o, const std::string& ckpt, bool resume) {
    Trainer t(world, o,
              std::make_unique<MemorySource>(d.train, all, o.global_batch, o.seed, world.rank(),
                                             world.size()),
              d.train, EvalSplit{}, d.meta, ckpt, "", "test: {}\n");
    const TrainResult r = t.run(resume);
    EXPECT_EQ(t.model().dtype() == DType::bf16 ? "bf16" : "fp32", r.precision);
    return std::make_pair(
        r.precision,
        std::vector<float>(t.model().params(), t.model().params() + t.model().num_params()));
  };
  TrainOptions bf16 = test::short_run_options("resnet18", 0);
  bf16.spec.dtype = DType::bf16;
  bf16.ckpt_every_epochs = 1;
  const auto whole = run(bf16, dir + "/whole", false);
  EXPECT_EQ(whole.first, "bf16");
  // The whole run's checkpoint after its first epoch (4 steps), alone in another directory:
  // where a run stopped there would have left it.
  if (world.is_root())
    std::filesystem::copy_file(checkpoint_name(dir + "/whole", 4),
                               checkpoint_name(dir + "/resumed", 4));
  world.barrier();
  EXPECT_EQ(checkpoint_precision(latest_checkpoint(dir + "/resumed")), DType::bf16);
  TrainOptions resumed = bf16;
  resumed.spec.dtype = DType::f32;
  resumed.precision_per_network = true;
  const auto rest = run(resumed, dir + "/resumed", true);
  EXPECT_EQ(rest.first, "bf16");
  EXPECT_EQ(rest.second, whole.second);
}
