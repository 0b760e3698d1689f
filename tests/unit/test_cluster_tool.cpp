// The cluster_filter program end to end: synthetic blobs with injected background noise
// (ground truth in a dataset file), every method, other input datasets, and bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "cluster/dbscan.hpp"
#include "io/h5.hpp"
#include "io/schemas.hpp"
#include "support/test_util.hpp"

using namespace sieve;
namespace fs = std::filesystem;

namespace {

struct Synthetic {
  std::vector<float> x;  // [n, 2]
  std::vector<int32_t> labels;
  std::vector<int64_t> ids;
  std::vector<uint8_t> noise;  // injected background points
};

// Per class: three Gaussian blobs + 5 % uniform background over a wide box.
Synthetic make_synthetic(int classes, int per_class, uint64_t seed) {
  Synthetic s;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> N(0, 0.3f);
  std::uniform_real_distribution<float> U(-20, 20);
  for (int c = 0; c < classes; ++c)
    for (int i = 0; i < per_class; ++i) {
      bool bg = i % 20 == 0;
      int b = i % 3;
      s.x.push_back(bg ? U(rng) : float(4 * b - 4 + 3 * c) + N(rng));
      s.x.push_back(bg ? U(rng) : float(3 * (b % 2) - c) + N(rng));
      s.labels.push_back(c);
      s.noise.push_back(bg);
    }
  // Ids: a scrambled, non-contiguous set, so the join on sample_id matters.
  for (size_t i = 0; i < s.labels.size(); ++i) s.ids.push_back(int64_t(i * 7919 % 100003) + 17);
  return s;
}

template <typename T>
void put(h5::File& f, const std::string& name, const std::vector<T>& v, std::vector<hsize_t> dims) {
  f.create_dataset<T>(name, dims);
  f.write_rows<T>(name, 0, dims[0], v.data());
}

void write_embedding(const std::string& path, const std::vector<float>& x, int d,
                     const std::vector<int32_t>& labels, const std::vector<int64_t>& ids,
                     const std::string& schema = schema::kEmbedding,
                     const std::string& name = "/embedding") {
  h5::File f = h5::File::create(path);
  std::string group = name.substr(0, name.find_last_of('/'));
  if (!group.empty()) f.create_group(group);
  put(f, name, x, {hsize_t(x.size() / d), hsize_t(d)});
  if (!labels.empty()) put(f, group + "/labels", labels, {labels.size()});
  put(f, group + "/sample_id", ids, {ids.size()});
  h5::stamp(f, schema, "");
}

// A pretrain dynamics file: margins [epochs, ids.size()], the ids, and the labels and held-out
// marks where given.
void write_dynamics(const std::string& path, const std::vector<float>& margin, int epochs,
                    const std::vector<int64_t>& ids, const std::vector<int32_t>& labels,
                    const std::vector<uint8_t>* heldout = nullptr) {
  h5::File f = h5::File::create(path);
  put(f, "/margin", margin, {hsize_t(epochs), hsize_t(ids.size())});
  put(f, "/sample_id", ids, {ids.size()});
  if (!labels.empty()) put(f, "/labels", labels, {labels.size()});
  if (heldout) put(f, "/heldout", *heldout, {heldout->size()});
  h5::stamp(f, schema::kDynamics, "");
}

// The ground truth lives in the dataset file, in a different row order than the embedding.
void write_truth(const std::string& path, const Synthetic& s) {
  std::vector<int64_t> ids(s.ids.rbegin(), s.ids.rend());
  std::vector<uint8_t> noise(s.noise.rbegin(), s.noise.rend());
  h5::File f = h5::File::create(path);
  f.create_group("/train");
  put(f, "/train/sample_id", ids, {ids.size()});
  put(f, "/train/noise_truth", noise, {noise.size()});
  h5::stamp(f, schema::kDataset, "");
}

// The reference method on an embedding; the default (consensus) needs a features file. Tests that
// pin a fixed eps say filter.dbscan.auto_eps=false (auto is the default).
const std::string kDbscan = " --set filter.method=dbscan";

// ranks > 0: under mpirun with that many ranks.
int run(const std::string& args, std::string* out = nullptr, int ranks = 0) {
  std::string o;
  int rc = test::run_command((ranks > 0 ? test::mpirun_prefix(ranks) : std::string()) +
                                 test::tool_path("cluster_filter") + " " + args,
                             &o);
  if (out) *out = o;
  return rc;
}

// The compare inputs in `dir`: feat.h5 (features and class probabilities, rows reversed),
// emb.h5 (the 2-D embedding) and data.h5 (the truth), all joined on sample id.
// Features: class directions in 6-D; the background rows sit in another class's direction
// (as a mislabelled image would), and the probabilities say so too. nan_row >= 0 puts a
// NaN into that row of the features file. `elsewhere` (where given) marks the rows the model
// takes for the next class in place of the noisy ones: with clean rows, its own mistakes; without
// a noisy row, one it fitted under its wrong label.
void write_compare_inputs(const std::string& dir, const Synthetic& s, int64_t nan_row = -1,
                          const std::vector<uint8_t>* elsewhere_rows = nullptr) {
  const int F = 6, C = 3;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> N(0, 0.1f);
  std::vector<float> feats, probs;
  for (size_t i = 0; i < s.labels.size(); ++i) {
    const bool elsewhere = elsewhere_rows ? (*elsewhere_rows)[i] != 0 : s.noise[i] != 0;
    const int looks_like = elsewhere ? (s.labels[i] + 1) % C : s.labels[i];
    for (int j = 0; j < F; ++j) feats.push_back((j == looks_like ? 1.0f : 0.0f) + N(rng));
    for (int j = 0; j < C; ++j) probs.push_back(j == looks_like ? 0.8f : 0.1f);
  }
  std::vector<int64_t> rev_ids(s.ids.rbegin(), s.ids.rend());
  std::vector<int32_t> rev_labels(s.labels.rbegin(), s.labels.rend());
  auto reverse_rows = [](const std::vector<float>& v, int w) {
    std::vector<float> out;
    for (size_t r = v.size() / w; r-- > 0;)
      out.insert(out.end(), v.begin() + r * w, v.begin() + (r + 1) * w);
    return out;
  };
  std::vector<float> file_feats = reverse_rows(feats, F);
  if (nan_row >= 0) file_feats[size_t(nan_row * F + 2)] = std::nanf("");
  write_embedding(dir + "/feat.h5", file_feats, F, rev_labels, rev_ids, schema::kFeatures,
                  "/train/features");
  {
    h5::File f = h5::File::open_rw(dir + "/feat.h5");
    put(f, "/train/probs", reverse_rows(probs, C), {hsize_t(s.labels.size()), hsize_t(C)});
  }
  write_embedding(dir + "/emb.h5", s.x, 2, s.labels, s.ids);
  write_truth(dir + "/data.h5", s);
}

// The arguments naming what write_compare_inputs wrote into dir: the embedding, the features
// with their probabilities, and the dataset as the truth.
std::string compare_inputs(const std::string& dir) {
  return "--input " + dir + "/emb.h5 --features " + dir + "/feat.h5 --truth " + dir + "/data.h5";
}

// A test split in the features file at `path`: per_class samples of each class, labelled with
// it (clean), the model's prediction for sample j of class c given by predicted(c, j).
void write_test_predictions(const std::string& path, int classes, int per_class,
                            const std::function<int(int, int)>& predicted) {
  std::vector<int32_t> test_labels;
  std::vector<float> test_probs;
  for (int c = 0; c < classes; ++c)
    for (int j = 0; j < per_class; ++j) {
      const int p = predicted(c, j);
      test_labels.push_back(c);
      for (int k = 0; k < classes; ++k) test_probs.push_back(k == p ? 0.8f : 0.1f);
    }
  h5::File f = h5::File::open_rw(path);
  if (!f.exists("/test")) f.create_group("/test");
  put(f, "/test/labels", test_labels, {test_labels.size()});
  put(f, "/test/probs", test_probs, {test_labels.size(), hsize_t(classes)});
}

}  // namespace

TEST(ClusterFilterTool, DbscanOnBlobsWithInjectedNoise) {
  std::string dir = test::scratch_dir("cluster_tool_dbscan");
  Synthetic s = make_synthetic(3, 900, 5);
  write_embedding(dir + "/emb.h5", s.x, 2, s.labels, s.ids);
  write_truth(dir + "/data.h5", s);
  std::string log;
  ASSERT_EQ(
      run("--input " + dir + "/emb.h5 --truth " + dir + "/data.h5 --output " + dir +
              "/filter.h5 --set filter.dbscan.auto_eps=false --set filter.dbscan.eps=0.3 --set filter.dbscan.min_samples=5" + kDbscan,
          &log),
      0)
      << log;
  EXPECT_NE(log.find("removed %"), std::string::npos) << log;  // the table is printed
  h5::File f = h5::File::open(dir + "/filter.h5");
  h5::require_schema(f, schema::kFilter);
  auto cluster = f.read_all<int32_t>("/cluster");
  auto keep = f.read_all<uint8_t>("/keep");
  auto rkeep = f.read_all<uint8_t>("/random_keep");
  ASSERT_EQ(cluster.size(), s.labels.size());
  EXPECT_EQ(f.read_all<int64_t>("/sample_id"), s.ids);
  EXPECT_EQ(f.read_all<int32_t>("/labels"), s.labels);
  EXPECT_EQ(f.attr_string("/", "method"), "dbscan");
  EXPECT_DOUBLE_EQ(f.attr_double("/", "eps"), 0.3);
  EXPECT_EQ(f.attr_int("/", "min_samples"), 5);
  // Precision/recall recomputed here from the masks (rows align with s.noise).
  int64_t flagged = 0, hits = 0, truth = 0;
  for (size_t i = 0; i < keep.size(); ++i) {
    EXPECT_EQ(keep[i], cluster[i] >= 0);
    flagged += !keep[i];
    truth += s.noise[i];
    hits += !keep[i] && s.noise[i];
  }
  double precision = double(hits) / flagged, recall = double(hits) / truth;
  EXPECT_NEAR(f.attr_double("/", "noise_precision"), precision, 1e-12);
  EXPECT_NEAR(f.attr_double("/", "noise_recall"), recall, 1e-12);
  EXPECT_GT(precision, 0.9);
  EXPECT_GT(recall, 0.9);
  // Keep-mask equals per-class DBSCAN from the library.
  for (int c = 0; c < 3; ++c) {
    std::vector<float> xc;
    std::vector<size_t> rows;
    for (size_t i = 0; i < s.labels.size(); ++i)
      if (s.labels[i] == c) {
        rows.push_back(i);
        xc.insert(xc.end(), s.x.begin() + 2 * i, s.x.begin() + 2 * i + 2);
      }
    auto r = cluster::dbscan(xc.data(), int64_t(rows.size()), 2, {0.3, 5});
    for (size_t k = 0; k < rows.size(); ++k) EXPECT_EQ(keep[rows[k]], r.label[k] >= 0);
  }
  // Table I and the random control: the same number removed per class.
  auto cls = f.read_all<int32_t>("/per_class/class");
  auto samples = f.read_all<int64_t>("/per_class/samples");
  auto noise = f.read_all<int64_t>("/per_class/noise");
  auto clusters = f.read_all<int64_t>("/per_class/clusters");
  auto pct = f.read_all<double>("/per_class/removed_pct");
  ASSERT_EQ(cls, (std::vector<int32_t>{0, 1, 2}));
  std::map<int, int64_t> removed, rremoved;
  for (size_t i = 0; i < keep.size(); ++i) {
    removed[s.labels[i]] += !keep[i];
    rremoved[s.labels[i]] += !rkeep[i];
  }
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(samples[c], 900);
    EXPECT_EQ(noise[c], removed[c]);
    EXPECT_EQ(rremoved[c], removed[c]);
    EXPECT_EQ(clusters[c], 3);
    EXPECT_NEAR(pct[c], 100.0 * removed[c] / 900, 1e-9);
  }
  EXPECT_NE(rkeep, keep);
  EXPECT_TRUE(fs::exists(dir + "/filter.config.yaml"));
  // Existing output without --overwrite is refused; with it, the same result again.
  EXPECT_EQ(run("--input " + dir + "/emb.h5 --output " + dir + "/filter.h5" + kDbscan, &log), 2)
      << log;
  EXPECT_NE(log.find("exists"), std::string::npos) << log;
  ASSERT_EQ(
      run("--input " + dir + "/emb.h5 --truth " + dir + "/data.h5 --output " + dir +
          "/filter.h5 --overwrite --set filter.dbscan.auto_eps=false --set filter.dbscan.eps=0.3 --set filter.dbscan.min_samples=5" +
          kDbscan),
      0);
  EXPECT_EQ(h5::File::open(dir + "/filter.h5").read_all<uint8_t>("/random_keep"), rkeep);
}

TEST(ClusterFilterTool, AutoEpsGmmKmeansAndFeatureInput) {
  std::string dir = test::scratch_dir("cluster_tool_methods");
  Synthetic s = make_synthetic(2, 900, 9);
  write_embedding(dir + "/emb.h5", s.x, 2, s.labels, s.ids);
  write_truth(dir + "/data.h5", s);
  std::string base = "--input " + dir + "/emb.h5 --truth " + dir + "/data.h5 ";
  std::string log;
  ASSERT_EQ(run(base + "--output " + dir +
                    "/auto.h5 --set filter.dbscan.auto_eps=true "
                    "--set filter.dbscan.min_samples=5" +
                    kDbscan,
                &log),
            0)
      << log;
  {
    h5::File f = h5::File::open(dir + "/auto.h5");
    double eps = f.attr_double("/", "eps");
    EXPECT_GT(eps, 0.05);
    EXPECT_LT(eps, 2.0);
    EXPECT_EQ(f.attr_int("/", "eps_auto"), 1);
    EXPECT_GT(f.attr_double("/", "noise_recall"), 0.8);
    EXPECT_GT(f.attr_double("/", "noise_precision"), 0.7);
    EXPECT_NE(log.find("auto eps"), std::string::npos);
  }
  for (std::string m : {"gmm", "kmeans"}) {
    ASSERT_EQ(run(base + "--output " + dir + "/" + m + ".h5 --set filter.method=" + m +
                      " --set filter.gmm.components=3 --set filter.kmeans.k=3",
                  &log),
              0)
        << log;
    h5::File f = h5::File::open(dir + "/" + m + ".h5");
    EXPECT_EQ(f.attr_string("/", "method"), m);
    auto keep = f.read_all<uint8_t>("/keep");
    int64_t removed = 0;
    for (auto k : keep) removed += !k;
    EXPECT_NEAR(double(removed) / keep.size(), 0.05, 0.01) << m;  // filter.outlier_quantile
    // Background points are the least likely / farthest: most flags hit them.
    EXPECT_GT(f.attr_double("/", "noise_precision"), 0.8) << m;
    if (m == "gmm") {
      EXPECT_TRUE(std::isfinite(f.attr_double("/", "log_likelihood")));
    }
  }
  // A features file: 5-D float dataset named by flag.
  std::vector<float> x5;
  for (size_t i = 0; i < s.labels.size(); ++i)
    for (int k = 0; k < 5; ++k) x5.push_back(s.x[2 * i + k % 2] * (k < 2 ? 1.0f : 0.5f));
  write_embedding(dir + "/feat.h5", x5, 5, s.labels, s.ids, schema::kFeatures, "/train/features");
  ASSERT_EQ(run("--input " + dir + "/feat.h5 --input-dataset /train/features --output " + dir +
                    "/feat_filter.h5 --set filter.dbscan.auto_eps=false --set filter.dbscan.eps=0.5" + kDbscan,
                &log),
            0)
      << log;
  EXPECT_EQ(h5::File::open(dir + "/feat_filter.h5").attr_string("/", "input_dataset"),
            "/train/features");
}

// The default detector (knn vote on the penultimate features) with every detector compared
// against the truth: features and class probabilities in a features file, the 2-D embedding
// for DBSCAN, all three joined on sample id in different row orders.
TEST(ClusterFilterTool, DefaultConsensusComparesEveryDetectorAgainstTheTruth) {
  std::string dir = test::scratch_dir("cluster_tool_compare");
  Synthetic s = make_synthetic(3, 300, 4);  // the 2-D embedding (5 % background)
  write_compare_inputs(dir, s);
  std::string log;
  ASSERT_EQ(run(compare_inputs(dir) + " --output " + dir +
                    "/filter.h5 --set filter.dbscan.auto_eps=false --set filter.dbscan.eps=0.3",
                &log),
            0)
      << log;
  h5::File f = h5::File::open(dir + "/filter.h5");
  EXPECT_EQ(f.attr_string("/", "method"), "consensus");  // the default
  auto keep = f.read_all<uint8_t>("/keep");
  int64_t hits = 0, flagged = 0, truth = 0;
  for (size_t i = 0; i < keep.size(); ++i) {
    flagged += !keep[i];
    truth += s.noise[i];
    hits += !keep[i] && s.noise[i];
  }
  EXPECT_EQ(hits, truth);  // every background row is flagged, nothing else
  EXPECT_EQ(flagged, truth);
  EXPECT_DOUBLE_EQ(f.attr_double("/", "noise_f1"), 1.0);
  for (std::string m : {"knn", "confident", "posterior", "knn_posterior", "dbscan", "consensus"}) {
    const std::string g = "/detectors/" + m;
    ASSERT_TRUE(f.exists(g + "/score")) << m;
    auto flag = f.read_all<uint8_t>(g + "/flag");
    ASSERT_EQ(flag.size(), keep.size()) << m;
    int64_t h = 0, n = 0;
    for (size_t i = 0; i < flag.size(); ++i) {
      n += flag[i];
      h += flag[i] && s.noise[i];
    }
    EXPECT_EQ(f.attr_int(g, "flagged"), n) << m;
    EXPECT_EQ(f.attr_int(g, "hits"), h) << m;
    // Its own time, also in the log line that scores it (a few ms here, never negative).
    const double sec = f.attr_double(g, "seconds");
    EXPECT_GE(sec, 0.0) << m;
    EXPECT_LT(sec, 60.0) << m;
    EXPECT_NE(log.find("detector " + m + " vs ground truth"), std::string::npos) << m;
    EXPECT_NEAR(f.attr_double(g, "precision"), n ? double(h) / n : 0.0, 1e-12) << m;
    EXPECT_NEAR(f.attr_double(g, "recall"), double(h) / truth, 1e-12) << m;
    auto pr = f.read_all<float>(g + "/pr");
    EXPECT_GE(pr.size(), 3u) << m;
    EXPECT_FLOAT_EQ(pr[pr.size() - 1], 1.0f) << m;  // the last point reaches recall 1
  }
  if (::testing::Test::HasFailure()) std::cerr << log;
  EXPECT_GT(f.attr_double("/detectors/confident", "f1"), 0.99);
  EXPECT_GT(f.attr_double("/detectors/dbscan", "recall"), 0.9);
  EXPECT_NE(log.find("detector dbscan vs ground truth"), std::string::npos) << log;
  // The default without a features file names the file it looked for.
  EXPECT_EQ(run("--input " + dir + "/emb.h5 --output " + dir + "/nofeat.h5", &log), 2) << log;
  EXPECT_NE(log.find("--features"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir + "/nofeat.h5"));
  // The posteriors chosen with nothing compared beside them still read what they need (the
  // probabilities; knn_posterior also the features) and find the background rows.
  for (std::string m : {"posterior", "knn_posterior"}) {
    const std::string out = dir + "/alone_" + m + ".h5";
    ASSERT_EQ(run(compare_inputs(dir) + " --output " + out +
                      " --set filter.compare=false --set filter.method=" + m,
                  &log),
              0)
        << log;
    h5::File g = h5::File::open(out);
    EXPECT_EQ(g.attr_string("/", "method"), m);
    EXPECT_FALSE(g.exists("/detectors/dbscan")) << m;  // nothing else compared
    EXPECT_GT(g.attr_double("/", "noise_f1"), 0.9) << m;
  }
}

// consensus: the rank average of knn_posterior, posterior and (where recorded) dynamics,
// flagging as many as the confident joint estimates wrong, the highest-ranked over all
// classes; the estimate is stored beside the truth.
// Here the background rows look like another class in features and probabilities alike, so the
// estimate is the truth's count and the consensus finds exactly them.
TEST(ClusterFilterTool, ConsensusFollowsTheEstimatedNoiseRate) {
  std::string dir = test::scratch_dir("cluster_tool_consensus");
  Synthetic s = make_synthetic(3, 300, 4);
  write_compare_inputs(dir, s);
  std::string log;
  ASSERT_EQ(run(compare_inputs(dir) + " --output " + dir + "/filter.h5 --set filter.method=consensus",
                &log),
            0)
      << log;
  h5::File f = h5::File::open(dir + "/filter.h5");
  EXPECT_EQ(f.attr_string("/", "method"), "consensus");
  int64_t truth = 0;
  for (auto v : s.noise) truth += v;
  EXPECT_EQ(f.attr_int("/noise_estimate", "truth"), truth);
  EXPECT_EQ(f.attr_int("/noise_estimate", "total"), truth);
  EXPECT_EQ(f.read_all<int64_t>("/noise_estimate/class_size"),
            (std::vector<int64_t>{300, 300, 300}));
  // How many the decisions flagged: per class the larger of the estimate and the knn vote's
  // count, and the consensus flagged their sum.
  const auto flag_counts = f.read_all<int64_t>("/noise_estimate/flag_counts");
  const auto per_class = f.read_all<int64_t>("/noise_estimate/per_class");
  const auto knn_flag = f.read_all<uint8_t>("/detectors/knn/flag");
  const auto labels = f.read_all<int32_t>("/labels");
  ASSERT_EQ(flag_counts.size(), per_class.size());
  int64_t flag_total = 0;
  for (size_t c = 0; c < flag_counts.size(); ++c) {
    int64_t voted = 0;
    for (size_t i = 0; i < knn_flag.size(); ++i) voted += knn_flag[i] && labels[i] == int32_t(c);
    EXPECT_EQ(flag_counts[c], std::max(per_class[c], voted)) << c;
    flag_total += flag_counts[c];
  }
  EXPECT_EQ(f.attr_int("/noise_estimate", "flag_total"), flag_total);
  EXPECT_EQ(f.attr_int("/detectors/consensus", "flagged"), flag_total);
  EXPECT_EQ(f.attr_string("/", "probs_source"), "");  // these probabilities name no source
  auto keep = f.read_all<uint8_t>("/keep");
  for (size_t i = 0; i < keep.size(); ++i) EXPECT_EQ(keep[i], !s.noise[i]) << i;
  EXPECT_DOUBLE_EQ(f.attr_double("/detectors/consensus", "f1"), 1.0);
  EXPECT_NE(log.find("estimated wrong labels (confident joint): " + std::to_string(truth)),
            std::string::npos)
      << log;
  // label_issues.csv beside it: a header, one row per sample, the flagged ones first, each
  // with the class its probabilities point at as the suggested label.
  std::ifstream csv(dir + "/label_issues.csv");
  ASSERT_TRUE(csv.good());
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("sample_id,given_label,suggested_label,", 0), 0u) << header;
  EXPECT_NE(header.find(",consensus_score,consensus_flag"), std::string::npos) << header;
  EXPECT_EQ(header.substr(header.size() - 5), ",kept");
  std::map<int64_t, size_t> row_of;
  for (size_t i = 0; i < s.ids.size(); ++i) row_of[s.ids[i]] = i;
  int64_t rows = 0;
  while (std::getline(csv, line)) {
    std::istringstream ls(line);
    std::string id, given, suggested;
    std::getline(ls, id, ',');
    std::getline(ls, given, ',');
    std::getline(ls, suggested, ',');
    const size_t i = row_of.at(std::stoll(id));
    EXPECT_EQ(std::stoi(given), s.labels[i]);
    EXPECT_EQ(std::stoi(suggested), s.noise[i] ? (s.labels[i] + 1) % 3 : s.labels[i]) << line;
    EXPECT_EQ(line.substr(line.size() - 1), s.noise[i] ? "0" : "1") << line;  // kept
    if (rows < truth) {
      EXPECT_TRUE(s.noise[i]) << "row " << rows << ": " << line;
    }
    ++rows;
  }
  EXPECT_EQ(rows, int64_t(s.ids.size()));
  // It is this tool's output: a re-run needs --overwrite, and then replaces it.
  EXPECT_EQ(run("--input " + dir + "/emb.h5 --features " + dir + "/feat.h5 --output " + dir +
                    "/filter.h5 --set filter.method=consensus",
                &log),
            2)
      << log;
  EXPECT_EQ(run("--input " + dir + "/emb.h5 --features " + dir + "/feat.h5 --output " + dir +
                    "/filter.h5 --set filter.method=consensus --overwrite",
                &log),
            0)
      << log;
}

// filter.noise_rate: a known share of wrong labels replaces the estimated amount. Twice the
// true share here (10 % against 5 %): the ranked decisions flag exactly 90 of 900, every true
// flip first; the per-class counts (the estimate's 15 each, the other 45 spread by class size)
// are what each class may take where that is more than filter.max_flagged allows.
TEST(ClusterFilterTool, AKnownNoiseRateSetsHowManyTheRankedDecisionsFlag) {
  std::string dir = test::scratch_dir("cluster_tool_noise_rate");
  Synthetic s = make_synthetic(3, 300, 4);
  write_compare_inputs(dir, s);
  std::string log;
  ASSERT_EQ(run(compare_inputs(dir) + " --output " + dir + "/filter.h5 --set filter.method=consensus" +
                    " --set filter.noise_rate=0.1",
                &log),
            0)
      << log;
  h5::File f = h5::File::open(dir + "/filter.h5");
  EXPECT_EQ(f.attr_int("/noise_estimate", "total"), 45);  // the data's own estimate, unchanged
  EXPECT_DOUBLE_EQ(f.attr_double("/noise_estimate", "noise_rate"), 0.1);
  EXPECT_EQ(f.read_all<int64_t>("/noise_estimate/flag_counts"), (std::vector<int64_t>{30, 30, 30}));
  EXPECT_EQ(f.attr_int("/noise_estimate", "flag_total"), 90);
  EXPECT_EQ(f.attr_int("/detectors/consensus", "flagged"), 90);
  EXPECT_DOUBLE_EQ(f.attr_double("/detectors/consensus", "recall"), 1.0);
  EXPECT_DOUBLE_EQ(f.attr_double("/detectors/consensus", "precision"), 0.5);
  const auto keep = f.read_all<uint8_t>("/keep");
  EXPECT_EQ(std::count(keep.begin(), keep.end(), uint8_t(0)), 90);
  EXPECT_NE(log.find("filter.noise_rate 0.1: the ranked decisions flag 90 of 900 samples (the "
                     "data's estimate: 45; the highest-scored over all classes"),
            std::string::npos)
      << log;
  // The knn vote keeps its own decision: the rate is for the ranked ones.
  EXPECT_EQ(f.attr_int("/detectors/knn", "flagged"), 45);
}

// The training-dynamics detector reads pretrain's per-epoch margins (here: the background
// rows' margins are negative in most epochs, the others positive; every 10th sample was
// held out and has none). It flags as many as the confident joint estimates; the
// consensus averages its rank in. A dynamics file of other samples is an error naming it.
// Clean data (label_noise rate 0): the truth file marks no sample, so recall, AP and AUROC
// are undefined. The detectors still run and flag, the estimate stands beside a truth of 0,
// and no detector carries scores (not zeros that read as "found nothing").
TEST(ClusterFilterTool, ATruthWithoutNoiseIsNotScored) {
  std::string dir = test::scratch_dir("cluster_tool_clean_truth");
  Synthetic s = make_synthetic(3, 300, 4);
  write_compare_inputs(dir, s);
  Synthetic clean = s;
  clean.noise.assign(s.noise.size(), 0);
  write_truth(dir + "/data.h5", clean);
  std::string log;
  ASSERT_EQ(run(compare_inputs(dir) + " --output " + dir + "/filter.h5",
                &log),
            0)
      << log;
  EXPECT_NE(log.find("carries injected noise, so the detectors are not scored"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("vs ground truth"), std::string::npos) << log;
  h5::File f = h5::File::open(dir + "/filter.h5");
  EXPECT_EQ(f.attr_int("/noise_estimate", "truth"), 0);
  EXPECT_FALSE(f.has_attr("/", "noise_recall"));
  int64_t flagged = 0;
  for (const std::string m : {"consensus", "knn", "confident", "dbscan"}) {
    const std::string g = "/detectors/" + m;
    ASSERT_TRUE(f.exists(g)) << m;
    EXPECT_FALSE(f.has_attr(g, "f1")) << m;
    EXPECT_FALSE(f.has_attr(g, "auroc")) << m;
    EXPECT_FALSE(f.exists(g + "/pr")) << m;
    if (m == "consensus") flagged = f.attr_int(g, "flagged");
  }
  // The features still say the background rows look like another class: they are flagged.
  int64_t background = 0;
  for (auto v : s.noise) background += v;
  EXPECT_EQ(flagged, background);
}

TEST(ClusterFilterTool, DynamicsDetectorReadsTheMarginsOfEveryEpoch) {
  std::string dir = test::scratch_dir("cluster_tool_dynamics");
  Synthetic s = make_synthetic(3, 300, 4);
  write_compare_inputs(dir, s);
  const int epochs = 4;
  const size_t n = s.ids.size();
  std::vector<float> margin(epochs * n);
  for (int e = 0; e < epochs; ++e)
    for (size_t i = 0; i < n; ++i)
      margin[e * n + i] = i % 10 == 5 ? std::nanf("")
                          : s.noise[i] ? (e == 3 ? 0.5f : -1.0f - 0.001f * float(i))
                                       : 1.0f + 0.001f * float(i % 97);
  write_dynamics(dir + "/dyn.h5", margin, epochs, s.ids, s.labels);
  const std::string io = compare_inputs(dir) + " --dynamics " + dir + "/dyn.h5 --output " + dir;
  std::string log;
  ASSERT_EQ(run(io + "/filter.h5 --set filter.method=dynamics", &log), 0) << log;
  h5::File f = h5::File::open(dir + "/filter.h5");
  EXPECT_EQ(f.attr_string("/", "method"), "dynamics");
  // Rows with no recorded margin (a file from before held-out margins were recorded) score
  // the median and are missed.
  int64_t truth = 0, missed = 0;
  for (size_t i = 0; i < n; ++i) {
    truth += s.noise[i];
    missed += s.noise[i] && i % 10 == 5;
  }
  EXPECT_EQ(f.attr_int("/detectors/dynamics", "hits"), truth - missed);
  EXPECT_EQ(f.attr_int("/detectors/dynamics", "flagged"), truth);  // the estimated count
  EXPECT_GT(f.attr_double("/detectors/dynamics", "auroc"), 0.95);
  ASSERT_TRUE(f.exists("/detectors/consensus/score"));
  EXPECT_DOUBLE_EQ(f.attr_double("/detectors/consensus", "f1"), 1.0);
  // Margins of other samples: refused, naming the file.
  {
    std::vector<int64_t> other(s.ids);
    other[0] = 99999999;
    write_dynamics(dir + "/dyn_other.h5", margin, epochs, other, {});
  }
  EXPECT_EQ(run("--input " + dir + "/emb.h5 --features " + dir + "/feat.h5 --dynamics " + dir +
                    "/dyn_other.h5 --set filter.method=dynamics --output " + dir + "/other.h5",
                &log),
            1)
      << log;
  EXPECT_NE(log.find("dyn_other.h5: sample id"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir + "/other.h5"));
  // Without the file: one line naming what is missing.
  EXPECT_EQ(run("--input " + dir + "/emb.h5 --features " + dir +
                    "/feat.h5 --set filter.method=dynamics --output " + dir + "/none.h5",
                &log),
            2)
      << log;
  EXPECT_NE(log.find("--dynamics"), std::string::npos) << log;
}

// Held out, of synthetic classes of 300: samples 0-19 and 200-219 of each class, 5 % flipped
// like the trained ones.
static std::vector<uint8_t> held_out_blocks(size_t n) {
  std::vector<uint8_t> held(n);
  for (size_t i = 0; i < n; ++i) held[i] = (i % 300) / 20 % 10 == 0;
  return held;
}

// Held-out samples' margins come from evaluation (pretrain: never trained on them) and sit
// lower than the trained ones; with /heldout the detector compares each group within itself
// and finds every flip, without it the held-out clean samples crowd out the trained flips.
TEST(ClusterFilterTool, DynamicsDetectorPutsHeldOutMarginsOnTheTrainedScale) {
  std::string dir = test::scratch_dir("cluster_tool_dynamics_heldout");
  Synthetic s = make_synthetic(3, 300, 4);  // flips: every 20th sample of a class (5 %)
  write_compare_inputs(dir, s);
  const int epochs = 3;
  const size_t n = s.ids.size();
  const std::vector<uint8_t> held = held_out_blocks(n);
  std::vector<float> margin(epochs * n);
  for (int e = 0; e < epochs; ++e)
    for (size_t i = 0; i < n; ++i) {
      const float jitter = 0.001f * float(i % 97);
      margin[e * n + i] =
          held[i] ? (s.noise[i] ? -4.0f : -1.5f) - jitter : (s.noise[i] ? -1.0f : 1.0f) - jitter;
    }
  write_dynamics(dir + "/dyn.h5", margin, epochs, s.ids, s.labels, &held);
  write_dynamics(dir + "/dyn_unmarked.h5", margin, epochs, s.ids, s.labels);
  int64_t truth = 0;
  for (size_t i = 0; i < n; ++i) truth += s.noise[i];
  auto hits = [&](const std::string& dyn) {
    std::string log;
    const std::string out = dir + "/" + dyn + ".filter.h5";
    EXPECT_EQ(run(compare_inputs(dir) + " --dynamics " + dir + "/" + dyn +
                      " --set filter.method=dynamics --output " + out,
                  &log),
              0)
        << log;
    h5::File f = h5::File::open(out);
    EXPECT_EQ(f.attr_int("/detectors/dynamics", "flagged"), truth);  // the estimated count
    return f.attr_int("/detectors/dynamics", "hits");
  };
  EXPECT_EQ(hits("dyn.h5"), truth);
  // Unmarked (a file from before held-out margins were recorded, read as one scale): of each
  // class's 15 flagged, the 13 trained flips lose to the 38 held-out clean samples.
  EXPECT_EQ(hits("dyn_unmarked.h5"), 3 * 2);
}

// The caution (cluster/calibrate.hpp, estimate_in_doubt): where the early model misses as many
// more held-out labels than the estimate explains as the estimate itself, cluster_filter says
// so once and filter.h5 keeps the held-out peak and the verdict; a model that gets its clean
// held-out samples right draws none, and a file without held-out marks records neither.
TEST(ClusterFilterTool, CautionWhereTheEarlyModelsOwnErrorIsAsLargeAsTheEstimate) {
  std::string dir = test::scratch_dir("cluster_tool_own_error");
  Synthetic s = make_synthetic(3, 300, 4);  // flips: every 20th sample of a class (5 %)
  write_compare_inputs(dir, s);
  const int epochs = 2;
  const size_t n = s.ids.size();
  const std::vector<uint8_t> held = held_out_blocks(n);
  // Sure: every clean sample's margin positive, every flip's negative. Unsure: besides, every
  // other clean held-out sample is one the model gets wrong.
  std::vector<float> sure(epochs * n), unsure(epochs * n);
  int64_t held_n = 0, held_right_sure = 0, held_right_unsure = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool missed = held[i] && !s.noise[i] && i % 2 == 0;
    for (int e = 0; e < epochs; ++e) {
      sure[e * n + i] = s.noise[i] ? -1.0f : 1.0f;
      unsure[e * n + i] = s.noise[i] || missed ? -1.0f : 1.0f;
    }
    held_n += held[i];
    held_right_sure += held[i] && !s.noise[i];
    held_right_unsure += held[i] && !s.noise[i] && !missed;
  }
  write_dynamics(dir + "/sure.h5", sure, epochs, s.ids, s.labels, &held);
  write_dynamics(dir + "/unsure.h5", unsure, epochs, s.ids, s.labels, &held);
  write_dynamics(dir + "/unmarked.h5", unsure, epochs, s.ids, s.labels);
  auto filter = [&](const std::string& dyn, std::string* log, const std::string& set = "") {
    const std::string out = dir + "/" + dyn + std::to_string(set.size()) + ".filter.h5";
    EXPECT_EQ(
        run(compare_inputs(dir) + " --dynamics " + dir + "/" + dyn + set + " --output " + out, log),
        0)
        << *log;
    return h5::File::open(out);
  };
  const std::string kCaution = "caution: the early model misses";
  std::string log;
  {
    h5::File f = filter("sure.h5", &log);
    EXPECT_EQ(log.find(kCaution), std::string::npos) << log;
    EXPECT_DOUBLE_EQ(f.attr_double("/noise_estimate", "heldout_peak_accuracy"),
                     double(held_right_sure) / double(held_n));
    EXPECT_EQ(f.attr_int("/noise_estimate", "in_doubt"), 0);
  }
  {
    h5::File f = filter("unsure.h5", &log);
    // Read once for the thresholds, the dynamics score and the caution: listed once.
    const auto inputs = f.attr_strings("/", "inputs");
    EXPECT_EQ(std::count_if(inputs.begin(), inputs.end(),
                            [](const std::string& s) { return s.find("unsure.h5") != s.npos; }),
              1);
    const double peak = double(held_right_unsure) / double(held_n);
    EXPECT_DOUBLE_EQ(f.attr_double("/noise_estimate", "heldout_peak_accuracy"), peak);
    EXPECT_EQ(f.attr_int("/noise_estimate", "in_doubt"), 1);
    const size_t at = log.find(kCaution);
    ASSERT_NE(at, std::string::npos) << log;
    EXPECT_EQ(log.find(kCaution, at + 1), std::string::npos) << log;  // once
    EXPECT_NE(log.find("filter.noise_rate"), std::string::npos) << log;
  }
  {  // a rate the user gives replaces the count: the verdict is kept, the advice not given
    h5::File f = filter("unsure.h5", &log, " --set filter.noise_rate=0.05");
    EXPECT_EQ(f.attr_int("/noise_estimate", "in_doubt"), 1);
    EXPECT_EQ(log.find(kCaution), std::string::npos) << log;
  }
  {
    h5::File f = filter("unmarked.h5", &log);
    EXPECT_FALSE(f.has_attr("/noise_estimate", "heldout_peak_accuracy"));
    EXPECT_FALSE(f.has_attr("/noise_estimate", "in_doubt"));
    EXPECT_EQ(log.find(kCaution), std::string::npos) << log;
  }
}

// filter.test_bound: a model that takes a third of the clean samples of classes 0 and 1 for
// the next class makes the confident joint and the knn vote count them with the 5 % flips;
// its confusion on a test split with the same mistakes and clean labels, against the held-out
// samples' predictions, says how many labels are wrong, and the count is capped near that.
// With the key off the count stands; without test probabilities nothing is estimated.
TEST(ClusterFilterTool, TestSplitCapsTheCountWhereTheModelsOwnMistakesInflateIt) {
  std::string dir = test::scratch_dir("cluster_tool_test_split");
  Synthetic s = make_synthetic(3, 1200, 4);  // flips: every 20th sample of a class (180)
  const size_t n = s.ids.size();
  std::vector<uint8_t> elsewhere(n), held(n);
  std::vector<float> margin(n);
  for (size_t i = 0; i < n; ++i) {
    const bool mistaken = !s.noise[i] && s.labels[i] < 2 && i % 3 == 1;
    elsewhere[i] = s.noise[i] || mistaken;
    held[i] = (i / 3) % 3 == 0;  // a third, every residue of i % 3 among them
    margin[i] = elsewhere[i] ? -1.0f : 1.0f;
  }
  write_compare_inputs(dir, s, -1, &elsewhere);
  write_dynamics(dir + "/dyn.h5", margin, 1, s.ids, s.labels, &held);
  const std::string args = compare_inputs(dir) + " --dynamics " + dir + "/dyn.h5 --output ";
  const std::string kCount = "test split's count:";
  std::string log;
  // No test probabilities yet: nothing estimated.
  ASSERT_EQ(run(args + dir + "/none.h5", &log), 0) << log;
  EXPECT_EQ(log.find(kCount), std::string::npos) << log;
  const int64_t uncapped =
      h5::File::open(dir + "/none.h5").attr_int("/noise_estimate", "flag_total");
  EXPECT_GT(uncapped, 2 * 180) << log;  // the model's mistakes counted as flips
  // 1200 test samples a class, predicted as the clean training samples are (mistaken: every
  // mistaken-th sample of classes 0 and 1 taken for the next class).
  auto write_test_split = [&](const std::string& path, int mistaken_every) {
    write_test_predictions(
        path, 3, 1200, [&](int c, int j) { return c < 2 && j % mistaken_every == 1 ? c + 1 : c; });
  };
  fs::copy_file(dir + "/feat.h5", dir + "/feat_harder_test.h5");
  write_test_split(dir + "/feat.h5", 3);
  ASSERT_EQ(run(args + dir + "/capped.h5", &log), 0) << log;
  const size_t at = log.find(kCount);
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(kCount, at + 1), std::string::npos) << log;  // once
  EXPECT_NE(log.find("flag at most"), std::string::npos) << log;
  h5::File f = h5::File::open(dir + "/capped.h5");
  const double wrong = f.attr_double("/noise_estimate", "test_split_wrong");
  const double se = f.attr_double("/noise_estimate", "test_split_standard_error");
  EXPECT_NEAR(wrong, 180.0, 3.0 * se);
  EXPECT_GT(wrong - 2.0 * se, 0.0);
  const int64_t cap = f.attr_int("/noise_estimate", "test_split_cap");
  EXPECT_EQ(cap, int64_t(std::ceil(wrong + 2.0 * se)));
  EXPECT_EQ(f.attr_int("/noise_estimate", "flag_total"), cap);
  EXPECT_LT(cap, uncapped);
  // Two ranks read the test probabilities a block each: the same estimate and cap.
  ASSERT_EQ(run(args + dir + "/two.h5", &log, 2), 0) << log;
  h5::File two = h5::File::open(dir + "/two.h5");
  EXPECT_EQ(two.attr_double("/noise_estimate", "test_split_wrong"), wrong);
  EXPECT_EQ(two.attr_double("/noise_estimate", "test_split_standard_error"), se);
  EXPECT_EQ(two.attr_int("/noise_estimate", "test_split_cap"), cap);
  // Off: the count stands and nothing is estimated.
  ASSERT_EQ(run(args + dir + "/off.h5 --set filter.test_bound=false", &log), 0) << log;
  EXPECT_EQ(log.find(kCount), std::string::npos) << log;
  h5::File off = h5::File::open(dir + "/off.h5");
  EXPECT_EQ(off.attr_int("/noise_estimate", "flag_total"), uncapped);
  EXPECT_FALSE(off.has_attr("/noise_estimate", "test_split_wrong"));
  EXPECT_EQ(f.attr_int("/noise_estimate", "test_split_follows_model"), 0);
  // A test split the model errs on twice as often (every other sample of classes 0 and 1): the
  // held-out samples agree with their labels more than the test ones with theirs, so nothing
  // is capped and one caution says so. Its count below zero (about 630) is under the 940 the
  // joint and the vote count, so nothing is raised either (filter.follows_model_count only
  // raises; LabelsThatFollowTheModelAreCountedByTheTestSplitBelowZero has the raise).
  write_test_split(dir + "/feat_harder_test.h5", 2);
  std::string harder = args;
  harder.replace(harder.find(dir + "/feat.h5"), (dir + "/feat.h5").size(),
                 dir + "/feat_harder_test.h5");
  ASSERT_EQ(run(harder + dir + "/harder.h5", &log), 0) << log;
  const std::string kFollows = "caution: the held-out samples agree with their given labels";
  const size_t said = log.find(kFollows);
  ASSERT_NE(said, std::string::npos) << log;
  EXPECT_EQ(log.find(kFollows, said + 1), std::string::npos) << log;
  EXPECT_EQ(log.find("caution: the early model misses"), std::string::npos) << log;
  EXPECT_NE(log.find("may be far fewer than the wrong labels"), std::string::npos) << log;
  h5::File h = h5::File::open(dir + "/harder.h5");
  EXPECT_EQ(h.attr_int("/noise_estimate", "test_split_follows_model"), 1);
  EXPECT_EQ(h.attr_int("/noise_estimate", "test_split_cap"), -1);
  EXPECT_LT(-h.attr_double("/noise_estimate", "test_split_wrong"), double(uncapped));
  EXPECT_EQ(h.attr_int("/noise_estimate", "test_split_raise"), -1);
  EXPECT_EQ(h.attr_int("/noise_estimate", "flag_total"), uncapped);
}

// The posteriors' label transition comes from the test split where its count is precise (two
// standard errors within a fifth of it): every 20th sample given label c is an image of class
// c + 1 (mod 3), and the model also takes a tenth of class 0's and 1's clean images for the next
// class, on the test split as on the training split. The test split's transition sends label c
// to class c + 1's images at the flips' rate alone, T[0][1] = 300 of class 1's 6,000; the
// confident joint's counts the model's mistakes on the same route. Without the test split
// (filter.test_bound=false), or where its count is not precise (the 1,200-a-class case of
// TestSplitCapsTheCount...), the confident joint's is read, as before.
TEST(ClusterFilterTool, PosteriorsReadTheTestSplitsTransitionWhereItsCountIsPrecise) {
  std::string dir = test::scratch_dir("cluster_tool_transition");
  Synthetic s = make_synthetic(3, 6000, 8);
  const size_t n = s.ids.size();
  std::vector<uint8_t> elsewhere(n), held(n);
  std::vector<float> margin(n);
  for (size_t i = 0; i < n; ++i) {
    elsewhere[i] = s.noise[i] || (s.labels[i] < 2 && i % 10 == 1);
    held[i] = (i / 3) % 3 == 0;
    margin[i] = elsewhere[i] ? -1.0f : 1.0f;
  }
  write_compare_inputs(dir, s, -1, &elsewhere);
  write_dynamics(dir + "/dyn.h5", margin, 1, s.ids, s.labels, &held);
  write_test_predictions(dir + "/feat.h5", 3, 6000,
                         [](int c, int j) { return c < 2 && j % 10 == 1 ? c + 1 : c; });
  const std::string args = compare_inputs(dir) + " --dynamics " + dir + "/dyn.h5 --output ";
  std::string log;
  ASSERT_EQ(run(args + dir + "/test.h5", &log), 0) << log;
  EXPECT_NE(log.find("the posteriors read the label transition from the test split's count"),
            std::string::npos)
      << log;
  h5::File f = h5::File::open(dir + "/test.h5");
  const double wrong = f.attr_double("/noise_estimate", "test_split_wrong");
  ASSERT_LE(2.0 * f.attr_double("/noise_estimate", "test_split_standard_error"), 0.2 * wrong);
  EXPECT_EQ(f.attr_string("/noise_estimate", "transition_source"), "test_split");
  const std::vector<double> t = f.read_all<double>("/noise_estimate/label_transition");
  ASSERT_EQ(t.size(), 9u);
  // The truth with the prior of 0.5 % of the column per cell: (300 + 30) / (6,000 x 1.015).
  const double truth = 330.0 / 6090.0;
  EXPECT_NEAR(t[0 * 3 + 1], truth, 0.02);
  ASSERT_EQ(run(args + dir + "/joint.h5 --set filter.test_bound=false", &log), 0) << log;
  h5::File g = h5::File::open(dir + "/joint.h5");
  EXPECT_EQ(g.attr_string("/noise_estimate", "transition_source"), "confident_joint");
  const std::vector<double> tj = g.read_all<double>("/noise_estimate/label_transition");
  ASSERT_EQ(tj.size(), 9u);
  EXPECT_GT(tj[0 * 3 + 1], truth + 0.08);  // the model's mistakes as a flip route
}

// filter.follows_model_count: a fifth of class 0 looks like class 1 and carries label 1, and
// the model follows them (its probabilities and features say class 1, as the label does), so
// the confident joint and the knn vote count none; only the training dynamics (a low margin
// through training) tell them apart. On the clean test split the model takes the same fifth
// of class 0 for class 1, so the held-out samples of label 0 agree with it more than class 0's
// test samples do: the test split's count is 240 below zero, exactly the flips
// (test_cluster_confusion), and the decisions flag that many, on one rank and two alike. Off,
// or with a known rate, the count stands.
TEST(ClusterFilterTool, LabelsThatFollowTheModelAreCountedByTheTestSplitBelowZero) {
  std::string dir = test::scratch_dir("cluster_tool_follows_model");
  Synthetic s = make_synthetic(3, 1200, 6);
  const size_t n = s.ids.size();
  std::vector<uint8_t> elsewhere(n, 0), held(n);
  std::vector<float> margin(n);
  for (size_t i = 0; i < n; ++i) {
    s.noise[i] = s.labels[i] == 0 && i % 5 == 2;  // 240 flips, the truth
    if (s.noise[i]) s.labels[i] = 1;
    held[i] = (i / 3) % 3 == 0;
    margin[i] = s.noise[i] ? -1.0f : 1.0f;
  }
  write_compare_inputs(dir, s, -1, &elsewhere);  // every row looks like its given label
  write_dynamics(dir + "/dyn.h5", margin, 1, s.ids, s.labels, &held);
  write_test_predictions(dir + "/feat.h5", 3, 1200,
                         [](int c, int j) { return c == 0 && j % 5 == 2 ? 1 : c; });
  const std::string args = compare_inputs(dir) + " --dynamics " + dir + "/dyn.h5 --output ";
  std::string log;
  ASSERT_EQ(run(args + dir + "/raised.h5", &log), 0) << log;
  const std::string kRaised = "as many as the test split's count is below zero";
  const size_t at = log.find(kRaised);
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(kRaised, at + 1), std::string::npos) << log;  // once
  h5::File f = h5::File::open(dir + "/raised.h5");
  EXPECT_EQ(f.attr_int("/noise_estimate", "test_split_follows_model"), 1);
  EXPECT_NEAR(f.attr_double("/noise_estimate", "test_split_wrong"), -240.0, 1e-6);
  EXPECT_LT(f.attr_int("/noise_estimate", "total"), 24);  // the joint sees a tenth at most
  EXPECT_EQ(f.attr_int("/noise_estimate", "test_split_raise"), 240);
  EXPECT_EQ(f.attr_int("/noise_estimate", "flag_total"), 240);
  EXPECT_EQ(f.attr_int("/detectors/consensus", "flagged"), 240);
  const double recall = f.attr_double("/detectors/consensus", "recall");
  ASSERT_EQ(run(args + dir + "/two.h5", &log, 2), 0) << log;
  h5::File two = h5::File::open(dir + "/two.h5");
  EXPECT_EQ(two.attr_int("/noise_estimate", "test_split_raise"), 240);
  EXPECT_EQ(two.attr_double("/detectors/consensus", "recall"), recall);
  ASSERT_EQ(run(args + dir + "/kept.h5 --set filter.follows_model_count=false", &log), 0) << log;
  EXPECT_EQ(log.find(kRaised), std::string::npos) << log;
  h5::File kept = h5::File::open(dir + "/kept.h5");
  EXPECT_EQ(kept.attr_int("/noise_estimate", "test_split_raise"), -1);
  EXPECT_LT(kept.attr_int("/noise_estimate", "flag_total"), 240);
  // The dynamics rank the flips first, so the raise finds more of them than the joint's count.
  EXPECT_GT(recall, kept.attr_double("/detectors/consensus", "recall"));
  ASSERT_EQ(run(args + dir + "/rate.h5 --set filter.noise_rate=0.05", &log), 0) << log;
  h5::File rate = h5::File::open(dir + "/rate.h5");
  EXPECT_EQ(rate.attr_int("/noise_estimate", "test_split_raise"), -1);
  EXPECT_EQ(rate.attr_int("/noise_estimate", "flag_total"), 180);
}

// filter.max_flagged and filter.test_bound: a model that takes half the clean samples of class 0
// for class 1 makes the count of class 0 pass the limit (20 % of its labels are wrong, 60 %
// counted), while it under-counts classes 1 and 2 (40 % wrong; only their held-out flips,
// never trained, are placed elsewhere), so the total stays under the test split's and nothing
// caps it. The test split, on which the model makes the same mistakes, bounds class 0 at its
// own estimate plus two of its standard errors, and the run goes on; where the test split says
// the model makes none (so the class's labels are as wrong as counted), or the key is off, the
// refusal stands.
TEST(ClusterFilterTool, TestSplitKeepsAClassUnderMaxFlaggedWhereItPlainlySaysFewerAreWrong) {
  std::string dir = test::scratch_dir("cluster_tool_class_bound");
  const int per_class = 1200;
  Synthetic s = make_synthetic(3, per_class, 4);
  const size_t n = s.ids.size();
  std::vector<uint8_t> elsewhere(n), held(n);
  std::vector<float> margin(n);
  std::vector<int64_t> wrong_of(3, 0);
  for (size_t i = 0; i < n; ++i) {
    const int c = s.labels[i], j = int(i) % per_class;
    s.noise[i] = c == 0 ? j % 10 < 2 : j % 5 < 2;
    wrong_of[size_t(c)] += s.noise[i];
    held[i] = (i / 3) % 3 == 0;
    const bool mistaken = c == 0 && !s.noise[i] && j % 2 == 1;
    elsewhere[i] = mistaken || (s.noise[i] && (c == 0 || held[i]));
    margin[i] = elsewhere[i] ? -1.0f : 1.0f;
  }
  ASSERT_EQ(wrong_of, (std::vector<int64_t>{240, 480, 480}));
  write_compare_inputs(dir, s, -1, &elsewhere);
  write_dynamics(dir + "/dyn.h5", margin, 1, s.ids, s.labels, &held);
  fs::copy_file(dir + "/feat.h5", dir + "/feat_no_mistakes.h5");
  write_test_predictions(dir + "/feat.h5", 3, per_class,
                         [](int c, int j) { return c == 0 && j % 2 == 1 ? 1 : c; });
  const std::string args = compare_inputs(dir) + " --dynamics " + dir + "/dyn.h5 --output ";
  const std::string kBound = "the test split's count for its label is";
  std::string log;
  ASSERT_EQ(run(args + dir + "/bounded.h5", &log), 0) << log;
  const size_t at = log.find(kBound);
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(kBound, at + 1), std::string::npos) << log;  // class 0 only, once
  EXPECT_NE(log.find("class 0"), std::string::npos) << log;
  h5::File f = h5::File::open(dir + "/bounded.h5");
  EXPECT_EQ(f.attr_int("/noise_estimate", "test_split_cap"), -1);  // the total was not capped
  const auto wrong = f.read_all<double>("/noise_estimate/test_split_wrong_by_label");
  const auto se = f.read_all<double>("/noise_estimate/test_split_standard_error_by_label");
  ASSERT_EQ(wrong.size(), 3u);
  ASSERT_EQ(se.size(), 3u);
  for (size_t c = 0; c < 3; ++c) EXPECT_NEAR(wrong[c], double(wrong_of[c]), 3.0 * se[c]) << c;
  const auto bound = f.read_all<int64_t>("/noise_estimate/test_split_class_cap");
  const auto counts = f.read_all<int64_t>("/noise_estimate/flag_counts");
  ASSERT_EQ(bound.size(), 3u);
  EXPECT_EQ(bound[0], int64_t(std::ceil(wrong[0] + 2.0 * se[0])));
  EXPECT_LE(bound[0], per_class / 2);
  EXPECT_EQ(counts[0], bound[0]);
  EXPECT_EQ(bound[1], -1);
  EXPECT_EQ(bound[2], -1);
  // The decision flags that many of class 0: within the limit.
  const auto labels = f.read_all<int32_t>("/labels");
  const auto keep = f.read_all<uint8_t>("/keep");
  int64_t flagged0 = 0;
  for (size_t i = 0; i < labels.size(); ++i) flagged0 += labels[i] == 0 && !keep[i];
  EXPECT_EQ(flagged0, counts[0]);
  // Two ranks, each holding a block of rows: the same bound and the same flags.
  ASSERT_EQ(run(args + dir + "/two.h5", &log, 2), 0) << log;
  h5::File two = h5::File::open(dir + "/two.h5");
  EXPECT_EQ(two.read_all<int64_t>("/noise_estimate/test_split_class_cap"), bound);
  EXPECT_EQ(two.read_all<uint8_t>("/keep"), keep);
  const size_t said = log.find(kBound);
  ASSERT_NE(said, std::string::npos) << log;
  EXPECT_EQ(log.find(kBound, said + 1), std::string::npos) << log;  // once, not once a rank
  // The key off: class 0's count stands, and the run is refused.
  ASSERT_EQ(run(args + dir + "/off.h5 --set filter.test_bound=false", &log), 2) << log;
  EXPECT_NE(log.find("filter.max_flagged"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir + "/off.h5"));
  // A test split the model gets right: the held-out samples of class 0 it misplaces are then
  // wrong labels as far as the test split can tell, more than the limit, so the refusal stands.
  write_test_predictions(dir + "/feat_no_mistakes.h5", 3, per_class, [](int c, int) { return c; });
  std::string agreed = args;
  agreed.replace(agreed.find(dir + "/feat.h5"), (dir + "/feat.h5").size(),
                 dir + "/feat_no_mistakes.h5");
  ASSERT_EQ(run(agreed + dir + "/agreed.h5", &log), 2) << log;
  EXPECT_EQ(log.find(kBound), std::string::npos) << log;
  EXPECT_NE(log.find("filter.max_flagged"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir + "/agreed.h5"));
}

// filter.max_flagged: a detector that would flag most of a class is refused in one line
// naming the key (the paper's fixed eps on a map of another scale flags nearly everything),
// with no output; a compared detector that would is only noted.
TEST(ClusterFilterTool, MaxFlaggedRefusesAnEmptiedClass) {
  std::string dir = test::scratch_dir("cluster_tool_max_flagged");
  Synthetic s = make_synthetic(3, 300, 4);
  write_compare_inputs(dir, s);
  const std::string io = compare_inputs(dir) + " --output " + dir + "/filter.h5";
  const std::string tiny_eps = " --set filter.dbscan.auto_eps=false --set filter.dbscan.eps=1e-4";
  std::string log;
  EXPECT_EQ(run(io + kDbscan + tiny_eps, &log), 2) << log;
  EXPECT_NE(log.find("filter.max_flagged"), std::string::npos) << log;
  EXPECT_NE(log.find("filter.method=dbscan flags 300 of the 300 samples of class"),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(dir + "/filter.h5"));
  EXPECT_FALSE(fs::exists(dir + "/label_issues.csv"));
  // Allowed when asked for; and with knn chosen, dbscan's overflagging is a note only.
  EXPECT_EQ(run(io + kDbscan + tiny_eps + " --set filter.max_flagged=1", &log), 0) << log;
  EXPECT_EQ(run(io + tiny_eps + " --overwrite", &log), 0) << log;
  EXPECT_NE(log.find("note: filter.method=dbscan flags"), std::string::npos) << log;
}

TEST(ClusterFilterTool, BadInputGivesClearErrorsAndNoOutput) {
  std::string dir = test::scratch_dir("cluster_tool_bad");
  Synthetic s = make_synthetic(2, 60, 1);
  write_embedding(dir + "/good.h5", s.x, 2, s.labels, s.ids);
  auto expect_fail = [&](const std::string& args, int code, const std::string& needle) {
    std::string out = dir + "/out.h5", log;
    EXPECT_EQ(run(kDbscan + " " + args + " --output " + out, &log), code) << args << "\n" << log;
    EXPECT_NE(log.find(needle), std::string::npos) << "expected '" << needle << "' in: " << log;
    EXPECT_FALSE(fs::exists(out)) << args;
  };
  std::string good = "--input " + dir + "/good.h5";
  expect_fail(good + " --set filter.dbscan.auto_eps=false --set filter.dbscan.eps=0", 2, "filter.dbscan.eps");
  expect_fail(good + " --set filter.dbscan.auto_eps=false --set filter.dbscan.eps=-1", 2, "filter.dbscan.eps");
  expect_fail(good + " --set filter.dbscan.min_samples=0", 2, "filter.dbscan.min_samples");
  expect_fail("--input " + dir + "/missing.h5", 1, "missing.h5");

  auto nan_x = s.x;
  nan_x[37] = std::nanf("");
  write_embedding(dir + "/nan.h5", nan_x, 2, s.labels, s.ids);
  expect_fail("--input " + dir + "/nan.h5", 1, "NaN");

  write_embedding(dir + "/nolabels.h5", s.x, 2, {}, s.ids);
  expect_fail("--input " + dir + "/nolabels.h5", 1, "/labels");

  write_embedding(dir + "/empty.h5", {}, 2, {}, {});
  {  // zero rows but well-formed: the file needs its labels too
    h5::File f = h5::File::open_rw(dir + "/empty.h5");
    f.create_dataset<int32_t>("/labels", {0});
  }
  expect_fail("--input " + dir + "/empty.h5", 1, "empty");

  auto short_labels = s.labels;
  short_labels.pop_back();
  write_embedding(dir + "/mismatch.h5", s.x, 2, short_labels, s.ids);
  expect_fail("--input " + dir + "/mismatch.h5", 1, "mismatched lengths");

  auto neg = s.labels;
  neg[3] = -1;
  write_embedding(dir + "/neg.h5", s.x, 2, neg, s.ids);
  expect_fail("--input " + dir + "/neg.h5", 1, "negative");

  write_embedding(dir + "/wrong.h5", s.x, 2, s.labels, s.ids, schema::kModel);
  expect_fail("--input " + dir + "/wrong.h5", 1, "schema");
  // GMM with more components than a class has samples.
  expect_fail(good + " --set filter.method=gmm --set filter.gmm.components=100", 1,
              "filter.gmm.components");
}

// The features and probabilities are read in blocks, one a rank, and the detectors run
// distributed: every detector's scores and flags, the keep mask and the table are the same
// on 1, 2 and 3 ranks (rows of the features file in reverse order of the embedding's), and a
// bad row that only one rank reads gives one error line from the job, once.
TEST(ClusterFilterTool, SameResultOnOneTwoAndThreeRanks) {
  std::string dir = test::scratch_dir("cluster_tool_ranks");
  Synthetic s = make_synthetic(3, 200, 6);
  write_compare_inputs(dir, s);
  const std::string args = compare_inputs(dir) + " --set filter.dbscan.auto_eps=false --set filter.dbscan.eps=0.3 --output " + dir;
  std::string log;
  ASSERT_EQ(run(args + "/np1.h5", &log), 0) << log;
  h5::File one = h5::File::open(dir + "/np1.h5");
  for (int np : {2, 3}) {
    ASSERT_EQ(run(args + "/np" + std::to_string(np) + ".h5", &log, np), 0) << log;
    h5::File f = h5::File::open(dir + "/np" + std::to_string(np) + ".h5");
    for (std::string m : {"knn", "confident", "dbscan", "consensus"}) {
      const std::string g = "/detectors/" + m;
      EXPECT_EQ(f.read_all<float>(g + "/score"), one.read_all<float>(g + "/score")) << m << np;
      EXPECT_EQ(f.read_all<uint8_t>(g + "/flag"), one.read_all<uint8_t>(g + "/flag")) << m << np;
    }
    EXPECT_EQ(f.read_all<uint8_t>("/keep"), one.read_all<uint8_t>("/keep")) << np;
    EXPECT_EQ(f.read_all<uint8_t>("/random_keep"), one.read_all<uint8_t>("/random_keep")) << np;
    EXPECT_EQ(f.read_all<int64_t>("/per_class/noise"), one.read_all<int64_t>("/per_class/noise"));
  }
  // A NaN in the last row of the features file: on 2 ranks only rank 1 reads it.
  const int64_t n = int64_t(s.labels.size());
  write_compare_inputs(dir, s, n - 1);
  for (int np : {1, 2}) {
    const std::string out = dir + "/nan" + std::to_string(np) + ".h5";
    EXPECT_EQ(run(args + "/nan" + std::to_string(np) + ".h5", &log, np), 1) << log;
    const std::string needle = "/train/features row " + std::to_string(n - 1) + " column 2 is NaN";
    const size_t at = log.find(needle);
    EXPECT_NE(at, std::string::npos) << log;
    EXPECT_EQ(log.find(needle, at + 1), std::string::npos) << "printed more than once: " << log;
    EXPECT_FALSE(fs::exists(out));
  }
}
