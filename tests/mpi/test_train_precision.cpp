// precision: auto settled per network (train/precision.hpp) on 2-3 ranks: the dtype whose
// training step the ranks' mean time says is faster, the same on every rank even where the
// ranks' own timings disagree; fp32 for steps too short to time; the first answer for a
// network kept for the rest of the process, and where a record directory is given, for every
// run that finds its record there; a backend without the measurement leaves the dtype; and
// a resumed run trains on in the dtype of its checkpoint, bitwise like an uninterrupted one.
// The timings come from a backend registered here, so every case has a known answer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/metrics.hpp"
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
  const int R = world.size();
  g_root = g_others = {10.0, 5.0};
  EXPECT_EQ(timed_auto_precision(world, s, 16 * R, 0, "scaled.precision", ""), DType::bf16);
  g_root = g_others = {5.0, 10.0};
  EXPECT_EQ(timed_auto_precision(world, s, 32 * R, 0, "scaled.precision", ""), DType::f32);
  // Rank 0 finds bf16 ten times faster, every other rank finds it slower: on 2 ranks the mean
  // is 10 ms fp32 against 6.5 ms bf16, on 3 ranks 10 against 8.3. One answer, on every rank.
  g_root = {10.0, 1.0};
  g_others = {10.0, 12.0};
  const DType mixed = timed_auto_precision(world, s, 64 * R, 0, "scaled.precision", "");
  EXPECT_EQ(mixed, DType::bf16);
  EXPECT_EQ(world.allreduce_max(int64_t(mixed)), int64_t(mixed));
  EXPECT_EQ(world.allreduce_min(int64_t(mixed)), int64_t(mixed));
  // Steps under kUntimedStepMs: fp32 whatever bf16's time.
  g_root = g_others = {0.5 * kUntimedStepMs, 0.1 * kUntimedStepMs};
  EXPECT_EQ(timed_auto_precision(world, s, 8 * R, 0, "scaled.precision", ""), DType::f32);
  // A network already decided keeps its answer (a sweep's runs of one network agree);
  // another width is another network, timed again; so is another micro-batch.
  g_root = g_others = {5.0, 10.0};
  EXPECT_EQ(timed_auto_precision(world, s, 16 * R, 0, "scaled.precision", ""), DType::bf16);
  nn::ModelSpec wider = s;
  wider.width = 0.25;
  EXPECT_EQ(timed_auto_precision(world, wider, 16 * R, 0, "scaled.precision", ""), DType::f32);
  EXPECT_EQ(timed_auto_precision(world, s, 16 * R, 4, "scaled.precision", ""), DType::f32);
  // A batch that does not split evenly gives the ranks different forward batches (33 on 2
  // ranks: 17 and 16; 32 on 3: 11, 11, 10). What was decided is looked up by the run's
  // global batch, the same on every rank, so the next batch is timed on all ranks or on none
  // (looked up by the forward batch, some ranks would skip the collective and the rest hang).
  g_root = g_others = {10.0, 5.0};
  EXPECT_EQ(timed_auto_precision(world, s, 33, 0, "scaled.precision", ""), DType::bf16);
  EXPECT_EQ(timed_auto_precision(world, s, 32, 0, "scaled.precision", ""), DType::bf16);
  // ref has no per-network measurement: the dtype stays what the machine's answer was.
  nn::ModelSpec ref = s;
  ref.backend = "ref";
  EXPECT_EQ(timed_auto_precision(world, ref, 16, 0, "pretrain.precision", ""), DType::bf16);
}

// With a record directory (train_scaled: the sweep's), the first decision for a network is
// written there and every later run of it takes that one, whatever its own timing would say:
// another process, another group of ranks, a rerun. A record that is not one is ignored.
TEST(TrainPrecision, TheRecordedDecisionIsEveryRunsDecision) {
  register_timed_backend();
  Comm world = Comm::world();
  const std::string dir = test::scratch_dir(cat("train_precision_record_np", world.size()));
  nn::ModelSpec s = timed_spec();
  s.width = 0.5;  // networks no other test here decides
  const int R = world.size();
  const std::string first = auto_precision_record(dir + "/a", s, 64, R, 0);
  EXPECT_NE(first.find("/a/auto_precision/test-timed_resnet18_w0.5_cifar_3x32x32_c10_b64_r"),
            std::string::npos)
      << first;
  g_root = g_others = {5.0, 10.0};
  EXPECT_EQ(timed_auto_precision(world, s, 64, 0, "scaled.precision", dir + "/a"), DType::f32);
  world.barrier();
  ASSERT_TRUE(std::filesystem::exists(first));
  {
    std::ifstream in(first);
    const Json j = Json::parse(in);
    EXPECT_EQ(j.at("precision"), "fp32");
    EXPECT_DOUBLE_EQ(j.at("fp32_ms").get<double>(), 5.0);
    EXPECT_DOUBLE_EQ(j.at("bf16_ms").get<double>(), 10.0);
  }
  // The same network under another directory holding a copy of that record (as another
  // process finds the sweep's): the record decides, not the timing, which now favours bf16.
  const std::string copy = auto_precision_record(dir + "/b", s, 64, R, 0);
  if (world.is_root()) {
    std::filesystem::create_directories(std::filesystem::path(copy).parent_path());
    std::filesystem::copy_file(first, copy);
  }
  world.barrier();
  g_root = g_others = {10.0, 5.0};
  EXPECT_EQ(timed_auto_precision(world, s, 64, 0, "scaled.precision", dir + "/b"), DType::f32);
  // A file that is no record: ignored, this run times and decides (bf16); it does not
  // replace the file, which is not its own. Nor is one whose precision is no string
  // (nlohmann's value() would throw on it).
  const std::string bad = auto_precision_record(dir + "/c", s, 64, R, 0);
  for (const auto& [sub, text] : {std::pair{"/c", "{\"precision\": \"fp16\"}\n"},
                                  std::pair{"/d", "{\"precision\": 5, \"fp32_ms\": \"x\"}\n"}}) {
    const std::string path = auto_precision_record(dir + sub, s, 64, R, 0);
    if (world.is_root()) {
      std::filesystem::create_directories(std::filesystem::path(path).parent_path());
      std::ofstream(path) << text;
    }
    world.barrier();
    EXPECT_EQ(timed_auto_precision(world, s, 64, 0, "scaled.precision", dir + sub), DType::bf16)
        << sub;
    world.barrier();
  }
  std::ifstream in(bad);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "{\"precision\": \"fp16\"}\n");
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
