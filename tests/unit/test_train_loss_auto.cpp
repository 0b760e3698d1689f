// pretrain.loss auto (train/loss_auto.hpp): a second run with gce only where the
// cross-entropy run memorised, its models kept, and a run stopped in either pass resumed to
// the same models.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "io/metrics.hpp"
#include "support/test_util.hpp"
#include "test_train_util.hpp"
#include "train/checkpoint.hpp"

using namespace sieve;
using namespace sieve::train;
namespace fs = std::filesystem;

namespace {

// 96 training and 32 test rows of 32 Gaussian features whose labels (4 classes) are random:
// nothing but memorising fits them, so a long run memorises and a one-epoch run does not.
void write_random_label_table(const std::string& path) {
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss;
  auto rows = [&](int n, int64_t id0) {
    test::TinySplit s;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < 32; ++j) s.features.push_back(gauss(rng));
      s.labels.push_back(int32_t(rng() % 4));
      s.ids.push_back(id0 + i);
    }
    return s;
  };
  const test::TinySplit train = rows(96, 1), test = rows(32, 5000);
  test::write_dataset(path, train, &test, 4, 0, 32, std::vector<double>(32, 0.0),
                      std::vector<double>(32, 1.0));
}

// pretrain of an MLP on that table in run directory `dir` (a quarter held out, a checkpoint
// every step); `env` (VAR=value) exported first; under mpirun with `ranks` > 0 ranks; its exit
// code in *rc, its output returned.
std::string pretrain(const std::string& dir, const std::string& env, const std::string& extra,
                     int* rc, int ranks = 0) {
  std::string out;
  *rc = test::run_command(
      cat(env.empty() ? "" : "export " + env + "; ", ranks > 0 ? test::mpirun_prefix(ranks) : "",
          test::tool_path("pretrain"), " --set run.dir=", dir,
          " --set pretrain.model.arch=mlp --set pretrain.model.hidden=[256]",
          " --set pretrain.global_batch=16 --set pretrain.holdout=0.25",
          " --set pretrain.optimizer.lr=0.1 --set pretrain.augment=false",
          " --set pretrain.checkpoint.every_steps=1 --set pretrain.checkpoint.keep=3", extra),
      &out);
  return out;
}

std::vector<float> model_weights(const std::string& path) {
  auto m = load_model(path);
  return std::vector<float>(m->params(), m->params() + m->num_params());
}

Json early_record(const std::string& dir) {
  return read_json_lines(dir + "/pretrain/model_early.json").back();
}

}  // namespace

// auto trains once where the cross-entropy run did not memorise (one epoch), twice where it
// did (20 epochs): the kept models are then bitwise those of a plain gce run, the first
// run's metrics stay beside them, model_early.json records its verdict, and the fold models
// (trained in the same process or as separate tasks) train with gce too. An explicit
// cross_entropy run that memorised is told that auto would retrain.
TEST(TrainLossAuto, RetrainsWithGceOnlyWhereTheCrossEntropyRunMemorised) {
  const std::string d = test::scratch_dir("train_loss_auto");
  write_random_label_table(d + "/dataset.h5");
  int rc = 0;
  std::string out = pretrain(d, "", " --set pretrain.epochs=1", &rc);
  ASSERT_EQ(rc, 0) << out;
  Json early = early_record(d);
  EXPECT_FALSE(early["memorised"].get<bool>());
  EXPECT_EQ(early["loss"].get<std::string>(), "cross_entropy");
  EXPECT_FALSE(early.contains("first_pass"));
  EXPECT_FALSE(fs::exists(d + "/pretrain/metrics_first_pass.jsonl"));
  EXPECT_EQ(out.find("training again with gce"), std::string::npos) << out;

  out = pretrain(d, "", " --overwrite --set pretrain.epochs=20", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("training again with gce"), std::string::npos) << out;
  early = early_record(d);
  EXPECT_EQ(early["loss"].get<std::string>(), "gce");
  ASSERT_TRUE(early.contains("first_pass")) << early.dump();
  const Json& first = early["first_pass"];
  EXPECT_EQ(first["loss"].get<std::string>(), "cross_entropy");
  EXPECT_TRUE(first["memorised"].get<bool>());
  EXPECT_EQ(first["epochs"].get<int64_t>(), 20);
  EXPECT_GT(first["train_acc"].get<double>(), first["peak_acc"].get<double>());
  const auto first_metrics = read_json_lines(d + "/pretrain/metrics_first_pass.jsonl");
  ASSERT_EQ(first_metrics.size(), 20u);
  EXPECT_DOUBLE_EQ(first_metrics.back()["train_acc"].get<double>(),
                   first["train_acc"].get<double>());
  EXPECT_EQ(read_json_lines(d + "/pretrain/metrics.jsonl").size(), 20u);
  const std::vector<float> kept = model_weights(d + "/pretrain/model.h5");
  const std::vector<float> kept_early = model_weights(d + "/pretrain/model_early.h5");

  const std::string g = test::scratch_dir("train_loss_gce");
  write_random_label_table(g + "/dataset.h5");
  out = pretrain(g, "", " --set pretrain.epochs=20 --set pretrain.loss=gce", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(model_weights(g + "/pretrain/model.h5"), kept);
  EXPECT_EQ(model_weights(g + "/pretrain/model_early.h5"), kept_early);

  // cross_entropy, asked for: one run, and the note that names auto.
  out = pretrain(g, "", " --overwrite --set pretrain.epochs=20 --set pretrain.loss=cross_entropy",
                 &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(early_record(g)["memorised"].get<bool>());
  EXPECT_NE(out.find("pretrain.loss=auto"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(g + "/pretrain/metrics_first_pass.jsonl"));  // the auto run's is gone

  // The fold models: in the same process, and as a separate task of the main model's run.
  out = pretrain(d, "", " --overwrite --set pretrain.epochs=20 --set pretrain.folds=2", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(read_json_lines(d + "/pretrain/model_fold0_early.json").back()["loss"], "gce");
  out = pretrain(d, "", " --overwrite --set pretrain.epochs=20 --set pretrain.folds=2 --skip-folds",
                 &rc);
  ASSERT_EQ(rc, 0) << out;
  out =
      pretrain(d, "", " --overwrite --set pretrain.epochs=20 --set pretrain.folds=2 --fold 1", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(read_json_lines(d + "/pretrain/model_fold1_early.json").back()["loss"], "gce");
}

// Killed (kill -9) in the first run, resumed and killed in the second, resumed again: the
// same models and records as an uninterrupted run, and the first run is not trained again
// once the second has begun.
TEST(TrainLossAuto, KilledInEitherRunResumesToTheSameModels) {
  const std::string a = test::scratch_dir("train_loss_auto_whole");
  const std::string b = test::scratch_dir("train_loss_auto_killed");
  for (const auto& d : {a, b}) write_random_label_table(d + "/dataset.h5");
  const std::string epochs = " --set pretrain.epochs=20";
  int rc = 0;
  std::string out = pretrain(a, "", epochs, &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(early_record(a).contains("first_pass")) << "the run must memorise to test this";
  // About 5 steps an epoch: step 30 lies in the first run's seventh epoch.
  out = pretrain(b, "SIEVE_DEBUG_KILL_STEP=30", epochs, &rc);
  ASSERT_EQ(rc, 128 + 9) << out;
  EXPECT_EQ(out.find("training again with gce"), std::string::npos) << out;
  // Resumed past step 10 in the first run, killed at step 10 of the second.
  out = pretrain(b, "SIEVE_DEBUG_KILL_STEP=10", epochs + " --resume", &rc);
  ASSERT_EQ(rc, 128 + 9) << out;
  EXPECT_NE(out.find("training again with gce"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(b + "/pretrain/model.h5"));
  // Resumed with another loss, the run would mix the two runs' files: one line, exit 2.
  out = pretrain(b, "", epochs + " --resume --set pretrain.loss=cross_entropy", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("pretrain.loss: the run to resume"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(b + "/pretrain/model.h5"));
  out = pretrain(b, "", epochs + " --resume", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resuming the second run, with gce"), std::string::npos) << out;
  EXPECT_EQ(out.find("training again with gce"), std::string::npos) << out;
  for (const char* name : {"/pretrain/model.h5", "/pretrain/model_early.h5"})
    EXPECT_EQ(model_weights(a + name), model_weights(b + name)) << name;
  Json ea = early_record(a), eb = early_record(b);
  for (Json* e : {&ea, &eb}) {
    e->erase("run_id");
    (*e)["first_pass"].erase("elapsed_s");
  }
  EXPECT_EQ(ea, eb);
  for (const char* name : {"/pretrain/metrics_first_pass.jsonl", "/pretrain/metrics.jsonl"}) {
    const auto ma = read_json_lines(a + name), mb = read_json_lines(b + name);
    ASSERT_EQ(ma.size(), mb.size()) << name;
    for (size_t e = 0; e < ma.size(); ++e)
      EXPECT_EQ(ma[e]["train_acc"], mb[e]["train_acc"]) << name << " epoch " << e + 1;
  }
}

// Under 2 ranks (rank 0 reads and writes the verdict, every rank follows it): killed in the
// first run, then in the second, and resumed, the run ends in the second pass's models.
TEST(TrainLossAuto, TwoRanksFollowOneVerdictThroughKillsAndResumes) {
  const std::string d = test::scratch_dir("train_loss_auto_np2");
  write_random_label_table(d + "/dataset.h5");
  const std::string epochs = " --set pretrain.epochs=20";
  int rc = 0;
  std::string out = pretrain(d, "SIEVE_DEBUG_KILL_STEP=30", epochs, &rc, 2);
  ASSERT_NE(rc, 0) << out;
  EXPECT_EQ(out.find("training again with gce"), std::string::npos) << out;
  out = pretrain(d, "SIEVE_DEBUG_KILL_STEP=10", epochs + " --resume", &rc, 2);
  ASSERT_NE(rc, 0) << out;
  EXPECT_NE(out.find("training again with gce"), std::string::npos) << out;
  out = pretrain(d, "", epochs + " --resume", &rc, 2);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resuming the second run, with gce"), std::string::npos) << out;
  const Json early = early_record(d);
  EXPECT_EQ(early["loss"].get<std::string>(), "gce");
  ASSERT_TRUE(early.contains("first_pass")) << early.dump();
  EXPECT_TRUE(early["first_pass"]["memorised"].get<bool>());
  EXPECT_EQ(read_json_lines(d + "/pretrain/metrics_first_pass.jsonl").size(), 20u);
  EXPECT_EQ(read_json_lines(d + "/pretrain/metrics.jsonl").size(), 20u);
  EXPECT_TRUE(fs::exists(d + "/pretrain/model.h5"));
}
