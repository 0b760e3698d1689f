// pretrain end to end on tiny data: determinism, kill -9 + --resume, SIGUSR1 + --resume,
// NaN guard. (Learning and the other programs: test_train_programs.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "io/h5.hpp"
#include "io/metrics.hpp"
#include "support/test_util.hpp"
#include "test_train_util.hpp"
#include "train/checkpoint.hpp"
#include "train/loader.hpp"

using namespace sieve;
namespace fs = std::filesystem;

namespace {

// Every test here compares separately started runs bitwise (test_util.hpp).
const bool kAutoPinnedUnlessForced = test::pin_precision_auto_unless_forced();

// Tiny ResNet-18 (width 1/8: 8..64 channels) on 8x8 images, 64 samples, batch 16:
// 4 steps per epoch, 3 epochs, checkpoint after every step.
std::string resnet_args(const std::string& dir) {
  return cat(" --set run.dir=", dir, " --set pretrain.model.arch=resnet18",
             " --set pretrain.model.width=0.125 --set pretrain.epochs=3",
             " --set pretrain.global_batch=16 --set pretrain.checkpoint.every_steps=1",
             " --set pretrain.checkpoint.keep=3 --set pretrain.optimizer.lr=0.05",
             " --set pretrain.schedule.warmup_epochs=1");
}

std::string pretrain(const std::string& dir, const std::string& extra, int* rc,
                     const std::string& env = "") {
  std::string out;
  *rc =
      test::run_command(cat(env, " ", test::tool_path("pretrain"), resnet_args(dir), extra), &out);
  return out;
}

std::map<std::string, std::vector<float>> state_of(const std::string& path) {
  std::map<std::string, std::vector<float>> m;
  auto model = train::load_model(path);
  for (const auto& p : model->param_info())
    m[p.name] = std::vector<float>(model->params() + p.offset, model->params() + p.offset + p.size);
  for (const auto& b : model->buffers()) m[b.name] = std::vector<float>(b.data, b.data + b.size);
  return m;
}

std::string fresh_run(const std::string& name) {
  std::string dir = test::scratch_dir(name);
  test::write_image_dataset(dir + "/dataset.h5", 64, 32, 4);
  return dir;
}

}  // namespace

TEST(TrainTools, SameConfigTwiceGivesBitwiseIdenticalWeights) {
  std::string a = fresh_run("train_tools_det_a"), b = fresh_run("train_tools_det_b");
  int rc = 0;
  std::string out = pretrain(a, "", &rc);
  ASSERT_EQ(rc, 0) << out;
  out = pretrain(b, "", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(state_of(a + "/pretrain/model.h5"), state_of(b + "/pretrain/model.h5"));
  auto lines = read_json_lines(a + "/pretrain/metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2]["epoch"], 3);
  // pretrain.holdout 0.1 holds out 2 of each class's 16 samples: 56 trained on, 3 full
  // batches of 16 per epoch (the last partial batch is dropped).
  EXPECT_EQ(lines[2]["step"], 9);
  EXPECT_TRUE(lines[2].contains("test_acc"));
  EXPECT_TRUE(lines[2].contains("images_per_s"));
  // Output exists: refused without --overwrite, before any work.
  out = pretrain(a, "", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--overwrite"), std::string::npos) << out;

  // The parameter homes of a device model give the same weights bitwise, run on the CPU:
  // staged (host master copies: gradients down, parameters up, no overlap) and device
  // (momentum in backend memory, the step and the non-finite check as backend ops; the CPU
  // as a fake device). Their checkpoints hold the same momentum too: a run killed at step 6
  // and resumed in the device home ends where the host home's uninterrupted run does, and
  // so does one resumed in the host home from the device home's checkpoint.
  for (const char* home : {"staged", "device"}) {
    std::string h = fresh_run(cat("train_tools_home_", home));
    out = pretrain(h, cat(" --set pretrain.param_home=", home), &rc);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find(cat("pretrain.param_home ", home, ":")), std::string::npos) << out;
    EXPECT_TRUE(state_of(a + "/pretrain/model.h5") == state_of(h + "/pretrain/model.h5")) << home;
  }
  for (const char* resume_home : {"device", "host"}) {
    std::string d = fresh_run(cat("train_tools_device_kill_", resume_home));
    out = pretrain(d, " --set pretrain.param_home=device", &rc, "SIEVE_DEBUG_KILL_STEP=6");
    ASSERT_EQ(rc, 128 + 9) << out;
    out = pretrain(d, cat(" --set pretrain.param_home=", resume_home, " --resume"), &rc);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_TRUE(state_of(a + "/pretrain/model.h5") == state_of(d + "/pretrain/model.h5"))
        << resume_home;
  }

  // The streaming loader with one rank and one window is the in-memory order: same weights
  // (and it streams the held-out and test evaluations too).
  std::string m = fresh_run("train_tools_stream_one_window");
  out = pretrain(m, " --set data.loader=stream", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("streamed"), std::string::npos) << out;
  EXPECT_EQ(state_of(a + "/pretrain/model.h5"), state_of(m + "/pretrain/model.h5"));

  // kill -9 at step 6, then --resume: the same weights as the uninterrupted run.
  std::string k = fresh_run("train_tools_kill");
  out = pretrain(k, "", &rc, "SIEVE_DEBUG_KILL_STEP=6");
  ASSERT_EQ(rc, 128 + 9) << out;
  EXPECT_FALSE(fs::exists(k + "/pretrain/model.h5"));
  EXPECT_EQ(train::latest_checkpoint(k + "/pretrain/checkpoints"),
            train::checkpoint_name(k + "/pretrain/checkpoints", 6));
  out = pretrain(k, " --resume", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resuming from"), std::string::npos) << out;
  EXPECT_EQ(state_of(a + "/pretrain/model.h5"), state_of(k + "/pretrain/model.h5"));
  EXPECT_EQ(read_json_lines(k + "/pretrain/metrics.jsonl").size(), 3u);

  // SIGUSR1 at step 2: checkpoint, exit 75; --resume completes identically.
  std::string u = fresh_run("train_tools_usr1");
  out = pretrain(u, " --set pretrain.checkpoint.every_steps=0", &rc, "SIEVE_DEBUG_SIGNAL_STEP=2");
  ASSERT_EQ(rc, 75) << out;
  EXPECT_TRUE(fs::exists(train::checkpoint_name(u + "/pretrain/checkpoints", 3))) << out;
  out = pretrain(u, " --set pretrain.checkpoint.every_steps=0 --resume", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(state_of(a + "/pretrain/model.h5"), state_of(u + "/pretrain/model.h5"));
}

// Streaming with windows far smaller than the split (an 8 KB budget for 12 KB of samples:
// 2 KB windows of 10 samples, smaller than a batch, so samples carry over between windows):
// killed mid-epoch and resumed, it continues exactly; a resume with another
// budget (another order) is refused naming the checkpoint.
TEST(TrainTools, StreamedRunResumesExactlyAndRefusesAnotherGeometry) {
  const std::string small = " --set data.loader=auto --set data.memory_budget_mb=0.008";
  std::string a = fresh_run("train_tools_stream_a"), k = fresh_run("train_tools_stream_kill");
  int rc = 0;
  std::string out = pretrain(a, small, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("streamed"), std::string::npos) << out;
  out = pretrain(k, small, &rc, "SIEVE_DEBUG_KILL_STEP=5");
  ASSERT_EQ(rc, 128 + 9) << out;
  out = pretrain(k, small + " --resume", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(state_of(a + "/pretrain/model.h5"), state_of(k + "/pretrain/model.h5"));

  std::string g = fresh_run("train_tools_stream_other");
  out = pretrain(g, small, &rc, "SIEVE_DEBUG_KILL_STEP=5");
  ASSERT_EQ(rc, 128 + 9) << out;
  out = pretrain(g, " --set data.loader=memory --resume", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("loader"), std::string::npos) << out;
  EXPECT_NE(out.find("ckpt-"), std::string::npos) << out;
}

// In every parameter home: the non-finite check runs where the gradients are (the device
// home sums them with a backend op).
TEST(TrainTools, NanGradientStopsNamingTheStepAndKeepsGoodCheckpoints) {
  for (const char* home : {"host", "staged", "device"}) {
    std::string d = fresh_run(cat("train_tools_nan_", home));
    int rc = 0;
    std::string out =
        pretrain(d, cat(" --set pretrain.param_home=", home), &rc, "SIEVE_DEBUG_NAN_STEP=5");
    ASSERT_EQ(rc, 1) << home << out;
    EXPECT_NE(out.find("divergence at step 5"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(d + "/pretrain/model.h5"));
    std::string last = train::latest_checkpoint(d + "/pretrain/checkpoints");
    EXPECT_EQ(last, train::checkpoint_name(d + "/pretrain/checkpoints", 5));
    h5::File f = h5::File::open(last);
    for (const char* name : {"/state/conv1.weight", "/state/fc.weight", "/optimizer/fc.weight"})
      for (float v : f.read_all<float>(name)) ASSERT_TRUE(std::isfinite(v)) << name;
  }
}
