// End-to-end tests of the report program on a fake run directory built here: tiny HDF5
// files with the documented names (docs/formats.md) and result.json files whose expected
// aggregates are computed independently in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>

#include "io/h5.hpp"
#include "io/metrics.hpp"
#include "io/schemas.hpp"
#include "support/test_util.hpp"

namespace fs = std::filesystem;
using namespace sieve;

namespace {

constexpr int kN = 30, kClasses = 3, kH = 8, kW = 8, kC = 3;
const std::vector<int64_t> kBatches = {16, 64};
const std::vector<std::string> kArms = {"full", "filtered", "random"};

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// CSV -> rows of fields (no quoted commas in the files read here except class names).
std::vector<std::vector<std::string>> read_csv(const std::string& p) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::string cur;
    bool q = false;
    for (char c : line) {
      if (c == '"')
        q = !q;
      else if (c == ',' && !q)
        f.push_back(cur), cur.clear();
      else
        cur += c;
    }
    f.push_back(cur);
    rows.push_back(f);
  }
  return rows;
}

double acc_of(const std::string& arm, int64_t batch, int seed) {
  double off = arm == "filtered" ? 0.02 : arm == "random" ? -0.03 : 0.0;
  return 0.8 + off - 0.01 * std::log2(double(batch) / 16) + 0.004 * seed;
}

// scored = false: the detectors as cluster_filter writes them without a truth to score them
// against (real data, or a truth that marks no sample), beside its noise estimate.
void write_h5_inputs(const std::string& dir, bool with_filter, bool scored = true) {
  {
    auto f = h5::File::create(dir + "/dataset.h5");
    h5::stamp(f, schema::kDataset, "run: {}\n");
    std::vector<uint8_t> img(size_t(kN) * kH * kW * kC);
    for (size_t i = 0; i < img.size(); ++i) img[i] = uint8_t(i * 7 % 251);
    std::vector<int32_t> labels(kN);
    std::vector<int64_t> ids(kN);
    std::vector<uint8_t> truth(kN, 0);
    for (int i = 0; i < kN; ++i) labels[i] = i % kClasses, ids[i] = 100 + i, truth[i] = i % 7 == 0;
    f.write_small<uint8_t>("/train/images", {kN, kH, kW, kC}, img);
    f.write_small<int32_t>("/train/labels", {kN}, labels);
    f.write_small<int64_t>("/train/sample_id", {kN}, ids);
    f.write_small<uint8_t>("/train/noise_truth", {kN}, truth);
    f.write_small<int32_t>("/test/labels", {6}, std::vector<int32_t>(6, 0));
    f.set_attr("/", "num_classes", int64_t(kClasses));
    f.set_attr("/", "class_names", std::vector<std::string>{"cat", "dog", "bird, small"});
    f.set_attr("/", "kind", std::string("image"));
  }
  {
    auto f = h5::File::create(dir + "/embedding.h5");
    h5::stamp(f, schema::kEmbedding, "run: {}\n");
    std::vector<float> e(kN * 2);
    std::vector<int32_t> labels(kN);
    std::vector<int64_t> ids(kN);
    for (int i = 0; i < kN; ++i) {
      labels[i] = i % kClasses, ids[i] = 100 + i;
      e[2 * i] = float(labels[i] * 10 + (i % 5)), e[2 * i + 1] = float((i * 3) % 11);
    }
    f.write_small<float>("/embedding", {kN, 2}, e);
    f.write_small<int32_t>("/labels", {kN}, labels);
    f.write_small<int64_t>("/sample_id", {kN}, ids);
    f.set_attr("/", "method", std::string("tsne"));
    f.set_attr("/", "kl_divergence", 0.5);
    f.set_attr("/", "knn_preservation", 0.9);
    f.set_attr("/", "trustworthiness", 0.95);
    f.set_attr("/", "perplexity", 30.0);
  }
  if (with_filter) {
    auto f = h5::File::create(dir + "/filter.h5");
    h5::stamp(f, schema::kFilter, "run: {}\n");
    std::vector<int32_t> cl(kN);
    std::vector<uint8_t> keep(kN);
    std::vector<int64_t> ids(kN);
    for (int i = 0; i < kN; ++i)
      cl[i] = i % 7 == 0 ? -1 : i % kClasses, keep[i] = cl[i] >= 0, ids[i] = 100 + i;
    f.write_small<int32_t>("/cluster", {kN}, cl);
    f.write_small<uint8_t>("/keep", {kN}, keep);
    f.write_small<uint8_t>("/random_keep", {kN}, keep);
    f.write_small<int64_t>("/sample_id", {kN}, ids);
    f.write_small<int32_t>("/per_class/class", {3}, {0, 1, 2});  // int32 as cluster_filter
    f.write_small<int64_t>("/per_class/samples", {3}, {10, 10, 10});
    f.write_small<int64_t>("/per_class/clusters", {3}, {2, 1, 3});
    f.write_small<int64_t>("/per_class/noise", {3}, {2, 1, 2});
    f.write_small<double>("/per_class/removed_pct", {3}, {20.0, 10.0, 20.0});
    f.set_attr("/", "method", std::string("dbscan"));
    f.set_attr("/", "eps", 0.5);
    f.set_attr("/", "min_samples", int64_t(5));
    if (scored) {
      f.set_attr("/", "noise_precision", 0.75);
      f.set_attr("/", "noise_recall", 0.6);
    } else {
      f.create_group("/noise_estimate");
      f.set_attr("/noise_estimate", "total", int64_t(4));
      f.set_attr("/noise_estimate", "flag_total", int64_t(5));
    }
    // Two detectors compared, as cluster_filter writes them with a ground truth.
    struct Det {
      const char* method;
      int64_t flagged, hits;
      double p, r, f1, ap;
      std::vector<float> pr;
    };
    for (const Det& d : {Det{"dbscan", 8, 6, 0.75, 0.6, 0.6667, 0.7, {1, 1, .2f, .5f, .75f, .6f, 0, .3f, 1}},
                         Det{"knn", 10, 9, 0.9, 0.9, 0.9, 0.95, {1, 1, .5f, .4f, .9f, .9f}}}) {
      const std::string g = std::string("/detectors/") + d.method;
      f.create_group(g);
      // Scores: the truly noisy rows (i % 7 == 0) highest, later rows lower.
      std::vector<float> score(kN);
      for (int i = 0; i < kN; ++i) score[i] = (i % 7 == 0 ? 2.0f : 1.0f) - 0.01f * float(i);
      f.write_small<float>(g + "/score", {kN}, score);
      f.write_small<uint8_t>(g + "/flag", {kN}, keep);
      if (scored) f.write_small<float>(g + "/pr", {d.pr.size() / 3, 3}, d.pr);
      f.set_attr(g, "inputs", std::string(d.method) + " inputs");
      f.set_attr(g, "flagged", d.flagged);
      if (!scored) continue;
      f.set_attr(g, "hits", d.hits);
      f.set_attr(g, "truth", int64_t(10));
      f.set_attr(g, "precision", d.p);
      f.set_attr(g, "recall", d.r);
      f.set_attr(g, "f1", d.f1);
      f.set_attr(g, "average_precision", d.ap);
    }
  }
}

// 3 arms x 2 batches x 2 seeds; ranks 1, 2, 4 by seed/batch for the throughput table.
// Numbered as kGrid numbers them (arm fastest): a result belongs to the report's grid only
// at its own index.
const char* const kGrid = "scaled.sweep={global_batch: [16, 64], seed: [1, 2], "
                          "arm: [full, filtered, random]}";
void write_runs(const std::string& dir) {
  int index = 0;
  for (int64_t b : kBatches)
    for (int seed = 1; seed <= 2; ++seed)
      for (auto& arm : kArms) {
        std::string rd = dir + "/sweep/run-" + std::to_string(index++);
        fs::create_directories(rd);
        int64_t ranks = b == 16 ? 1 : seed == 1 ? 2 : 4;
        Json j = {{"arm", arm},
                  {"global_batch", b},
                  {"seed", seed},
                  {"ranks", ranks},
                  {"per_rank_batch", b / ranks},
                  {"final_test_acc", acc_of(arm, b, seed)},
                  {"best_test_acc", acc_of(arm, b, seed) + 0.01},
                  {"train_acc", acc_of(arm, b, seed) + 0.1},
                  {"gen_gap", 0.1},
                  {"time_to_best_s", 12.5},
                  {"images_per_s", 100.0 * ranks * (ranks == 4 ? 0.8 : 1.0)},
                  {"images_per_s_per_rank", 100.0 * (ranks == 4 ? 0.8 : 1.0)},
                  {"weight_decay", 5e-4},
                  {"lr", 0.1},
                  {"samples_used", 25}};
        std::ofstream(rd + "/result.json") << j.dump(2);
        std::ofstream(rd + "/metrics.jsonl") << "{\"epoch\":1}\n{\"epoch\":2}\n";
      }
}

std::string make_run(const std::string& name, bool with_filter = true, bool scored = true) {
  std::string dir = test::scratch_dir("report_" + name);
  write_h5_inputs(dir, with_filter, scored);
  write_runs(dir);
  fs::create_directories(dir + "/pretrain");
  std::ofstream(dir + "/pretrain/metrics.jsonl")
      << "{\"epoch\":1,\"train_loss\":2.0,\"train_acc\":0.3,\"test_loss\":2.1,\"test_acc\":0.28,"
         "\"images_per_s\":500,\"images_per_s_per_rank\":250}\n"
         "{\"epoch\":2,\"train_loss\":1.5,\"train_acc\":0.5,\"test_loss\":1.6,\"test_acc\":0.45,"
         "\"images_per_s\":510,\"images_per_s_per_rank\":255}\n";
  return dir;
}

int run_report(const std::string& dir, const std::string& extra, std::string* out) {
  return test::run_command(
      test::tool_path("report") + " --run-dir " + dir +
          " --set run.name=fake --set scaled.model.arch=mlp --set scaled.model.hidden=[64,64]"
          " --set scaled.global_batch=64 --set '" + kGrid + "' " + extra,
      out);
}

}  // namespace

TEST(ReportTool, FullRunDirectoryGivesTablesFiguresAndMatchingCsv) {
  std::string dir = make_run("full");
  std::string out;
  ASSERT_EQ(run_report(dir, "", &out), 0) << out;
  const std::string rep = dir + "/report";
  ASSERT_TRUE(fs::exists(rep + "/index.html"));
  ASSERT_TRUE(fs::exists(rep + "/index.md"));
  ASSERT_TRUE(fs::exists(rep + "/report.config.yaml"));
  std::string html = slurp(rep + "/index.html"), md = slurp(rep + "/index.md");

  // Every local file the HTML references exists and is non-empty.
  std::regex ref("(?:src|href)=\"([^\"#][^\"]*)\"");
  int refs = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator();
       ++it, ++refs) {
    std::string p = rep + "/" + (*it)[1].str();
    EXPECT_TRUE(fs::exists(p) && fs::file_size(p) > 0) << p;
  }
  EXPECT_GE(refs, 12);
  // The detectors side by side, the one used first, with their PR curves.
  EXPECT_NE(md.find("| dbscan (used) | dbscan inputs | 8 | 6 | 75.00 | 60.00 | 0.667 | 0.700 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| knn | knn inputs | 10 | 9 | 90.00 | 90.00 | 0.900 | 0.950 |"),
            std::string::npos)
      << md;
  EXPECT_EQ(read_csv(rep + "/data/detector_pr.csv").size(), 1u + 3 + 2);
  // The most suspicious samples: 8 of each class's 10, by the chosen detector's score, the
  // truly noisy ones (highest scores) first, as thumbnails 6x upscaled (8 px -> 48) in a
  // 3 px frame: an 8 x 3 grid of 54 px cells.
  {
    auto sus = read_csv(rep + "/data/suspicious.csv");
    ASSERT_EQ(sus.size(), 1u + 3 * 8);
    std::map<std::string, std::vector<int64_t>> ids_of;
    for (size_t r = 1; r < sus.size(); ++r) {
      const int64_t id = std::stoll(sus[r][2]), i = id - 100;
      EXPECT_EQ(sus[r][5], i % 7 == 0 ? "wrong" : "right") << id;
      ids_of[sus[r][0]].push_back(i);
    }
    ASSERT_EQ(ids_of.size(), 3u);
    // class "cat" (0): rows 0, 21 noisy, then 3, 6, 9, 12, 15, 18 by falling score.
    EXPECT_EQ(ids_of["cat"], (std::vector<int64_t>{0, 21, 3, 6, 9, 12, 15, 18}));
    const std::string png = slurp(rep + "/figures/suspicious.png");
    ASSERT_GT(png.size(), 24u);
    auto be32 = [&](size_t at) {
      return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) |
             (uint32_t(uint8_t(png[at + 2])) << 8) | uint32_t(uint8_t(png[at + 3]));
    };
    EXPECT_EQ(png.substr(1, 3), "PNG");
    EXPECT_EQ(be32(16), 8u * 54);  // IHDR width
    EXPECT_EQ(be32(20), 3u * 54);  // IHDR height
    EXPECT_NE(html.find("figures/suspicious.png"), std::string::npos);
  }
  for (const char* fig : {"detector_pr", "accuracy_vs_batch", "gen_gap_vs_batch", "tsne_scatter", "tsne_per_class",
                          "throughput_vs_ranks", "pretrain_curve", "predicted_scaling"}) {
    EXPECT_NE(html.find(std::string("figures/") + fig + ".png"), std::string::npos) << fig;
    EXPECT_NE(md.find(std::string("figures/") + fig + ".png"), std::string::npos) << fig;
    // A real PNG: the signature bytes.
    EXPECT_EQ(slurp(rep + "/figures/" + fig + ".png").substr(1, 3), "PNG") << fig;
  }

  // Accuracy CSV: mean/std over the two seeds, computed here from the inputs.
  auto acc = read_csv(rep + "/data/accuracy_vs_batch.csv");
  ASSERT_EQ(acc.size(), 1u + kArms.size() * kBatches.size());
  EXPECT_EQ(acc[0][0], "arm");
  for (size_t r = 1; r < acc.size(); ++r) {
    std::string arm = acc[r][0];
    int64_t b = std::stoll(acc[r][1]);
    double a1 = acc_of(arm, b, 1), a2 = acc_of(arm, b, 2), mean = (a1 + a2) / 2;
    double sd = std::sqrt(((a1 - mean) * (a1 - mean) + (a2 - mean) * (a2 - mean)) / 1.0);
    EXPECT_EQ(acc[r][3], "2");
    EXPECT_NEAR(std::stod(acc[r][4]), mean, 1e-6) << arm << " " << b;
    EXPECT_NEAR(std::stod(acc[r][5]), sd, 1e-6);
    EXPECT_NEAR(std::stod(acc[r][6]), std::min(a1, a2), 1e-6);
  }
  // The comparison table: per-arm means with the 95 % t half-width over the two seeds
  // (t_{0.975,1} = 12.706, sd = 0.2828: 12.706 * 0.2828 / sqrt(2) = 2.54), and filtered -
  // full = +2.00 points in both seeds (a zero-width interval) at every batch.
  EXPECT_NE(md.find("| 16 | 80.60 ± 2.54 | 82.60 ± 2.54 | 77.60 ± 2.54 | +2.00 | +2.00 to +2.00 "
                    "| 2 | +5.00 | +5.00 to +5.00 | 2 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("Global batch 64 — vs full: filtering helped"), std::string::npos) << md;

  // Table I: per-class rows with class names, totals row, precision/recall.
  auto red = read_csv(rep + "/data/data_reduction.csv");
  ASSERT_EQ(red.size(), 4u);
  EXPECT_EQ(red[3][1], "bird, small");
  EXPECT_EQ(red[2][3], "1");
  EXPECT_EQ(red[3][4], "2");
  EXPECT_NE(md.find("| all | total | 30 | 6 | 5 | 16.67 |"), std::string::npos) << md;
  EXPECT_NE(md.find("precision 75.00 %, recall 60.00 %"), std::string::npos);
  // Recomputed from dataset noise_truth (i % 7 == 0) and cluster -1 (i % 7 == 0): 5 of 5.
  EXPECT_NE(md.find("| 5 | 5 | 5 | 100.00 | 100.00 |"), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(dir + "/report.config.yaml"));

  // t-SNE points joined with the filter by sample_id: noise exactly where cluster == -1.
  auto pts = read_csv(rep + "/data/tsne_points.csv");
  ASSERT_EQ(pts.size(), size_t(kN) + 1);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(pts[i + 1][0], std::to_string(100 + i));
    EXPECT_EQ(pts[i + 1][5], i % 7 == 0 ? "1" : "0") << i;
  }
  std::string inter = slurp(rep + "/tsne_interactive.html");
  EXPECT_NE(inter.find("id=\"points-data\""), std::string::npos);
  EXPECT_EQ(inter.find("http://"), std::string::npos);  // no network
  EXPECT_EQ(inter.find("https://"), std::string::npos);
  EXPECT_NE(inter.find("\"w\":8"), std::string::npos);  // 8x8 thumbnails carried inline

  // Throughput: tau_ref = 100 img/s at 1 rank; 4 ranks run at 320 -> 80 % efficiency.
  auto thr = read_csv(rep + "/data/throughput.csv");
  ASSERT_EQ(thr.size(), 4u);
  EXPECT_EQ(thr[3][0], "4");
  EXPECT_NEAR(std::stod(thr[3][2]), 320.0, 1e-9);
  EXPECT_NEAR(std::stod(thr[3][6]), 0.8, 1e-9);
  EXPECT_NEAR(std::stod(thr[2][6]), 1.0, 1e-9);

  // Estimates: MLP 192-64-64-3 has 16707 parameters; ring allreduce at p=2 of 4M bytes over
  // 100 Gbit/s + 2 latencies of 5 us; r = 100 img/s (median at 1 rank).
  EXPECT_NE(md.find("| parameters M | 16707 |"), std::string::npos) << md;
  auto sc = read_csv(rep + "/data/predicted_scaling.csv");
  ASSERT_GE(sc.size(), 3u);
  EXPECT_EQ(sc.back()[0], "1536");
  const double g = 4.0 * 16707, comm2 = 2.0 * 1 / 2 * g / (100e9 / 8) + 2 * 1 * 5e-6;
  EXPECT_NEAR(std::stod(sc[2][4]), comm2, 1e-9);
  EXPECT_NEAR(std::stod(sc[2][3]), 32.0 / 100.0, 1e-9);  // b = 64/2 at 100 img/s
  EXPECT_NEAR(std::stod(sc[2][7]), 0.32 / (0.32 + comm2), 1e-6);
  EXPECT_EQ(sc.back()[2], "0");  // 64 / 1536 < 1 sample per rank
}

TEST(ReportTool, MissingInputsGiveNotesNotErrors) {
  std::string dir = test::scratch_dir("report_empty");
  std::string out;
  ASSERT_EQ(run_report(dir, "--set data.source=cifar10", &out), 0) << out;
  std::string md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("no dataset.h5"), std::string::npos);
  EXPECT_NE(md.find("No filter.h5"), std::string::npos);
  EXPECT_NE(md.find("No train_scaled results"), std::string::npos);
  // CIFAR-10 from the config: 50000 x 3072 bytes; no throughput known -> no scaling table.
  EXPECT_NE(md.find("| training samples N | 50000 |"), std::string::npos) << md;
  EXPECT_NE(md.find("predicted scaling omitted"), std::string::npos);
}

// Without a truth to score the detectors against (real data, or a truth of all zeros), the
// report still says how many labels the confident joint thinks wrong and how many were
// flagged: on real data it is the only figure of the noise there is.
TEST(ReportTool, NoiseEstimateIsShownWithoutScoredDetectors) {
  std::string dir = make_run("estimate_unscored", true, false);
  std::string out;
  ASSERT_EQ(run_report(dir, "", &out), 0) << out;
  std::string md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("Estimated wrong labels (confident joint): 4; the calibrated decisions "
                    "flag 5"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("the ground truth has"), std::string::npos) << md;
  EXPECT_EQ(md.find("Noise detectors compared against the ground truth"), std::string::npos) << md;
  EXPECT_EQ(md.find("Caution"), std::string::npos) << md;
  // Where cluster_filter found the early model's own error as large as the estimate, the
  // report repeats its caution with the held-out figure.
  {
    auto f = h5::File::open_rw(dir + "/filter.h5");
    f.set_attr("/noise_estimate", "heldout_peak_accuracy", 0.8);
    f.set_attr("/noise_estimate", "in_doubt", int64_t(1));
  }
  ASSERT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("**Caution: this count may be far off.** The early model misses 20.0 %"),
            std::string::npos)
      << md;
  // The test split's count: shown; where it capped the count, the caution gives way to it.
  {
    auto f = h5::File::open_rw(dir + "/filter.h5");
    f.set_attr("/noise_estimate", "test_split_wrong", 3.4);
    f.set_attr("/noise_estimate", "test_split_standard_error", 0.6);
    f.set_attr("/noise_estimate", "test_split_cap", int64_t(-1));
  }
  ASSERT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("on the held-out training samples, puts 3 ± 1 labels wrong"), std::string::npos)
      << md;
  EXPECT_NE(md.find("It bounds the count only where"), std::string::npos) << md;
  EXPECT_NE(md.find("Caution"), std::string::npos) << md;
  {
    auto f = h5::File::open_rw(dir + "/filter.h5");
    f.set_attr("/noise_estimate", "test_split_cap", int64_t(5));
  }
  ASSERT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("the calibrated decisions flag 5 (capped by the test split's count below)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("flag at most that estimate plus two standard errors, 5 (filter.test_bound)"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("Caution"), std::string::npos) << md;
  EXPECT_EQ(md.find("Its count per given label bounded"), std::string::npos) << md;
  EXPECT_EQ(md.find("read the noise's label transition from it"), std::string::npos) << md;
  {
    auto f = h5::File::open_rw(dir + "/filter.h5");
    f.set_attr("/noise_estimate", "transition_source", std::string("test_split"));
  }
  ASSERT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("the posterior detectors read the noise's label transition from it"),
            std::string::npos)
      << md;
  // A class its own label's count kept under filter.max_flagged is named with its bound (the
  // other class's -1: not bounded).
  {
    auto f = h5::File::open_rw(dir + "/filter.h5");
    f.write_small<int64_t>("/noise_estimate/test_split_class_cap", {3}, {-1, 7, -1});
  }
  ASSERT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("Its count per given label bounded dog at 7: the confident joint and the knn "
                    "vote counted more than filter.max_flagged allows there"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find(" at -1"), std::string::npos) << md;
  {
    auto f = h5::File::open_rw(dir + "/filter.h5");
    f.set_attr("/noise_estimate", "test_split_wrong", -30.0);  // plainly below zero
    f.set_attr("/noise_estimate", "test_split_cap", int64_t(-1));
    f.set_attr("/noise_estimate", "test_split_follows_model", int64_t(1));
  }
  ASSERT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("**Caution: the wrong labels may be far more than flagged.**"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("**Caution: this count may be far off.**"), std::string::npos) << md;
  // Where its magnitude raised the count (filter.follows_model_count), the caution says what
  // the count rests on and what it flags in the harder-test-split case.
  {
    auto f = h5::File::open_rw(dir + "/filter.h5");
    f.set_attr("/noise_estimate", "test_split_raise", int64_t(30));
    f.set_attr("/noise_estimate", "flag_total", int64_t(30));
  }
  ASSERT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("the calibrated decisions flag 30 (raised to the test split's count below "
                    "zero, below)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("**Caution: the count rests on the test split alone.**"), std::string::npos)
      << md;
  EXPECT_NE(md.find("The calibrated decisions flag 30, as many as the count is below zero "
                    "(filter.follows_model_count)"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("may be far more than flagged"), std::string::npos) << md;
  {
    auto f = h5::File::open_rw(dir + "/filter.h5");
    f.set_attr("/noise_estimate", "test_split_raise", int64_t(-1));
    f.set_attr("/noise_estimate", "flag_total", int64_t(5));
    f.set_attr("/noise_estimate", "test_split_wrong", std::nan(""));  // not estimated
    f.set_attr("/noise_estimate", "test_split_follows_model", int64_t(0));
  }
  // With a known rate (filter.noise_rate) the count is the user's, and the report says so
  // (and the caution about the estimate no longer applies to it).
  {
    auto f = h5::File::open_rw(dir + "/filter.h5");
    f.set_attr("/noise_estimate", "noise_rate", 0.25);
  }
  ASSERT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("Estimated wrong labels (confident joint): 4; the ranked decisions flag 5, "
                    "the share 0.25 given by filter.noise_rate (not estimated"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("the larger of that estimate"), std::string::npos) << md;
  EXPECT_EQ(md.find("Caution"), std::string::npos) << md;
}

// The pretraining section names the early model the features come from and whether the run
// memorised its labels (pretrain/model_early.json); a memorising cross-entropy run gets the
// measured advice to try gce, a gce run or one that did not memorise does not; a malformed
// field is an error naming the file.
TEST(ReportTool, PretrainingSaysWhetherTheRunMemorisedAndWhenToTryGce) {
  std::string dir = make_run("early_model");
  auto early = [&](const std::string& extra) {
    std::ofstream(dir + "/pretrain/model_early.json")
        << "{\"epoch\":5,\"holdout_acc\":0.7417,\"peak_acc\":0.7483,\"peak_epoch\":6,"
           "\"train_acc\":1.0,\"pick\":\"guarded\"" +
               extra + "}\n";
  };
  auto report = [&] {
    std::string out;
    EXPECT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
    return slurp(dir + "/report/index.md");
  };
  const std::string gce = "pretrain.loss: gce (the generalized cross-entropy) found more";
  const std::string second = "It is the second pretraining of this run";
  early(",\"memorised\":true");  // no loss field: a file from before it, cross-entropy
  std::string md = report();
  EXPECT_NE(md.find("early-learning model (pretrain/model_early.h5): epoch 5, held-out accuracy "
                    "74.17 % (against the given labels, wrong ones included), the guarded pick "
                    "(the highest: 74.83 % at epoch 6)."),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("The run memorised its training labels (last training accuracy 100.00 % "
                    "against the held-out peak 74.83 %)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find(gce), std::string::npos) << md;
  EXPECT_EQ(md.find(second), std::string::npos) << md;
  early(",\"memorised\":true,\"loss\":\"gce\"");
  md = report();
  EXPECT_NE(md.find("The run memorised its training labels"), std::string::npos) << md;
  EXPECT_EQ(md.find(gce), std::string::npos) << md;
  EXPECT_EQ(md.find(second), std::string::npos) << md;
  // Where the file records the training accuracy at the guarded epoch (where the held-out
  // curve last rose), the sentence gives it: the test's second part.
  early(
      ",\"memorised\":false,\"loss\":\"cross_entropy\",\"guarded_epoch\":5,"
      "\"guarded_train_acc\":0.9905");
  md = report();
  EXPECT_NE(md.find("The run did not memorise its training labels (last training accuracy "
                    "100.00 % against the held-out peak 74.83 %; 99.05 % at epoch 5, where the "
                    "held-out accuracy last rose measurably)."),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find(gce), std::string::npos) << md;
  // pretrain.loss auto's second run: what the first did, then this one's verdict.
  early(
      ",\"memorised\":false,\"loss\":\"gce\",\"first_pass\":{\"loss\":\"cross_entropy\","
      "\"memorised\":true,\"train_acc\":0.9987,\"peak_acc\":0.7302,\"elapsed_s\":12.6,"
      "\"guarded_epoch\":6,\"guarded_train_acc\":0.7945}");
  md = report();
  EXPECT_NE(md.find(second + ": the first, with the cross-entropy, memorised its training labels "
                             "(last training accuracy 99.87 % against the held-out peak 73.02 %; "
                             "79.45 % at epoch 6, where the held-out accuracy last rose "
                             "measurably), so pretrain.loss: auto trained again with gce"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("the first took 13 s."), std::string::npos) << md;
  EXPECT_EQ(md.find("dotted: the first run"), std::string::npos) << md;  // no metrics of it
  // With the first run's metrics, its curve is drawn beside the kept run's.
  std::ofstream(dir + "/pretrain/metrics_first_pass.jsonl")
      << "{\"epoch\":1,\"train_acc\":0.5,\"test_acc\":0.4}\n"
         "{\"epoch\":2,\"train_acc\":0.99,\"test_acc\":0.38}\n";
  md = report();
  EXPECT_NE(md.find("dotted: the first run, which memorised"), std::string::npos) << md;
  const std::string csv = slurp(dir + "/report/data/pretrain_first_pass_metrics.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
  EXPECT_NE(csv.find("0.99"), std::string::npos) << csv;
  std::ofstream(dir + "/pretrain/metrics_first_pass.jsonl")
      << "{\"epoch\":1,\"train_acc\":\"x\"}\n";
  std::string bad_metrics;
  EXPECT_EQ(run_report(dir, "--overwrite", &bad_metrics), 1) << bad_metrics;
  EXPECT_NE(bad_metrics.find("metrics_first_pass.jsonl: line 1: field 'train_acc': expected a "
                             "number, found string"),
            std::string::npos)
      << bad_metrics;
  fs::remove(dir + "/pretrain/metrics_first_pass.jsonl");
  EXPECT_NE(md.find("The run did not memorise its training labels"), std::string::npos) << md;
  EXPECT_EQ(md.find(gce), std::string::npos) << md;
  early(",\"loss\":\"gce\",\"first_pass\":{\"train_acc\":0.9}");
  std::string bad;
  EXPECT_EQ(run_report(dir, "--overwrite", &bad), 1) << bad;
  EXPECT_NE(bad.find("model_early.json (first_pass): field 'peak_acc' missing"), std::string::npos)
      << bad;
  early(",\"memorised\":false,\"loss\":\"cross_entropy\"");
  md = report();
  EXPECT_NE(md.find("The run did not memorise its training labels"), std::string::npos) << md;
  EXPECT_EQ(md.find(gce), std::string::npos) << md;
  early(",\"memorised\":false,\"train_acc\":\"high\"");
  std::string out;
  EXPECT_EQ(run_report(dir, "--overwrite", &out), 1) << out;
  EXPECT_NE(out.find("model_early.json: field 'train_acc': expected a number, found string"),
            std::string::npos)
      << out;
}

TEST(ReportTool, MalformedResultIsAnErrorNamingTheFileAndNoReport) {
  std::string dir = make_run("bad_json");
  std::ofstream(dir + "/sweep/run-3/result.json") << "{\"arm\": \"full\", ";
  std::string out;
  EXPECT_EQ(run_report(dir, "", &out), 1) << out;
  EXPECT_NE(out.find("sweep/run-3/result.json: not valid JSON"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/report"));
  for (auto& e : fs::directory_iterator(dir))  // no temporary left behind either
    EXPECT_EQ(e.path().filename().string().find(".report.tmp"), std::string::npos);

  std::ofstream(dir + "/sweep/run-3/result.json")
      << "{\"arm\": \"full\", \"global_batch\": \"big\", \"final_test_acc\": 0.5}";
  EXPECT_EQ(run_report(dir, "", &out), 1);
  EXPECT_NE(out.find("field 'global_batch': expected an integer, found string"), std::string::npos)
      << out;
  std::ofstream(dir + "/sweep/run-3/result.json")
      << "{\"arm\": \"everything\", \"global_batch\": 8, \"final_test_acc\": 0.5}";
  EXPECT_EQ(run_report(dir, "", &out), 1);
  EXPECT_NE(out.find("expected full, filtered or random"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir + "/report"));
}

TEST(ReportTool, WrongSchemaOrMissingDatasetIsAnError) {
  std::string dir = make_run("bad_schema");
  {
    auto f = h5::File::open_rw(dir + "/embedding.h5");
    f.set_attr("/", "schema", std::string("sieve.features/1"));
  }
  std::string out;
  EXPECT_EQ(run_report(dir, "", &out), 1) << out;
  EXPECT_NE(out.find("embedding.h5: schema is 'sieve.features/1', expected 'sieve.embedding/1'"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(dir + "/report"));

  std::string dir2 = make_run("bad_filter", /*with_filter=*/false);
  {
    auto f = h5::File::create(dir2 + "/filter.h5");
    h5::stamp(f, schema::kFilter, "");
    f.write_small<float>("/cluster", {3}, {0, 1, 2});  // wrong type
  }
  EXPECT_EQ(run_report(dir2, "", &out), 1) << out;
  EXPECT_NE(out.find("filter.h5"), std::string::npos) << out;
  EXPECT_NE(out.find("/cluster"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir2 + "/report"));
}

TEST(ReportTool, ExistingOutputNeedsOverwriteAndSvgWorks) {
  std::string dir = make_run("overwrite");
  std::string out;
  ASSERT_EQ(run_report(dir, "", &out), 0) << out;
  EXPECT_EQ(run_report(dir, "", &out), 2) << out;
  EXPECT_NE(out.find("--overwrite"), std::string::npos);
  ASSERT_EQ(run_report(dir, "--overwrite --set report.figure_format=svg", &out), 0) << out;
  EXPECT_NE(slurp(dir + "/report/figures/tsne_scatter.svg").find("<svg"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/report/figures/tsne_scatter.png"));  // old report replaced
}

// Issue 26, defect 2: results of an earlier grid stay in sweep/ when the grid shrinks or
// changes; only the results whose recorded config is the current grid's point of their
// index are used, the others are listed with the reason and never pooled.
TEST(ReportTool, ResultsOfAnEarlierGridAreListedNotPooled) {
  std::string dir = make_run("stale");
  // run-0 as train_scaled records it now: with its config (here 1 epoch), which the grid
  // below (2 epochs) does not have.
  {
    Json j = Json::parse(slurp(dir + "/sweep/run-0/result.json"));
    j["config"] = {{"scaled.epochs", "1"}, {"scaled.arm", "full"}};
    std::ofstream(dir + "/sweep/run-0/result.json") << j.dump(2);
  }
  std::string out;
  // The grid shrunk to the full arm at batch 16: run 0 is (16, seed 1, full) and run 1
  // (16, seed 2, full); the old run-1 is (16, seed 1, filtered), runs 2..11 lie outside.
  ASSERT_EQ(run_report(dir,
                       "--set 'scaled.sweep={global_batch: [16], seed: [1, 2], arm: [full]}'"
                       " --set scaled.epochs=2",
                       &out),
            0)
      << out;
  const std::string md = slurp(dir + "/report/index.md");
  EXPECT_NE(out.find("12 results in"), std::string::npos) << out;  // one warning line
  EXPECT_NE(md.find("Stale results: 12 result.json files"), std::string::npos) << md;
  EXPECT_NE(md.find("| sweep/run-0/result.json | scaled.epochs 1 (grid: 2) |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("sweep/run-1/result.json | scaled.arm filtered (grid: full), scaled.seed 1 "
                    "(grid: 2) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sweep/run-11/result.json | run 11 is outside the current grid (2 runs) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("No train_scaled results"), std::string::npos) << md;
  EXPECT_EQ(md.find("filtered − full ="), std::string::npos) << md;

  // The same grid at 2 epochs with run-0 re-run (its config now records 2 epochs): run 0
  // is used, alone; nothing of the filtered arm is compared.
  {
    Json j = Json::parse(slurp(dir + "/sweep/run-0/result.json"));
    j["config"]["scaled.epochs"] = "2";
    std::ofstream(dir + "/sweep/run-0/result.json") << j.dump(2);
  }
  ASSERT_EQ(run_report(dir,
                       "--overwrite --set 'scaled.sweep={global_batch: [16], seed: [1, 2], "
                       "arm: [full]}' --set scaled.epochs=2",
                       &out),
            0)
      << out;
  const std::string md2 = slurp(dir + "/report/index.md");
  EXPECT_NE(md2.find("| sweep/run-*/result.json | present | 1 finished runs; 11 stale, not used |"),
            std::string::npos)
      << md2;
  auto runs = read_csv(dir + "/report/data/runs.csv");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1][0], "0");
  EXPECT_EQ(runs[1][1], "full");
  EXPECT_EQ(md2.find("filtered − full ="), std::string::npos) << md2;
}

// A run's accuracy depends on its ranks (batch norm sees each rank's share of the batch;
// train_scaled --ranks-per-run): the report says how many the runs had, and warns once where
// a sweep mixes rank counts.
TEST(ReportTool, SaysTheRunsRanksAndWarnsWhereTheyDiffer) {
  std::string dir = make_run("ranks");  // ranks 1 (batch 16), 2 and 4 (batch 64)
  std::string out;
  ASSERT_EQ(run_report(dir, "", &out), 0) << out;
  std::string md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("12 runs read from " + dir +
                    "/sweep, trained on different numbers of ranks "
                    "(6 on 1, 3 on 2, 3 on 4)"),
            std::string::npos)
      << md;
  const std::string warning = "the sweep's runs trained on different numbers of ranks";
  EXPECT_NE(md.find(warning), std::string::npos) << md;
  size_t lines = 0;
  for (size_t at = out.find(warning); at != std::string::npos; at = out.find(warning, at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << out;

  // Every run on 2 ranks: said once, no warning.
  for (const auto& e : fs::directory_iterator(dir + "/sweep")) {
    Json j = Json::parse(slurp(e.path().string() + "/result.json"));
    j["ranks"] = 2;
    j["per_rank_batch"] = j["global_batch"].get<int64_t>() / 2;
    std::ofstream(e.path().string() + "/result.json") << j.dump(2);
  }
  ASSERT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("12 runs read from " + dir +
                    "/sweep, each trained on 2 rank(s) (per-rank batch = global / 2)"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find(warning), std::string::npos) << md;
  EXPECT_EQ(out.find(warning), std::string::npos) << out;
}

// precision: auto decides per machine and process, so the runs of one batch can train in
// different dtypes: runs.csv lists each run's, and the report notes each batch that mixes
// them, once; runs that agree, or record none, get no note.
TEST(ReportTool, NotesEachBatchWhoseRunsMixPrecisions) {
  std::string dir = make_run("precision");
  std::string out;
  ASSERT_EQ(run_report(dir, "", &out), 0) << out;
  const std::string note = "trained in bf16";
  EXPECT_EQ(slurp(dir + "/report/index.md").find(note), std::string::npos);
  for (const auto& e : fs::directory_iterator(dir + "/sweep")) {
    Json j = Json::parse(slurp(e.path().string() + "/result.json"));
    j["precision"] = j["global_batch"] == 64 && j["seed"] == 1 ? "bf16" : "fp32";
    std::ofstream(e.path().string() + "/result.json") << j.dump(2);
  }
  ASSERT_EQ(run_report(dir, "--overwrite", &out), 0) << out;
  const std::string md = slurp(dir + "/report/index.md");
  const std::string mixed =
      "The runs at global batch 64 trained in bf16 (3 runs) and fp32 (3 runs)";
  EXPECT_NE(md.find(mixed), std::string::npos) << md;
  EXPECT_EQ(md.find(mixed, md.find(mixed) + 1), std::string::npos) << md;
  EXPECT_EQ(md.find("global batch 16 trained in"), std::string::npos) << md;
  auto runs = read_csv(dir + "/report/data/runs.csv");
  ASSERT_EQ(runs.size(), 13u);
  const auto col = std::find(runs[0].begin(), runs[0].end(), "precision") - runs[0].begin();
  ASSERT_LT(size_t(col), runs[0].size());
  int bf16 = 0;
  for (size_t i = 1; i < runs.size(); ++i) bf16 += runs[i][col] == "bf16";
  EXPECT_EQ(bf16, 3);
}

// The smaller arms take fewer optimizer steps at equal epochs: the report says what the runs
// held equal (scaled.budget), lists each run's epochs and steps, and warns where they differ.
TEST(ReportTool, SaysWhatTheArmsHeldEqual) {
  std::string dir = make_run("budget");
  auto set_runs = [&](const std::function<void(Json&)>& edit) {
    for (const auto& e : fs::directory_iterator(dir + "/sweep")) {
      Json j = Json::parse(slurp(e.path().string() + "/result.json"));
      edit(j);
      std::ofstream(e.path().string() + "/result.json") << j.dump(2);
    }
  };
  // Equal epochs: the smaller arms took fewer steps.
  set_runs([](Json& j) {
    j["config"]["scaled.budget"] = "epochs";
    j["epochs"] = 2;
    j["steps"] = j["arm"] == "full" ? 8 : 6;
  });
  std::string out;
  ASSERT_EQ(run_report(dir, "", &out), 0) << out;
  std::string md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("Every arm trained the same epochs (scaled.budget: epochs)"), std::string::npos)
      << md;
  auto runs = read_csv(dir + "/report/data/runs.csv");
  ASSERT_EQ(runs.size(), 13u);
  const size_t cols = runs[0].size();
  ASSERT_GE(cols, 2u);
  EXPECT_EQ(runs[0][cols - 2], "epochs");
  EXPECT_EQ(runs[0][cols - 1], "steps");
  for (size_t i = 1; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i][cols - 2], "2") << i;
    EXPECT_EQ(runs[i][cols - 1], runs[i][1] == "full" ? "8" : "6") << i;
  }

  // Equal steps: every run recorded scaled.budget: steps (the smaller arms one more epoch),
  // and the report's config says so too.
  set_runs([](Json& j) {
    j["config"]["scaled.budget"] = "steps";
    j["epochs"] = j["arm"] == "full" ? 2 : 3;
    j["steps"] = j["arm"] == "full" ? 8 : 9;
  });
  ASSERT_EQ(run_report(dir, "--overwrite --set scaled.budget=steps", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("Every arm trained about as many optimizer steps as the full arm"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("Every arm trained the same epochs"), std::string::npos) << md;

  // One run that recorded no budget (an older train_scaled: epochs) among them: said, not
  // pooled silently.
  {
    Json j = Json::parse(slurp(dir + "/sweep/run-1/result.json"));
    j.erase("config");
    j["epochs"] = 30;  // what an older result is matched on: the grid's scaled.epochs
    std::ofstream(dir + "/sweep/run-1/result.json") << j.dump(2);
  }
  ASSERT_EQ(run_report(dir, "--overwrite --set scaled.budget=steps", &out), 0) << out;
  md = slurp(dir + "/report/index.md");
  EXPECT_NE(md.find("The runs differ in scaled.budget"), std::string::npos) << md;
}
