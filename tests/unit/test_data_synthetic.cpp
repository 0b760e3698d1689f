// The synthetic generator: deterministic per (seed, index), exact noise counts, balanced
// classes, distinct classes, and the written file's noise_truth matching the config.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "data/dataset_file.hpp"
#include "data/rng.hpp"
#include "data/synthetic.hpp"
#include "unit/test_data_util.hpp"

using namespace sieve;
using namespace sieve::data;
using namespace sieve::test::data;

namespace {
SyntheticSpec small_spec(uint64_t seed = 5) {
  SyntheticSpec s;
  s.classes = 10;
  s.train_per_class = 200;
  s.test_per_class = 20;
  s.label_noise = 0.05;
  s.outliers = 0.02;
  s.seed = seed;
  return s;
}
}  // namespace

TEST(DataSynthetic, IndexPermutationIsABijection) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 17ull, 64ull, 1000ull, 4097ull}) {
    IndexPermutation p(n, 99);
    std::set<uint64_t> seen;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t v = p(i);
      ASSERT_LT(v, n);
      seen.insert(v);
    }
    EXPECT_EQ(seen.size(), n);
  }
}

TEST(DataSynthetic, SameSeedSameBytesAnyOrderOrBatching) {
  SyntheticGenerator a(small_spec()), b(small_spec());
  const int64_t n = 300, rb = a.row_bytes();
  std::vector<uint8_t> x(size_t(n * rb)), y(size_t(n * rb));
  std::vector<int32_t> lx(n), ly(n);
  std::vector<uint8_t> nx(n), ny(n);
  a.generate_batch(Split::Train, 0, n, x.data(), lx.data(), nx.data());
  // Same rows produced backwards in odd-sized pieces by another generator object.
  for (int64_t end = n; end > 0;) {
    int64_t begin = std::max<int64_t>(0, end - 37);
    b.generate_batch(Split::Train, begin, end - begin, y.data() + begin * rb, ly.data() + begin, ny.data() + begin);
    end = begin;
  }
  EXPECT_EQ(x, y);
  EXPECT_EQ(lx, ly);
  EXPECT_EQ(nx, ny);
  // Another seed gives other images; train and test images differ.
  SyntheticGenerator c(small_spec(6));
  std::vector<uint8_t> z(static_cast<size_t>(rb)), t(static_cast<size_t>(rb));
  c.generate(Split::Train, 0, z.data());
  EXPECT_NE(std::vector<uint8_t>(x.begin(), x.begin() + rb), z);
  a.generate(Split::Test, 0, t.data());
  EXPECT_NE(std::vector<uint8_t>(x.begin(), x.begin() + rb), t);
}

TEST(DataSynthetic, NoiseCountsAreExactAndClassesBalanced) {
  SyntheticSpec spec = small_spec();
  SyntheticGenerator g(spec);
  const int64_t n = g.rows(Split::Train);
  ASSERT_EQ(n, 2000);
  EXPECT_EQ(g.label_noise_count(), 100);
  EXPECT_EQ(g.outlier_count(), 40);
  int64_t label_noise = 0, outliers = 0;
  std::map<int, int> true_count, label_count;
  for (int64_t i = 0; i < n; ++i) {
    SyntheticSample s = g.describe(Split::Train, i);
    EXPECT_EQ(s.true_class, i % spec.classes);
    true_count[s.true_class]++;
    label_count[s.label]++;
    if (s.noise == kNoiseLabel) {
      ++label_noise;
      EXPECT_NE(s.label, s.true_class);
      EXPECT_GE(s.label, 0);
      EXPECT_LT(s.label, spec.classes);
    } else {
      EXPECT_EQ(s.label, s.true_class);
    }
    outliers += s.noise == kNoiseOutlier;
  }
  EXPECT_EQ(label_noise, 100);
  EXPECT_EQ(outliers, 40);
  for (int c = 0; c < spec.classes; ++c) {
    EXPECT_EQ(true_count[c], 200);
    EXPECT_NEAR(label_count[c], 200, 30);  // noise moves a few labels between classes
  }
  // The test split is clean.
  for (int64_t i = 0; i < g.rows(Split::Test); ++i) EXPECT_EQ(g.describe(Split::Test, i).noise, kNoiseClean);
  // Fractions 0 -> nothing injected.
  spec.label_noise = spec.outliers = 0;
  SyntheticGenerator clean(spec);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(clean.describe(Split::Train, i).noise, kNoiseClean);
}

TEST(DataSynthetic, ClassesDifferAndImagesAreNotTrivial) {
  // Per-class mean images differ clearly between classes, yet two samples of one class are
  // far from identical (random pose, colour, background, noise).
  SyntheticSpec spec = small_spec();
  spec.label_noise = spec.outliers = 0;
  SyntheticGenerator g(spec);
  const int64_t rb = g.row_bytes(), per = 60;
  std::vector<std::vector<double>> mean(size_t(spec.classes), std::vector<double>(size_t(rb), 0.0));
  std::vector<uint8_t> img(static_cast<size_t>(rb)), first(static_cast<size_t>(rb));
  double within = 0;
  for (int c = 0; c < spec.classes; ++c)
    for (int64_t k = 0; k < per; ++k) {
      g.generate(Split::Train, k * spec.classes + c, img.data());
      for (int64_t p = 0; p < rb; ++p) mean[size_t(c)][size_t(p)] += img[size_t(p)] / double(per);
      if (c == 0 && k == 0) first = img;
      if (c == 0 && k == 1)
        for (int64_t p = 0; p < rb; ++p) within += std::abs(int(img[size_t(p)]) - int(first[size_t(p)])) / double(rb);
    }
  EXPECT_GT(within, 20.0);  // mean absolute pixel difference of two samples of one class
  for (int a = 0; a < spec.classes; ++a)
    for (int b = a + 1; b < spec.classes; ++b) {
      double d = 0;
      for (int64_t p = 0; p < rb; ++p) d += std::abs(mean[size_t(a)][size_t(p)] - mean[size_t(b)][size_t(p)]);
      EXPECT_GT(d / double(rb), 1.0) << a << " vs " << b;
    }
  // Pixel values use the range; outliers and grayscale work.
  spec.channels = 1;
  spec.height = 20;
  spec.width = 12;
  spec.outliers = 0.5;
  SyntheticGenerator gray(spec);
  std::vector<uint8_t> gi(size_t(gray.row_bytes()));
  int outliers = 0;
  for (int64_t i = 0; i < 40; ++i) outliers += gray.generate(Split::Train, i, gi.data()).noise == kNoiseOutlier;
  EXPECT_GT(outliers, 5);
}

TEST(DataSynthetic, FileNoiseTruthMatchesConfigAndIsDeterministic) {
  std::string dir = test::scratch_dir("data_synth_file");
  std::string args = " --set data.synthetic.train_per_class=150 --set data.synthetic.test_per_class=10"
                     " --set data.synthetic.label_noise=0.1 --set data.synthetic.outliers=0.04"
                     " --set data.synthetic.height=16 --set data.synthetic.width=16 --set data.seed=11"
                     " --set data.chunk_samples=64";
  std::string out;
  ASSERT_EQ(shard("-o " + dir + "/a.h5" + args, &out), 0) << out;
  EXPECT_NE(out.find("150 label noise + 60 outliers"), std::string::npos) << out;
  DatasetFile ds = DatasetFile::open(dir + "/a.h5");
  ASSERT_TRUE(ds.has_noise_truth(Split::Train));
  const int64_t n = ds.rows(Split::Train);
  ASSERT_EQ(n, 1500);
  auto truth = ds.read_noise_truth(Split::Train, 0, n);
  auto kind = ds.h5().read_all<uint8_t>("/train/noise_kind");
  auto labels = ds.labels(Split::Train);
  int64_t noisy = 0, label_noise = 0, outliers = 0;
  for (int64_t i = 0; i < n; ++i) {
    noisy += truth[size_t(i)];
    EXPECT_EQ(truth[size_t(i)], kind[size_t(i)] != 0);
    label_noise += kind[size_t(i)] == kNoiseLabel;
    outliers += kind[size_t(i)] == kNoiseOutlier;
    if (kind[size_t(i)] == kNoiseLabel)
      EXPECT_NE(labels[size_t(i)], i % 10);
    else
      EXPECT_EQ(labels[size_t(i)], i % 10);
  }
  EXPECT_EQ(label_noise, 150);  // 0.10 * 1500
  EXPECT_EQ(outliers, 60);      // 0.04 * 1500
  EXPECT_EQ(noisy, 210);
  EXPECT_EQ(ds.h5().attr_int("/", "label_noise_count"), 150);
  auto test_truth = ds.read_noise_truth(Split::Test, 0, ds.rows(Split::Test));
  EXPECT_EQ(std::count(test_truth.begin(), test_truth.end(), 1), 0);
  EXPECT_EQ(ds.height(), 16);
  EXPECT_EQ(ds.class_names().size(), 10u);
  for (double m : ds.mean()) EXPECT_TRUE(m > 0.2 && m < 0.8) << m;
  for (double s : ds.stddev()) EXPECT_TRUE(s > 0.1 && s < 0.4) << s;

  // Deterministic: a second run is identical, another seed is not.
  ASSERT_EQ(shard("-o " + dir + "/b.h5" + args, &out), 0) << out;
  EXPECT_EQ(first_difference(dump_h5(dir + "/a.h5"), dump_h5(dir + "/b.h5")), "");
  ASSERT_EQ(shard("-o " + dir + "/c.h5" + args + " --set data.seed=12", &out), 0) << out;
  EXPECT_NE(dump_h5(dir + "/a.h5", true)["/train/images"], dump_h5(dir + "/c.h5", true)["/train/images"]);
}
