// The programs on tiny data: a small ResNet learns synthetic images (and extract_features
// writes its features), the MLP fits Iris, train_scaled's sweep table and keep-mask arms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "io/h5.hpp"
#include "io/metrics.hpp"
#include "nn/backend.hpp"
#include "support/test_util.hpp"
#include "test_train_util.hpp"
#include "train/checkpoint.hpp"
#include "train/loader.hpp"

using namespace sieve;
namespace fs = std::filesystem;

namespace {
std::string pretrain(const std::string& dir, const std::string& extra, int* rc) {
  std::string out;
  *rc = test::run_command(
      cat(test::tool_path("pretrain"), " --set run.dir=", dir,
          " --set pretrain.model.arch=resnet18 --set pretrain.model.width=0.125",
          " --set pretrain.optimizer.lr=0.05 --set pretrain.schedule.warmup_epochs=1", extra),
      &out);
  return out;
}
}  // namespace

TEST(TrainPrograms, SmallResnetLearnsSyntheticImagesAndFeaturesAreExtracted) {
  std::string d = test::scratch_dir("train_tools_learn");
  test::write_image_dataset(d + "/dataset.h5", 256, 64, 4);
  int rc = 0;
  std::string out = pretrain(d,
                             " --set pretrain.epochs=6 --set pretrain.checkpoint.every_steps=0"
                             " --set pretrain.global_batch=32 --set pretrain.augment=false",
                             &rc);
  ASSERT_EQ(rc, 0) << out;
  auto lines = read_json_lines(d + "/pretrain/metrics.jsonl");
  ASSERT_EQ(lines.size(), 6u);  // (8x8 images: a 4-pixel crop shift would erase the signal)
  EXPECT_GT(lines.back()["test_acc"].get<double>(), 0.6) << out;  // chance: 0.25

  out.clear();
  // fp32 pinned: the row-5 check below compares with an fp32 forward (auto is bf16 on CPUs
  // where native bf16 is faster, where that row differs by ~1e-2).
  rc = test::run_command(cat(test::tool_path("extract_features"), " --set run.dir=", d,
                             " --set features.precision=fp32"),
                         &out);
  ASSERT_EQ(rc, 0) << out;
  h5::File f = h5::File::open(d + "/features.h5");
  h5::require_schema(f, "sieve.features/1");
  auto dims = f.require<float>("/train/features", 2);
  EXPECT_EQ(dims[0], 256u);
  EXPECT_EQ(dims[1], 64u);  // ResNet-18 at width 1/8: 512/8
  EXPECT_EQ(f.require<float>("/test/features", 2)[0], 64u);
  // By default the features come from the early-learning model (held-out peak), which
  // pretrain wrote beside the final one.
  ASSERT_TRUE(fs::exists(d + "/pretrain/model_early.h5"));
  EXPECT_EQ(f.attr_string("/", "model_choice"), "early");
  // Row 5 equals that model's own features for sample 5 (independent forward here).
  auto model = train::load_model(d + "/pretrain/model_early.h5");
  auto meta = train::read_dataset_meta(d + "/dataset.h5");
  auto split = train::read_split(d + "/dataset.h5", "train");
  train::Batch b;
  std::vector<int64_t> idx = {5};
  train::make_batch(split, meta, idx.data(), 1, train::Augmentation{}, 0, 0, &b);
  model->forward(b.x.data(), 1, false);
  std::vector<float> row(64);
  f.read_rows<float>("/train/features", 5, 1, row.data());
  for (int j = 0; j < 64; ++j) EXPECT_NEAR(row[j], model->features()[j], 1e-4) << j;
  EXPECT_EQ(f.read_all<int64_t>("/train/sample_id"), split.sample_id);
  // Class probabilities for the confident detector: one row per sample, each summing to 1.
  auto probs = f.read_all<float>("/train/probs");
  ASSERT_EQ(probs.size(), 256u * 4);
  for (size_t i = 0; i < 256; ++i) {
    double sum = 0;
    for (int c = 0; c < 4; ++c) sum += probs[i * 4 + c];
    EXPECT_NEAR(sum, 1.0, 1e-5) << i;
  }
  // Streamed in blocks (7 samples: uneven, several per rank, the last block short) on 1, 2
  // and 3 ranks: the same file contents as one block on one rank.
  const auto feats = f.read_all<float>("/train/features");
  const auto test_feats = f.read_all<float>("/test/features");
  for (int np : {1, 2, 3}) {
    const std::string o = cat(d, "/features-blocks-", np, ".h5");
    rc = test::run_command(cat(test::mpirun_prefix(np), test::tool_path("extract_features"),
                               " --set run.dir=", d, " --set features.block_samples=7",
                               " --set features.precision=fp32",
                               " --set features.batch=3 --output ", o),
                           &out);
    ASSERT_EQ(rc, 0) << out;
    h5::File g = h5::File::open(o);
    auto gf = g.read_all<float>("/train/features");
    ASSERT_EQ(gf.size(), feats.size());
    for (size_t i = 0; i < feats.size(); ++i) ASSERT_NEAR(gf[i], feats[i], 1e-4) << np << " " << i;
    EXPECT_EQ(g.read_all<int64_t>("/train/sample_id"), split.sample_id) << np;
    auto gt = g.read_all<float>("/test/features");
    ASSERT_EQ(gt.size(), test_feats.size());
    for (size_t i = 0; i < gt.size(); ++i) ASSERT_NEAR(gt[i], test_feats[i], 1e-4) << np << " " << i;
  }
}

// features.flip_average: each image's features and probabilities are the mean of its own
// forward pass and its mirror's; auto follows the flip the model was trained with.
TEST(TrainPrograms, FlipAverageIsTheMeanOfTheImageAndItsMirror) {
  const std::string d = test::scratch_dir("train_tools_flip_average");
  // The same images, and their mirrors under the same sample ids (a second dataset).
  const test::TinySplit train = test::synthetic_images(96, 4, 1, 1000);
  const test::TinySplit held = test::synthetic_images(32, 4, 2, 900000);
  auto mirrored = [](test::TinySplit s) {
    const size_t hw = 8, c = 3;
    for (size_t row = 0; row < s.images.size() / (hw * c); ++row)
      for (size_t x = 0; x < hw / 2; ++x)
        for (size_t k = 0; k < c; ++k)
          std::swap(s.images[(row * hw + x) * c + k], s.images[(row * hw + hw - 1 - x) * c + k]);
    return s;
  };
  const test::TinySplit train_m = mirrored(train), held_m = mirrored(held);
  const std::vector<double> mean = {0.5, 0.5, 0.5}, sd = {0.25, 0.25, 0.25};
  test::write_dataset(d + "/dataset.h5", train, &held, 4, 8, 0, mean, sd);
  test::write_dataset(d + "/mirrored.h5", train_m, &held_m, 4, 8, 0, mean, sd);
  int rc = 0;
  std::string out = pretrain(d,
                             " --set pretrain.epochs=2 --set pretrain.checkpoint.every_steps=0"
                             " --set pretrain.global_batch=16 --set pretrain.augment=false",
                             &rc);
  ASSERT_EQ(rc, 0) << out;
  auto extract = [&](const std::string& dataset, const std::string& name, const std::string& set) {
    std::string o;
    const int code = test::run_command(
        cat(test::tool_path("extract_features"), " --set run.dir=", d, " --dataset ", dataset,
            " --output ", d, "/", name, " --set features.precision=fp32", set),
        &o);
    EXPECT_EQ(code, 0) << o;
    return h5::File::open(d + "/" + name);
  };
  // The model trained without the flip: auto does not mirror.
  h5::File plain = extract(d + "/dataset.h5", "plain.h5", "");
  EXPECT_EQ(plain.attr_int("/", "flip_average"), 0);
  h5::File mirror = extract(d + "/mirrored.h5", "mirror.h5", " --set features.flip_average=off");
  h5::File both = extract(d + "/dataset.h5", "both.h5", " --set features.flip_average=on");
  EXPECT_EQ(both.attr_int("/", "flip_average"), 1);
  for (const char* ds : {"/train/features", "/train/probs", "/test/probs"}) {
    const auto a = plain.read_all<float>(ds), m = mirror.read_all<float>(ds),
               b = both.read_all<float>(ds);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(m.size(), b.size());
    double moved = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      ASSERT_NEAR(b[i], 0.5f * (a[i] + m[i]), 1e-5) << ds << " " << i;
      moved = std::max(moved, double(std::fabs(b[i] - a[i])));
    }
    EXPECT_GT(moved, 1e-3) << ds;  // the mirror is another image to this model
  }
  // A model trained with the flip is mirrored under auto.
  out = pretrain(d,
                 " --set pretrain.epochs=1 --set pretrain.checkpoint.every_steps=0"
                 " --set pretrain.global_batch=16 --set pretrain.augment=true --overwrite",
                 &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(extract(d + "/dataset.h5", "auto.h5", "").attr_int("/", "flip_average"), 1);
  // Tables have no mirror: on is refused with one line naming the key.
  const std::string t = test::scratch_dir("train_tools_flip_average_table");
  ASSERT_TRUE(test::write_iris_dataset(test::shared_data("iris.csv"), t + "/dataset.h5"));
  rc = test::run_command(cat(test::tool_path("pretrain"), " --set run.dir=", t,
                             " --set pretrain.model.arch=mlp --set pretrain.epochs=1",
                             " --set pretrain.global_batch=16"),
                         &out);
  ASSERT_EQ(rc, 0) << out;
  rc = test::run_command(cat(test::tool_path("extract_features"), " --set run.dir=", t,
                             " --set features.flip_average=on"),
                         &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("features.flip_average"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(t + "/features.h5"));
}

TEST(TrainPrograms, MlpReachesNinetyFivePercentOnIris) {
  std::string d = test::scratch_dir("train_tools_iris");
  ASSERT_TRUE(test::write_iris_dataset(test::shared_data("iris.csv"), d + "/dataset.h5"));
  std::string out;
  int rc = test::run_command(
      cat(test::tool_path("pretrain"), " --set run.dir=", d,
          " --set pretrain.model.arch=mlp --set pretrain.model.hidden=[32] --set pretrain.epochs=60",
          " --set pretrain.global_batch=16 --set pretrain.optimizer.lr=0.05",
          " --set pretrain.optimizer.weight_decay=0 --set pretrain.checkpoint.every_epochs=0"),
      &out);
  ASSERT_EQ(rc, 0) << out;
  auto lines = read_json_lines(d + "/pretrain/metrics.jsonl");
  ASSERT_EQ(lines.size(), 60u);
  EXPECT_GE(lines.back()["train_acc"].get<double>(), 0.95) << out;
}

TEST(TrainPrograms, TrainScaledSweepAndKeepMaskArms) {
  std::string d = test::scratch_dir("train_tools_scaled");
  test::write_image_dataset(d + "/dataset.h5", 40, 16, 4);
  auto split = train::read_split(d + "/dataset.h5", "train");
  int64_t nk = 0, nr = 0;
  test::write_filter(d + "/filter.h5", split.sample_id, &nk, &nr);
  const std::string base =
      cat(test::tool_path("train_scaled"), " --set run.dir=", d,
          " --set scaled.model.arch=resnet18 --set scaled.model.width=0.125",
          " --set scaled.epochs=1 --set scaled.schedule.ref_batch=8",
          " --set scaled.sweep.arm=[full,filtered,random] --set scaled.sweep.global_batch=[8,16]");
  std::string out;
  ASSERT_EQ(test::run_command(base + " --sweep-size 2>/dev/null", &out), 0) << out;
  EXPECT_EQ(out, "6\n");
  ASSERT_EQ(test::run_command(base + " --list-sweep 2>/dev/null", &out), 0) << out;
  EXPECT_EQ(out,
            "index\tglobal_batch\tarm\n0\t8\tfull\n1\t8\tfiltered\n2\t8\trandom\n"
            "3\t16\tfull\n4\t16\tfiltered\n5\t16\trandom\n");
  EXPECT_EQ(test::run_command(base, &out), 2) << out;  // no index for a 6-run grid
  const int64_t expect[3] = {40, nk, nr};
  for (int i : {1, 2, 3}) {
    ASSERT_EQ(test::run_command(cat(base, " --sweep-index ", i), &out), 0) << out;
    std::ifstream in(cat(d, "/sweep/run-", i, "/result.json"));
    Json r = Json::parse(in);
    EXPECT_EQ(r["samples_used"], expect[i % 3]) << i;
    EXPECT_EQ(r["arm"], (i % 3 == 0 ? "full" : i % 3 == 1 ? "filtered" : "random"));
    EXPECT_EQ(r["global_batch"], i < 3 ? 8 : 16);
    EXPECT_NEAR(r["lr"].get<double>(), 0.1 * (i < 3 ? 8 : 16) / 8.0, 1e-12);
    EXPECT_TRUE(r.contains("best_test_acc"));
    EXPECT_TRUE(fs::exists(cat(d, "/sweep/run-", i, "/metrics.jsonl")));
    EXPECT_EQ(r["lars"], false);  // below scaled.optimizer.lars_from_batch (4096)
  }
  // A range of the grid in one process; LARS switched on by batch size.
  ASSERT_EQ(test::run_command(cat(base, " --sweep-index 4-5 --overwrite",
                                  " --set scaled.optimizer.lars_from_batch=16"),
                              &out),
            0)
      << out;
  for (int i : {4, 5}) {
    std::ifstream in(cat(d, "/sweep/run-", i, "/result.json"));
    Json r = Json::parse(in);
    EXPECT_EQ(r["sweep_index"], i);
    EXPECT_EQ(r["arm"], i == 4 ? "filtered" : "random");
    EXPECT_EQ(r["lars"], true) << i;  // batch 16 >= 16
  }
  // A batch larger than an arm's samples is refused for the whole grid, before any run
  // trains (it used to be clamped: 25 trained at 20 in the random arm, 25 in the others).
  const std::string big = cat(d, "/big");
  EXPECT_EQ(test::run_command(cat(base, " --set scaled.sweep.global_batch=[8,25] --sweep-index 0",
                                  " --sweep-dir ", big),
                              &out),
            2)
      << out;
  EXPECT_NE(out.find("scaled.global_batch"), std::string::npos) << out;
  EXPECT_NE(out.find("random arm's training samples (" + std::to_string(nr) + ")"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(big)) << "a refused sweep created its directory";
  for (const char* bad : {"5-2", "6", "0-6", "x", "-1"}) {
    EXPECT_EQ(test::run_command(cat(base, " --sweep-index ", bad, " --overwrite"), &out), 2)
        << bad << ": " << out;
    EXPECT_NE(out.find("--sweep-index"), std::string::npos) << out;
  }
}

// Mixed precision end to end: pretrain in bf16 (on the cpu backend: native, or emulated and
// saying so once) learns as fp32 does with the same seed, records its precision, writes fp32
// weights that load and run in fp32, and extract_features can embed with them in fp32.
TEST(TrainPrograms, Bf16PretrainLearnsAsFp32AndItsModelRunsInFp32) {
  const bool native = nn::backend_supports("cpu", nn::DType::bf16, true);
  std::string d = test::scratch_dir("train_tools_bf16");
  test::write_image_dataset(d + "/dataset.h5", 256, 64, 4);
  const std::string common =
      " --set pretrain.epochs=6 --set pretrain.checkpoint.every_steps=0"
      " --set pretrain.global_batch=32 --set pretrain.augment=false --set pretrain.holdout=0";
  double acc[2];
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    const std::string dir = cat(d, bf16 ? "/bf16" : "/fp32");
    fs::create_directories(dir);
    fs::copy_file(d + "/dataset.h5", dir + "/dataset.h5", fs::copy_options::overwrite_existing);
    int rc = 0;
    std::string out = pretrain(
        dir,
        common + (bf16 ? " --set pretrain.precision=bf16" : " --set pretrain.precision=fp32"),
        &rc);
    ASSERT_EQ(rc, 0) << out;
    if (bf16 && !native) {
      const size_t at = out.find("pretrain.precision: bf16 emulated");
      EXPECT_NE(at, std::string::npos) << out;
      EXPECT_EQ(out.find("pretrain.precision: bf16 emulated", at + 1), std::string::npos) << out;
    }
    acc[bf16] = read_json_lines(dir + "/pretrain/metrics.jsonl").back()["test_acc"].get<double>();
    h5::File m = h5::File::open(dir + "/pretrain/model.h5");
    EXPECT_EQ(m.attr_string("/", "precision"), bf16 ? "bf16" : "fp32");
  }
  EXPECT_GT(acc[0], 0.6);  // chance: 0.25
  EXPECT_NEAR(acc[1], acc[0], 0.1) << "bf16 vs fp32 test accuracy, same seed";

  // The bf16-trained weights are fp32 in the file: they load and run on the fp32 cpu backend,
  // and extract_features embeds with them in fp32.
  auto model = train::load_model(d + "/bf16/pretrain/model.h5");
  EXPECT_EQ(model->dtype(), nn::DType::f32);
  std::string out;
  int rc = test::run_command(cat(test::tool_path("extract_features"), " --set run.dir=", d,
                                 "/bf16 --set features.precision=fp32"),
                             &out);
  ASSERT_EQ(rc, 0) << out;
  h5::File f = h5::File::open(d + "/bf16/features.h5");
  EXPECT_EQ(f.attr_string("/", "precision"), "fp32");
  // auto on the ref backend (bf16 only emulated) stays fp32 and says so once.
  // (env -u: this checks auto's own choice, not the test seam that forces it.)
  rc = test::run_command(cat("env -u SIEVE_PRECISION_AUTO ", test::tool_path("extract_features"),
                             " --set run.dir=", d,
                             "/bf16 --set features.backend=ref --overwrite --output ", d,
                             "/bf16/features-ref.h5"),
                         &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("features.precision: auto -> fp32"), std::string::npos) << out;
}
