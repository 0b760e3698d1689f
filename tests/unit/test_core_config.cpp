#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/config.hpp"
#include "config/key_path.hpp"
#include "pipeline/schema.hpp"
#include "support/test_util.hpp"
#include "util/error.hpp"

using namespace sieve;

namespace {
ConfigSchema small_schema() {
  ConfigSchema s;
  s.add_int("train.batch", 128, "batch", 1);
  s.add_float("train.lr", 0.1, "lr", 0.0, 10.0);
  s.add_string("train.model", "resnet18", "model", {"resnet18", "mlp"});
  s.add_bool("train.nesterov", false, "nesterov");
  s.add_int_list("sweep.batches", {256, 512}, "batches", 1);
  s.add_tree("sweep.grid", "grid");
  return s;
}

std::string write_yaml(const std::string& name, const std::string& text) {
  std::string dir = test::scratch_dir("config_" + name);
  std::string path = dir + "/c.yaml";
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const ConfigSchema& s, const std::string& file, std::vector<std::string> ov) {
  try {
    Config::load(s, file, ov);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Config, DefaultsFileAndOverridesApplyInOrder) {
  auto s = small_schema();
  auto path = write_yaml("order", "train:\n  batch: 64\n  model: mlp\n");
  Config c =
      Config::load(s, path, {"train.batch=32", "train.nesterov=true", "sweep.batches=[16,32,64]"});
  EXPECT_EQ(c.get_int("train.batch"), 32);
  EXPECT_EQ(c.get_string("train.model"), "mlp");
  EXPECT_DOUBLE_EQ(c.get_float("train.lr"), 0.1);
  EXPECT_TRUE(c.get_bool("train.nesterov"));
  EXPECT_EQ(c.get_int_list("sweep.batches"), (std::vector<int64_t>{16, 32, 64}));
}

TEST(Config, UnknownKeyIsNamedWithItsFile) {
  auto s = small_schema();
  auto path = write_yaml("unknown", "train:\n  batchsize: 64\n");
  std::string err = error_of(s, path, {});
  EXPECT_NE(err.find("unknown key 'train.batchsize'"), std::string::npos) << err;
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(error_of(s, "", {"nope.x=1"}).find("unknown key 'nope.x'"), std::string::npos);
}

TEST(Config, WrongTypeAndRangeAreErrorsNamingTheKey) {
  auto s = small_schema();
  EXPECT_NE(error_of(s, "", {"train.batch=abc"}).find("'train.batch'"), std::string::npos);
  EXPECT_NE(error_of(s, "", {"train.batch=2.5"}).find("expected an integer"), std::string::npos);
  EXPECT_NE(error_of(s, "", {"train.batch=0"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of(s, "", {"train.lr=11"}).find("expected <= 10"), std::string::npos);
  EXPECT_NE(error_of(s, "", {"train.model=vgg"}).find("not one of"), std::string::npos);
  EXPECT_NE(error_of(s, "", {"train.nesterov=maybe"}).find("true or false"), std::string::npos);
  EXPECT_NE(error_of(s, "", {"sweep.batches=[1,-2]"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of(s, "", {"train.batch"}).find("expected key.path=value"), std::string::npos);
  EXPECT_NE(error_of(s, "/nonexistent.yaml", {}).find("cannot open"), std::string::npos);
  auto bad = write_yaml("badyaml", "train: [1, 2\n");
  EXPECT_NE(error_of(s, bad, {}).find("invalid YAML"), std::string::npos);
}

TEST(Config, ResolvedYamlRoundTrips) {
  auto s = small_schema();
  Config a = Config::load(s, "", {"train.batch=7", "sweep.grid.arm=[full,random]"});
  Config b = Config::from_yaml_text(s, a.to_yaml(), "roundtrip");
  EXPECT_EQ(a.to_yaml(), b.to_yaml());
  EXPECT_EQ(b.get_int("train.batch"), 7);
  EXPECT_EQ(b.get_tree("sweep.grid")["arm"].size(), 2u);
}

TEST(Config, PipelineSchemaHasEverySectionAndLoadsShippedConfigs) {
  const ConfigSchema& s = pipeline_schema();
  for (const char* key : {"run.dir", "data.source", "pretrain.model.arch", "embed.tsne.perplexity",
                          "filter.method", "scaled.sweep", "report.title", "slurm.ntasks"})
    EXPECT_NE(s.find(key), nullptr) << key;
  std::string src = std::getenv("SIEVE_SOURCE_DIR") ? std::getenv("SIEVE_SOURCE_DIR") : ".";
  int loaded = 0;
  for (auto& entry : std::filesystem::directory_iterator(src + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    EXPECT_NO_THROW(Config::load(s, entry.path().string(), {})) << entry.path();
    ++loaded;
  }
  // Sweep grids are layered over a base config.
  for (auto& entry : std::filesystem::directory_iterator(src + "/configs/sweeps")) {
    std::vector<std::string> files{src + "/configs/quickstart.yaml", entry.path().string()};
    EXPECT_NO_THROW(Config::load(s, files, {})) << entry.path();
    ++loaded;
  }
  EXPECT_GE(loaded, 6);
}

TEST(Config, LayeredFilesReplaceTreesWholeAndLaterKeysWin) {
  auto s = small_schema();
  auto base = write_yaml(
      "layer_base",
      "train:\n  batch: 64\n  lr: 0.2\nsweep:\n  grid:\n    arm: [full]\n    seed: [1, 2]\n");
  std::string dir = test::scratch_dir("layer_top");
  std::ofstream(dir + "/top.yaml")
      << "train:\n  batch: 16\nsweep:\n  grid:\n    global_batch: [8, 16]\n";
  Config c = Config::load(s, std::vector<std::string>{base, dir + "/top.yaml"}, {});
  EXPECT_EQ(c.get_int("train.batch"), 16);
  EXPECT_DOUBLE_EQ(c.get_float("train.lr"), 0.2);
  YAML::Node grid = c.get_tree("sweep.grid");
  EXPECT_FALSE(grid["arm"]) << "the later file's grid replaces the earlier one";
  EXPECT_EQ(grid["global_batch"].size(), 2u);
}

TEST(ConfigKeyPath, SplitsPutsAndFinds) {
  EXPECT_EQ(split_key_path("a.bb.c"), (std::vector<std::string>{"a", "bb", "c"}));
  EXPECT_EQ(split_key_path("single"), (std::vector<std::string>{"single"}));
  YAML::Node root(YAML::NodeType::Map);
  put_at_key_path(root, "train.optimizer.lr", YAML::Node(0.1));
  put_at_key_path(root, "train.optimizer.momentum", YAML::Node(0.9));
  put_at_key_path(root, "train.epochs", YAML::Node(3));
  EXPECT_DOUBLE_EQ(root["train"]["optimizer"]["lr"].as<double>(), 0.1);
  EXPECT_DOUBLE_EQ(find_at_key_path(root, "train.optimizer.momentum").as<double>(), 0.9);
  EXPECT_EQ(find_at_key_path(root, "train.epochs").as<int>(), 3);
  EXPECT_TRUE(find_at_key_path(root, "train.optimizer").IsMap());
  EXPECT_FALSE(find_at_key_path(root, "train.missing"));
  EXPECT_FALSE(find_at_key_path(root, "train.epochs.deeper"));  // 3 is not a mapping
  // Looking up does not create the missing keys.
  EXPECT_FALSE(root["train"]["missing"]);
  EXPECT_EQ(root["train"].size(), 2u);
}

// Issue 15: what used to crash, loop or pass silently in config loading.
TEST(Config, DirectoryDuplicateKeysAndSecondDocumentAreErrorsNamingTheFile) {
  auto s = small_schema();
  std::string dir = test::scratch_dir("config_dir_as_file");
  std::string m = error_of(s, dir, {});  // was an uncaught std::ios_base::failure (exit 134)
  EXPECT_NE(m.find(dir + ": is a directory"), std::string::npos) << m;

  auto dup = write_yaml("dup", "train:\n  batch: 64\n  batch: 32\n");
  m = error_of(s, dup, {});
  EXPECT_NE(m.find(dup), std::string::npos) << m;
  EXPECT_NE(m.find("'train.batch' appears twice"), std::string::npos) << m;
  auto dup_section = write_yaml("dup_section", "train:\n  batch: 64\ntrain:\n  lr: 0.5\n");
  m = error_of(s, dup_section, {});
  EXPECT_NE(m.find("'train' appears twice"), std::string::npos) << m;

  auto two = write_yaml("two_docs", "train:\n  batch: 64\n---\ntrain:\n  batch: 32\n");
  m = error_of(s, two, {});
  EXPECT_NE(m.find(two), std::string::npos) << m;
  EXPECT_NE(m.find("2 YAML documents"), std::string::npos) << m;
  // A leading "---" alone is still one document.
  auto one = write_yaml("one_doc", "---\ntrain:\n  batch: 64\n");
  EXPECT_EQ(Config::load(s, one, {}).get_int("train.batch"), 64);
}

TEST(Config, ScalarForAListKeyIsAOneElementList) {
  auto s = small_schema();
  Config c = Config::load(s, "", {"sweep.batches=16"});
  EXPECT_EQ(c.get_int_list("sweep.batches"), std::vector<int64_t>{16});
  // The pipeline's sweep grid: one value for an axis (was "expected an integer, got &1 [*1]").
  Config p = Config::load(pipeline_schema(), "", {"scaled.sweep.global_batch=16"});
  YAML::Node grid = p.get_tree("scaled.sweep");
  EXPECT_EQ(grid["global_batch"].as<int64_t>(), 16);
  // validate_value leaves its input alone.
  YAML::Node in = YAML::Load("16");
  YAML::Node out = validate_value(*s.find("sweep.batches"), in, "test");
  EXPECT_TRUE(in.IsScalar());
  ASSERT_TRUE(out.IsSequence());
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].as<int64_t>(), 16);
}

TEST(Config, FloatsPrintInTheShortestRoundTripForm) {
  EXPECT_EQ(format_float(0.05), "0.05");
  EXPECT_EQ(format_float(0.1), "0.1");
  EXPECT_EQ(format_float(2.0), "2.0");
  EXPECT_EQ(format_float(1e-5), "1e-05");
  auto s = small_schema();
  Config c = Config::load(s, "", {"train.lr=0.05"});
  std::string y = c.to_yaml();
  EXPECT_NE(y.find("lr: 0.05\n"), std::string::npos) << y;
  EXPECT_EQ(y.find("0.0500000"), std::string::npos) << y;
  EXPECT_DOUBLE_EQ(c.get_float("train.lr"), 0.05);
  EXPECT_NE(s.describe().find("train.lr = 0.1 "), std::string::npos) << s.describe();
  // Round trip: the printed text reads back as the same double.
  Config back = Config::from_yaml_text(s, y, "test");
  EXPECT_EQ(back.get_float("train.lr"), c.get_float("train.lr"));
  EXPECT_EQ(back.to_yaml(), y);
  // The whole pipeline config has no long float tails.
  std::string all = Config::load(pipeline_schema(), "", {}).to_yaml();
  EXPECT_EQ(all.find("00000000"), std::string::npos) << all;
}
