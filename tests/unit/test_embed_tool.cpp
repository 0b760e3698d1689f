// The built reduce_dims on small files: a good file gives a complete embedding file with
// its attributes; each kind of bad input gives exit 1, one clear line, and no output.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/h5.hpp"
#include "support/test_util.hpp"

using namespace sieve;
namespace fs = std::filesystem;

namespace {

struct Spec {
  int64_t n = 240, F = 12;
  std::string schema = "sieve.features/1";
  bool labels = true;
  int64_t label_rows = -1, id_rows = -1;  // -1: n
  int64_t nan_row = -1;
  bool features_as_double = false;
};

// Three Gaussian clusters in F dimensions; labels = cluster.
std::string write_features(const std::string& dir, const std::string& name, const Spec& s) {
  std::string path = dir + "/" + name + ".h5";
  std::mt19937_64 rng(1);
  std::normal_distribution<float> g;
  std::vector<float> x(size_t(s.n * s.F));
  std::vector<int32_t> lab(size_t(s.label_rows < 0 ? s.n : s.label_rows));
  std::vector<int64_t> ids(size_t(s.id_rows < 0 ? s.n : s.id_rows));
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t j = 0; j < s.F; ++j) x[i * s.F + j] = g(rng) + (j == i % 3 ? 25.f : 0.f);
  for (size_t i = 0; i < lab.size(); ++i) lab[i] = int32_t(i % 3);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(1000 + i);
  if (s.nan_row >= 0) x[s.nan_row * s.F + 1] = std::nanf("");
  h5::File f = h5::File::create(path);
  f.create_group("/train");
  if (s.features_as_double) {
    std::vector<double> xd(x.begin(), x.end());
    f.write_small<double>("/train/features", {hsize_t(s.n), hsize_t(s.F)}, xd);
  } else {
    f.write_small<float>("/train/features", {hsize_t(s.n), hsize_t(s.F)}, x);
  }
  if (s.labels) f.write_small<int32_t>("/train/labels", {hsize_t(lab.size())}, lab);
  f.write_small<int64_t>("/train/sample_id", {hsize_t(ids.size())}, ids);
  h5::stamp(f, s.schema, "");
  f.close();
  return path;
}

const char* kFast =
    " --set embed.tsne.perplexity=10 --set embed.tsne.iterations=200"
    " --set embed.tsne.exaggeration_iterations=60 --set embed.pca.components=8";

int run(const std::string& in, const std::string& out, const std::string& extra, std::string* log) {
  return test::run_command(
      test::tool_path("reduce_dims") + " --input " + in + " --output " + out + kFast + " " + extra,
      log);
}

}  // namespace

TEST(EmbedTool, WritesACompleteEmbeddingFile) {
  std::string dir = test::scratch_dir("embed_tool_ok");
  std::string in = write_features(dir, "features", Spec{});
  std::string out = dir + "/embedding.h5", log;
  ASSERT_EQ(run(in, out, "", &log), 0) << log;
  h5::File f = h5::File::open(out);
  h5::require_schema(f, "sieve.embedding/1");
  EXPECT_EQ(f.require<float>("/embedding", 2), (std::vector<hsize_t>{240, 2}));
  EXPECT_EQ(f.require<float>("/pca", 2), (std::vector<hsize_t>{240, 8}));
  EXPECT_EQ(f.read_all<int64_t>("/sample_id")[5], 1005);
  EXPECT_EQ(f.read_all<int32_t>("/labels")[4], 1);
  EXPECT_EQ(f.attr_string("/", "method"), "tsne");
  EXPECT_NE(f.attr_string("/", "parameters").find("perplexity=10"), std::string::npos);
  EXPECT_GT(f.attr_double("/", "kl_divergence"), 0.0);
  EXPECT_GT(f.attr_double("/", "knn_preservation"), 0.3);
  EXPECT_GT(f.attr_double("/", "trustworthiness"), 0.9);
  EXPECT_EQ(f.attr_int("/", "trustworthiness_points"), 240);
  auto ev = f.attr_doubles("/", "pca_explained_variance");
  ASSERT_EQ(ev.size(), 8u);
  EXPECT_GE(ev[0], ev[1]);
  EXPECT_TRUE(fs::exists(dir + "/embedding.config.yaml"));
  // An existing output without --overwrite is refused before any work.
  EXPECT_EQ(run(in, out, "", &log), 2) << log;
  EXPECT_NE(log.find("exists"), std::string::npos) << log;
  // Per-class embedding and the PCA-only method also run.
  EXPECT_EQ(run(in, dir + "/pc.h5", "--set embed.tsne.per_class=true", &log), 0) << log;
  EXPECT_EQ(run(in, dir + "/pca.h5", "--set embed.method=pca", &log), 0) << log;
}

// embed.tsne.locality_order=on embeds the points in k-means cell order; the file must still
// give every input row its own position. The clusters are interleaved in the input (row i in
// cluster i % 3) and grouped by the order, so a position written to the wrong row would put
// it among another cluster's points: each row's nearest embedded neighbour must share its
// cluster, in either order.
TEST(EmbedTool, LocalityOrderKeepsEachPointsPositionInItsRow) {
  std::string dir = test::scratch_dir("embed_tool_locality");
  std::string in = write_features(dir, "features", Spec{});
  for (const char* mode : {"on", "off"}) {
    std::string out = dir + "/" + mode + ".h5", log;
    ASSERT_EQ(run(in, out, std::string("--set embed.tsne.locality_order=") + mode, &log), 0) << log;
    h5::File f = h5::File::open(out);
    EXPECT_NE(f.attr_string("/", "parameters").find(std::string("locality_order=") + mode),
              std::string::npos);
    const std::vector<float> y = f.read_all<float>("/embedding");
    const std::vector<int32_t> lab = f.read_all<int32_t>("/labels");
    ASSERT_EQ(y.size(), 480u);
    int agree = 0;
    for (size_t i = 0; i < 240; ++i) {
      size_t best = i;
      double bd = 1e300;
      for (size_t j = 0; j < 240; ++j) {
        const double dx = y[2 * i] - y[2 * j], dy = y[2 * i + 1] - y[2 * j + 1];
        if (j != i && dx * dx + dy * dy < bd) bd = dx * dx + dy * dy, best = j;
      }
      agree += lab[best] == lab[i];
      ASSERT_EQ(lab[i], int32_t(i % 3));
    }
    EXPECT_GE(agree, 235) << mode;
    EXPECT_GT(f.attr_double("/", "knn_preservation"), 0.3) << mode;
  }
}

// Per-class t-SNE with at least as many classes as ranks embeds each class whole on one
// rank: the embedding is then the same for any rank count (and the same as one rank's).
TEST(EmbedTool, PerClassEmbeddingIsTheSameOn1To3Ranks) {
  std::string dir = test::scratch_dir("embed_tool_ranks");
  std::string in = write_features(dir, "features", Spec{});
  std::vector<float> first;
  for (int np : {1, 2, 3}) {
    std::string out = dir + "/np" + std::to_string(np) + ".h5", log;
    int rc =
        test::run_command(test::mpirun_prefix(np) + test::tool_path("reduce_dims") + " --input " +
                              in + " --output " + out + kFast + " --set embed.tsne.per_class=true",
                          &log);
    ASSERT_EQ(rc, 0) << np << " ranks: " << log;
    h5::File f = h5::File::open(out);
    std::vector<float> y = f.read_all<float>("/embedding");
    ASSERT_EQ(y.size(), 240u * 2);
    EXPECT_GT(f.attr_double("/", "knn_preservation"), 0.3) << np << " ranks";
    if (np == 1) {
      first = y;
      continue;
    }
    EXPECT_EQ(y, first) << np << " ranks differ from 1 rank";
    if (np == 3) {  // classes 1 and 2 ran on ranks other than 0: their summaries are printed
      EXPECT_NE(log.find("on rank 2"), std::string::npos) << log;
    }
  }
}

TEST(EmbedTool, BadInputsGiveOneLineErrorsAndNoOutput) {
  std::string dir = test::scratch_dir("embed_tool_bad");
  struct Case {
    std::string name;
    Spec spec;
    std::string extra, expect;
  };
  std::vector<Case> cases;
  {
    Spec s;
    s.schema = "sieve.dataset/1";
    cases.push_back({"schema", s, "", "expected 'sieve.features/1'"});
  }
  {
    Spec s;
    s.labels = false;
    cases.push_back({"nolabels", s, "", "/train/labels"});
  }
  {
    Spec s;
    s.features_as_double = true;
    cases.push_back({"double", s, "", "/train/features: expected float32"});
  }
  {
    Spec s;
    s.label_rows = 239;
    cases.push_back({"labelrows", s, "", "/train/labels has 239 rows"});
  }
  {
    Spec s;
    s.id_rows = 100;
    cases.push_back({"idrows", s, "", "/train/sample_id has 100 rows"});
  }
  {
    Spec s;
    s.nan_row = 17;
    cases.push_back({"nan", s, "", "row 17 (sample_id 1017) contains NaN or Inf"});
  }
  {
    Spec s;
    s.n = 60;
    cases.push_back({"perplexity", s, "--set embed.tsne.perplexity=25", "N-1 >= 3 x perplexity"});
  }
  {
    Spec s;  // 80 points per class: too few for perplexity 30 per class
    cases.push_back({"perclass", s,
                     "--set embed.tsne.perplexity=30 --set embed.tsne.per_class=true",
                     "class 0 has 80"});
  }
  for (const auto& c : cases) {
    std::string in = write_features(dir, c.name, c.spec);
    std::string out = dir + "/" + c.name + ".out.h5", log;
    EXPECT_EQ(run(in, out, c.extra, &log), 1) << c.name << ": " << log;
    EXPECT_NE(log.find(c.expect), std::string::npos) << c.name << ": " << log;
    EXPECT_NE(log.find(in), std::string::npos) << c.name << ": names the file: " << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << c.name << ": " << log;
    EXPECT_FALSE(fs::exists(out)) << c.name;
  }
  std::string log;
  EXPECT_EQ(run(dir + "/missing.h5", dir + "/m.out.h5", "", &log), 1) << log;
  EXPECT_NE(log.find("no such file"), std::string::npos) << log;
}
