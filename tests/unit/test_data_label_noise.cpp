// data.label_noise (libcore/data/label_noise.hpp): the kinds of injected noise on
// constructed images whose answer is known (a look-alike class pair, two overlapping classes
// with a known ambiguous band), then through shard_dataset (ranks, synthetic data, config).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "data/label_noise.hpp"
#include "data/quick_model.hpp"
#include "pipeline/schema.hpp"
#include "test_data_util.hpp"

using namespace sieve;
using namespace sieve::data;
using namespace sieve::test::data;

namespace {

// Training images held in memory (8x8x1), no test split.
class MemorySource final : public Source {
 public:
  MemorySource(std::vector<uint8_t> images, std::vector<int32_t> labels, int64_t classes)
      : images_(std::move(images)), labels_(std::move(labels)) {
    meta_.kind = Kind::Image;
    meta_.source = "memory";
    meta_.n[0] = int64_t(labels_.size());
    meta_.height = meta_.width = 8;
    meta_.channels = 1;
    meta_.num_classes = classes;
    for (int64_t c = 0; c < classes; ++c) meta_.class_names.push_back(cat("c", c));
  }
  const DatasetMeta& meta() const override { return meta_; }
  void produce(Split, int64_t row0, int64_t count, const Rows& out) const override {
    if (out.images) std::copy_n(images_.data() + row0 * 64, count * 64, out.images);
    std::copy_n(labels_.data() + row0, count, out.labels);
  }

 private:
  std::vector<uint8_t> images_;
  std::vector<int32_t> labels_;
  DatasetMeta meta_;
};

struct Images {
  std::vector<uint8_t> px;
  std::vector<int32_t> labels;
  std::vector<double> t;  // the overlap case: each image's position along the class axis
};

uint8_t clamp_px(double v) {
  return uint8_t(std::clamp(std::lround(v), 0L, 255L));
}

// Four classes of unequal sizes; classes 1 and 2 differ by one faint pixel, so a model
// confuses them with each other far more than with anything else.
Images look_alike() {
  const int sizes[4] = {60, 100, 140, 100};
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0, 20);
  Images im;
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < sizes[c]; ++i) {
      for (int p = 0; p < 64; ++p) {
        const int y = p / 8, x = p % 8;
        double v = 60;
        if (c == 0 && x < 4) v = 200;
        if ((c == 1 || c == 2) && y < 4) v = 200;
        if (c == 2 && p == 63) v += 12;
        if (c == 3 && (x + y) % 2) v = 200;
        im.px.push_back(clamp_px(v + noise(rng)));
      }
      im.labels.push_back(c);
    }
  return im;
}

// Classes 0 and 1 (equally many) lie along one axis (brightness of the left half against the
// right): class 0 at t in [-1, -0.4], class 1 at [0.4, 1], except 10 of each on the other
// side of the midpoint (class 0 at [0.1, 0.3], class 1 at [-0.3, -0.1]): those 20 are the
// ambiguous images. Class 2 (a checkerboard) is far from both.
Images overlap() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> noise(0, 2);
  Images im;
  for (int i = 0; i < 400; ++i) {
    const int c = i % 3;
    const bool ambiguous = c < 2 && i < 30;
    const double side = c == 0 ? -1 : 1;
    const double t = ambiguous ? -side * (0.1 + 0.2 * u(rng)) : side * (0.4 + 0.6 * u(rng));
    for (int p = 0; p < 64; ++p) {
      const int y = p / 8, x = p % 8;
      const double v = c == 2 ? ((x + y) % 2 ? 220 : 30) : 128 + (x < 4 ? 60 : -60) * t;
      im.px.push_back(clamp_px(v + noise(rng)));
    }
    im.labels.push_back(c);
    im.t.push_back(t);
  }
  return im;
}

struct Result {
  std::vector<int32_t> labels, clean;
  std::vector<uint8_t> noise;
  DatasetMeta meta;
  std::vector<int64_t> flipped() const {
    std::vector<int64_t> r;
    for (size_t i = 0; i < labels.size(); ++i)
      if (noise[i] == kNoiseLabel) r.push_back(int64_t(i));
    return r;
  }
};

Result inject(const Images& im, int64_t classes, const LabelNoiseOptions& opt) {
  auto src = with_label_noise(std::make_unique<MemorySource>(im.px, im.labels, classes), opt,
                              Comm::world());
  Result r;
  r.meta = src->meta();
  const size_t n = im.labels.size();
  r.labels.resize(n);
  r.clean.resize(n);
  r.noise.resize(n);
  std::vector<uint8_t> px(n * 64);
  Rows rows;
  rows.images = px.data();
  rows.labels = r.labels.data();
  rows.clean_labels = r.clean.data();
  rows.noise = r.noise.data();
  src->produce(Split::Train, 0, int64_t(n), rows);
  EXPECT_EQ(px, im.px);
  EXPECT_EQ(r.clean, im.labels);
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(r.noise[i] == kNoiseLabel, r.labels[i] != r.clean[i]) << i;
  return r;
}

LabelNoiseOptions options(const std::string& kind, double rate, uint64_t seed) {
  LabelNoiseOptions o;
  o.kind = kind;
  o.rate = rate;
  o.seed = seed;
  return o;
}

}  // namespace

TEST(DataLabelNoise, ProportionalCountsAreExactAndLargestRemaindersFirst) {
  EXPECT_EQ(proportional_counts({10, 20, 30}, 7),
            (std::vector<int64_t>{1, 2, 4}));  // 1.17 2.33 3.5
  EXPECT_EQ(proportional_counts({60, 100, 140, 100}, 100), (std::vector<int64_t>{15, 25, 35, 25}));
  EXPECT_EQ(proportional_counts({1, 1, 1}, 2),
            (std::vector<int64_t>{1, 1, 0}));  // ties: lower class
  EXPECT_EQ(proportional_counts({0, 5}, 5), (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(proportional_counts({0, 0}, 0), (std::vector<int64_t>{0, 0}));
}

TEST(DataLabelNoise, EveryKindFlipsExactlyRoundRateTimesNReproduciblyBySeed) {
  const Images im = look_alike();  // N = 400
  for (const std::string kind : {"symmetric", "pairwise", "instance", "projection"}) {
    SCOPED_TRACE(kind);
    const Result a = inject(im, 4, options(kind, 0.237, 1));
    EXPECT_EQ(a.flipped().size(), 95u);  // round(0.237 * 400) = round(94.8)
    EXPECT_EQ(a.meta.injected.count, 95);
    EXPECT_EQ(a.meta.injected.kind, kind);
    EXPECT_EQ(inject(im, 4, options(kind, 0.237, 1)).labels, a.labels);
    EXPECT_NE(inject(im, 4, options(kind, 0.237, 2)).flipped(), a.flipped());
    EXPECT_EQ(inject(im, 4, options(kind, 0.0012, 1)).flipped().size(), 0u);  // round(0.48)
  }
}

TEST(DataLabelNoise, PairwiseDefaultMapPairsTheLookAlikeClassesAndSplitsByClassSize) {
  const Images im = look_alike();
  const Result r = inject(im, 4, options("pairwise", 0.25, 3));
  const std::vector<int64_t>& partner = r.meta.injected.pairs;
  ASSERT_EQ(partner.size(), 4u);
  EXPECT_EQ(partner[1], 2);
  EXPECT_EQ(partner[2], 1);
  for (int c = 0; c < 4; ++c) {
    EXPECT_GE(partner[size_t(c)], 0);
    EXPECT_NE(partner[size_t(c)], c);
  }
  std::vector<int64_t> per_class(4, 0);
  for (int64_t i : r.flipped()) {
    EXPECT_EQ(r.labels[size_t(i)], partner[size_t(r.clean[size_t(i)])]) << i;
    ++per_class[size_t(r.clean[size_t(i)])];
  }
  EXPECT_EQ(per_class, (std::vector<int64_t>{15, 25, 35, 25}));  // 100 over sizes 60/100/140/100

  // A map from the config: only its classes flip, the total still exact.
  LabelNoiseOptions o = options("pairwise", 0.1, 3);
  o.pairs = {{0, 3}, {3, 0}};
  const Result m = inject(im, 4, o);
  EXPECT_EQ(m.meta.injected.pairs, (std::vector<int64_t>{3, -1, -1, 0}));
  std::fill(per_class.begin(), per_class.end(), 0);
  for (int64_t i : m.flipped()) {
    EXPECT_EQ(m.labels[size_t(i)], 3 - m.clean[size_t(i)]) << i;
    ++per_class[size_t(m.clean[size_t(i)])];
  }
  EXPECT_EQ(per_class, (std::vector<int64_t>{15, 0, 0, 25}));  // 40 over sizes 60/100
}

TEST(DataLabelNoise, InstanceFlipsTheMostAmbiguousImagesToTheirLikeliestWrongClass) {
  const Images im = overlap();
  const Result r = inject(im, 3, options("instance", 0.05, 1));
  const std::vector<int64_t> got = r.flipped();
  ASSERT_EQ(got.size(), 20u);
  for (int64_t i : got) {
    EXPECT_LT(i, 30) << "not one of the ambiguous images";
    EXPECT_NE(im.labels[size_t(i)], 2) << i;                        // never the clear class
    EXPECT_EQ(r.labels[size_t(i)], 1 - im.labels[size_t(i)]) << i;  // to the other of the pair
    EXPECT_GT(im.labels[size_t(i)] == 0 ? im.t[size_t(i)] : -im.t[size_t(i)], 0.0) << i;
  }
  // The first 30 rows hold the 20 ambiguous images (classes 0 and 1) and 10 of class 2.
  std::set<int64_t> flipped(got.begin(), got.end());
  for (int64_t i = 0; i < 30; ++i) EXPECT_EQ(flipped.count(i), i % 3 < 2 ? 1u : 0u) << i;
}

// Projection (Xia et al.'s IDN): each class holds two exact images, alternating. Where a row
// goes is a function of its image (every flipped copy of one image to one class, never its
// own), but which rows flip is not: both images of every class lose some rows.
TEST(DataLabelNoise, ProjectionSendsEachImageToOneWrongClassAndDrawsRowsRegardlessOfImage) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> px(0, 255);
  std::vector<std::vector<uint8_t>> proto(8, std::vector<uint8_t>(64));
  for (auto& p : proto)
    for (auto& v : p) v = uint8_t(px(rng));
  Images im;
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 100; ++i) {
      const auto& p = proto[size_t(2 * c + i % 2)];
      im.px.insert(im.px.end(), p.begin(), p.end());
      im.labels.push_back(c);
    }
  for (uint64_t seed : {1u, 2u}) {
    SCOPED_TRACE(seed);
    const Result r = inject(im, 4, options("projection", 0.3, seed));
    ASSERT_EQ(r.flipped().size(), 120u);
    std::vector<int32_t> target(8, -1);
    std::vector<int> flips(8, 0);
    for (int64_t i : r.flipped()) {
      const size_t image = size_t(2 * im.labels[size_t(i)] + i % 2);
      EXPECT_NE(r.labels[size_t(i)], im.labels[size_t(i)]) << i;
      if (target[image] < 0) target[image] = r.labels[size_t(i)];
      EXPECT_EQ(r.labels[size_t(i)], target[image]) << "row " << i << " of image " << image;
      ++flips[image];
    }
    for (size_t image = 0; image < 8; ++image) EXPECT_GT(flips[image], 0) << "image " << image;
  }
}

TEST(DataLabelNoise, QuickModelSeparatesTheLookAlikePairFromTheRest) {
  const Images im = look_alike();
  std::vector<float> x(im.labels.size() * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(im.px[i]) / 255.f;
  std::vector<uint8_t> fold(im.labels.size());
  for (size_t i = 0; i < fold.size(); ++i) fold[i] = uint8_t(i % 2);
  const QuickModel q = cross_fit_lda(x, 64, im.labels, fold, 4);
  // Classes 0 and 3 are told apart from everything; 1 and 2 only from the others.
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      if (a != b && !((a == 1 && b == 2) || (a == 2 && b == 1))) {
        EXPECT_EQ(q.confusion[size_t(a * 4 + b)], 0) << a << "->" << b;
      }
  EXPECT_GT(q.confusion[1 * 4 + 2] + q.confusion[2 * 4 + 1], 20);
  const auto partner = most_confused(q, im.labels);
  EXPECT_EQ(partner[1], 2);
  EXPECT_EQ(partner[2], 1);
  // The folds' sums and models run on threads: the same scores, bit for bit, on any number.
  for (size_t i = 0; i < fold.size(); ++i) fold[i] = uint8_t(i % 5);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const QuickModel one = cross_fit_lda(x, 64, im.labels, fold, 4);
  omp_set_num_threads(3);
  EXPECT_EQ(cross_fit_lda(x, 64, im.labels, fold, 4).scores, one.scores);
  omp_set_num_threads(threads);
}

TEST(DataLabelNoise, ConfigFormsOldShorthandAndMap) {
  const ConfigSchema& s = pipeline_schema();
  Config old = Config::from_yaml_text(s, "data: {label_noise: 0.25}", "test");
  EXPECT_EQ(old.get_float("data.label_noise.rate"), 0.25);
  EXPECT_EQ(old.get_string("data.label_noise.kind"), "symmetric");
  Config set = Config::load(s, "", {"data.label_noise=0.3", "data.seed=9"});
  LabelNoiseOptions o = label_noise_options(set);
  EXPECT_EQ(o.rate, 0.3);
  EXPECT_EQ(o.seed, 9u);  // data.label_noise.seed -1: data.seed
  Config map = Config::from_yaml_text(
      s, "data: {label_noise: {rate: 0.2, kind: pairwise, seed: 4, pairs: {0: 6, 6: 0, 2: 4}}}",
      "test");
  o = label_noise_options(map);
  EXPECT_EQ(o.seed, 4u);
  EXPECT_EQ(o.pairs, (std::vector<std::pair<int64_t, int64_t>>{{0, 6}, {6, 0}, {2, 4}}));
  // The resolved config round-trips.
  EXPECT_EQ(Config::from_yaml_text(s, map.to_yaml(), "again").to_yaml(), map.to_yaml());
}

// Through the tool: the same flips on 1 and 3 ranks (the quick model is computed on every
// rank from the gathered rows), the clean labels and attributes recorded.
TEST(DataLabelNoise, ToolSameFlipsOnAnyRankCount) {
  std::string dir = test::scratch_dir("data_label_noise_ranks");
  IdxSet src = make_idx(dir + "/in", 300, 20, 8, 8, false);
  std::string out;
  for (const std::string kind : {"pairwise", "instance", "projection"}) {
    const std::string args =
        cat("--set data.source=mnist --input ", dir, "/in --set data.seed=7 ",
            "--set data.label_noise.rate=0.2 --set data.label_noise.kind=", kind,
            " --set data.chunk_samples=16 -o ", dir, "/", kind);
    ASSERT_EQ(shard(args + "1.h5", &out), 0) << out;
    EXPECT_NE(out.find("label noise: " + kind + ", rate 0.2, seed 7: 60 of 300"), std::string::npos)
        << out;
    ASSERT_EQ(shard(args + "3.h5", &out, 3), 0) << out;
    h5::File a = h5::File::open(cat(dir, "/", kind, "1.h5")),
             b = h5::File::open(cat(dir, "/", kind, "3.h5"));
    const auto labels = a.read_all<int32_t>("/train/labels");
    EXPECT_EQ(b.read_all<int32_t>("/train/labels"), labels);
    EXPECT_EQ(b.read_all<uint8_t>("/train/noise_truth"), a.read_all<uint8_t>("/train/noise_truth"));
    const auto clean = a.read_all<int32_t>("/train/clean_labels");
    ASSERT_EQ(clean.size(), 300u);
    int flipped = 0;
    for (size_t i = 0; i < clean.size(); ++i) {
      EXPECT_EQ(clean[i], src.labels[0][i]) << i;
      flipped += labels[i] != clean[i];
    }
    EXPECT_EQ(flipped, 60);
    EXPECT_EQ(a.attr_string("/", "label_noise_kind"), kind);
    EXPECT_EQ(a.attr_int("/", "label_noise_injected"), 60);
    EXPECT_EQ(a.attr_int("/", "label_noise_seed"), 7);
  }
}

// On synthetic data the injected flips come on top of the generator's own noise, among the
// rows it left clean: the truth is the union. The same on 2 ranks.
TEST(DataLabelNoise, ToolSyntheticTruthIsTheUnion) {
  std::string dir = test::scratch_dir("data_label_noise_synth");
  std::string out;
  const std::string args =
      cat("--set data.synthetic.train_per_class=60 --set data.synthetic.test_per_class=2 ",
          "--set data.synthetic.height=12 --set data.synthetic.width=12 ",
          "--set data.label_noise.rate=0.2 --set data.label_noise.kind=pairwise -o ", dir);
  ASSERT_EQ(shard(args + "/s.h5", &out), 0) << out;
  ASSERT_EQ(shard(args + "/s2.h5", &out, 2), 0) << out;
  h5::File f = h5::File::open(dir + "/s.h5");
  EXPECT_EQ(h5::File::open(dir + "/s2.h5").read_all<int32_t>("/train/labels"),
            f.read_all<int32_t>("/train/labels"));
  const auto labels = f.read_all<int32_t>("/train/labels"),
             clean = f.read_all<int32_t>("/train/clean_labels");
  const auto truth = f.read_all<uint8_t>("/train/noise_truth"),
             kind = f.read_all<uint8_t>("/train/noise_kind");
  const auto pairs = f.attr_ints("/", "label_noise_pairs");
  ASSERT_EQ(pairs.size(), 10u);
  int64_t changed = 0, outliers = 0, to_partner = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    EXPECT_EQ(clean[i], int32_t(i % 10)) << i;  // the generator's class
    changed += labels[i] != clean[i];
    outliers += kind[i] == kNoiseOutlier;
    to_partner += labels[i] != clean[i] && labels[i] == pairs[size_t(clean[i])];
    EXPECT_EQ(truth[i], kind[i] != kNoiseClean) << i;
  }
  EXPECT_EQ(changed, 30 + 120);  // the generator's 5 % and round(0.2 * 600) more
  EXPECT_EQ(outliers, 12);
  EXPECT_GE(to_partner, 120);
  EXPECT_EQ(f.attr_int("/", "label_noise_count"), 150);
  EXPECT_EQ(f.attr_int("/", "label_noise_injected"), 120);
}
