// shard_dataset on real formats: the written files hold exactly the bytes of the source
// (CIFAR-10, CIFAR-100, MNIST IDX plain and gzip), and CSV tables (Iris) convert with a
// correct stratified split.
#include <gtest/gtest.h>

#include <filesystem>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "data/dataset_file.hpp"
#include "io/h5.hpp"
#include "unit/test_data_util.hpp"

using namespace sieve;
using namespace sieve::test::data;
using sieve::data::DatasetFile;
using sieve::data::Split;

namespace {

// Every image byte (CHW source -> HWC file), label and sample id of one split.
void expect_cifar_split(const h5::File& f, const std::string& split, const std::vector<CifarRecord>& recs,
                        int64_t id0) {
  auto dims = f.require<uint8_t>("/" + split + "/images", 4);
  ASSERT_EQ(dims, (std::vector<hsize_t>{recs.size(), 32, 32, 3}));
  auto img = f.read_all<uint8_t>("/" + split + "/images");
  auto labels = f.read_all<int32_t>("/" + split + "/labels");
  auto ids = f.read_all<int64_t>("/" + split + "/sample_id");
  ASSERT_EQ(labels.size(), recs.size());
  size_t bad = 0;
  for (size_t i = 0; i < recs.size(); ++i) {
    EXPECT_EQ(labels[i], recs[i].label) << split << " " << i;
    EXPECT_EQ(ids[i], id0 + int64_t(i));
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        for (int c = 0; c < 3; ++c)
          bad += img[i * 3072 + size_t(y * 32 + x) * 3 + c] != recs[i].chw[size_t(c * 1024 + y * 32 + x)];
  }
  EXPECT_EQ(bad, 0u) << split << ": image bytes differ from the source records";
}

// h5py cross-check of a converted CIFAR-10 directory; skips (77) when h5py is missing.
int python_check_cifar(const std::string& h5, const std::string& dir, std::string* out) {
  std::string script = h5 + ".check.py";
  std::ofstream(script) << R"PY(
import sys
try:
    import h5py, numpy as np
except Exception:
    sys.exit(77)
h5, d = sys.argv[1], sys.argv[2]
def load(files):
    raw = b"".join(open(f"{d}/{f}", "rb").read() for f in files)
    a = np.frombuffer(raw, np.uint8).reshape(-1, 3073)
    return a[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), a[:, 0].astype(np.int32)
with h5py.File(h5, "r") as f:
    for split, files in (("train", [f"data_batch_{i}.bin" for i in range(1, 6)]), ("test", ["test_batch.bin"])):
        x, y = load(files)
        assert f[f"/{split}/images"].dtype == np.uint8
        assert np.array_equal(f[f"/{split}/images"][...], x), split + " images"
        assert np.array_equal(f[f"/{split}/labels"][...], y), split + " labels"
    n = len(f["/train/labels"])
    assert np.array_equal(f["/test/sample_id"][...], np.arange(n, n + len(f["/test/labels"])))
    assert f.attrs["schema"] == "sieve.dataset/1"
    assert list(f.attrs["class_names"])[0] == "airplane"
print("h5py check ok")
)PY";
  return test::run_command("/usr/bin/python3 " + script + " " + h5 + " " + dir, out);
}

}  // namespace

TEST(DataFormats, Cifar10BytesMatchTheSource) {
  std::string dir = test::scratch_dir("data_cifar10");
  CifarSet src = make_cifar10(dir + "/in", {7, 5, 6, 1, 4}, 9);
  std::string out;
  ASSERT_EQ(shard(cat("--set data.source=cifar10 --input ", dir, "/in -o ", dir, "/c10.h5 --set data.chunk_samples=4"),
                  &out),
            0)
      << out;
  h5::File f = h5::File::open(dir + "/c10.h5");
  h5::require_schema(f, "sieve.dataset/1");
  expect_cifar_split(f, "train", src.train, 0);
  expect_cifar_split(f, "test", src.test, int64_t(src.train.size()));
  EXPECT_EQ(f.attr_int("/", "num_classes"), 10);
  EXPECT_EQ(f.attr_strings("/", "class_names")[9], "truck");
  EXPECT_EQ(f.attr_string("/", "kind"), "image");
  EXPECT_EQ(f.attr_string("/", "source"), "cifar10");
  EXPECT_FALSE(f.exists("/train/noise_truth"));
  // mean/std per channel over the training pixels, in pixel/255 units.
  for (int c = 0; c < 3; ++c) {
    double s = 0, q = 0, n = 0;
    for (auto& r : src.train)
      for (int p = 0; p < 1024; ++p) {
        double v = r.chw[size_t(c * 1024 + p)] / 255.0;
        s += v;
        q += v * v;
        ++n;
      }
    double mu = s / n;
    EXPECT_NEAR(f.attr_doubles("/", "mean")[size_t(c)], mu, 1e-9);
    EXPECT_NEAR(f.attr_doubles("/", "std")[size_t(c)], std::sqrt(q / n - mu * mu), 1e-9);
  }
  // The resolved config is in the file and next to it.
  EXPECT_NE(f.attr_string("/", "config").find("cifar10"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir + "/c10.config.yaml"));
  // The reader sees the same.
  DatasetFile ds = DatasetFile::open(dir + "/c10.h5");
  EXPECT_EQ(ds.rows(Split::Train), 23);
  EXPECT_EQ(ds.rows(Split::Test), 9);
  EXPECT_EQ(ds.height(), 32);
  EXPECT_EQ(ds.channels(), 3);
  auto img = ds.read_images(Split::Train, 22, 23);
  EXPECT_EQ(img[0], src.train[22].chw[0]);
  EXPECT_EQ(img[1], src.train[22].chw[1024]);

  // The archive's parent directory works too; and h5py reads the same bytes.
  std::filesystem::rename(dir + "/in", dir + "/cifar-10-batches-bin");
  std::filesystem::create_directories(dir + "/parent");
  std::filesystem::rename(dir + "/cifar-10-batches-bin", dir + "/parent/cifar-10-batches-bin");
  ASSERT_EQ(shard(cat("--set data.source=cifar10 --input ", dir, "/parent -o ", dir, "/c10b.h5"), &out), 0) << out;
  EXPECT_EQ(first_difference(dump_h5(dir + "/c10.h5", true), dump_h5(dir + "/c10b.h5", true)), "");
  int rc = python_check_cifar(dir + "/c10.h5", dir + "/parent/cifar-10-batches-bin", &out);
  if (rc == 77) {
    std::printf("[ note ] h5py not importable with /usr/bin/python3: h5py cross-check skipped\n");
  } else {
    EXPECT_EQ(rc, 0) << out;
  }
}

TEST(DataFormats, Cifar100UsesFineLabelsAndExactBytes) {
  std::string dir = test::scratch_dir("data_cifar100");
  CifarSet src = make_cifar100(dir + "/in", 13, 5);
  std::string out;
  ASSERT_EQ(shard(cat("--set data.source=cifar100 --input ", dir, "/in -o ", dir, "/c100.h5"), &out), 0) << out;
  h5::File f = h5::File::open(dir + "/c100.h5");
  expect_cifar_split(f, "train", src.train, 0);
  expect_cifar_split(f, "test", src.test, 13);
  EXPECT_EQ(f.attr_int("/", "num_classes"), 100);
  auto names = f.attr_strings("/", "class_names");
  ASSERT_EQ(names.size(), 100u);
  EXPECT_EQ(names[0], "apple");
  EXPECT_EQ(names[99], "worm");
}

TEST(DataFormats, IdxPlainAndGzipBytesMatchTheSource) {
  for (bool gz : {false, true}) {
    std::string dir = test::scratch_dir(gz ? "data_idx_gz" : "data_idx");
    IdxSet src = make_idx(dir + "/in", 37, 11, 28, 28, gz);
    std::string out;
    ASSERT_EQ(shard(cat("--set data.source=mnist --input ", dir, "/in -o ", dir, "/m.h5 --set data.chunk_samples=8"),
                    &out),
              0)
        << out;
    h5::File f = h5::File::open(dir + "/m.h5");
    const char* splits[2] = {"train", "test"};
    for (int k = 0; k < 2; ++k) {
      std::string g = std::string("/") + splits[k];
      ASSERT_EQ(f.require<uint8_t>(g + "/images", 4),
                (std::vector<hsize_t>{src.labels[k].size(), 28, 28, 1}));
      EXPECT_EQ(f.read_all<uint8_t>(g + "/images"), src.images[k]) << g << (gz ? " (gz)" : "");
      auto labels = f.read_all<int32_t>(g + "/labels");
      ASSERT_EQ(labels.size(), src.labels[k].size());
      for (size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(labels[i], src.labels[k][i]);
      auto ids = f.read_all<int64_t>(g + "/sample_id");
      EXPECT_EQ(ids.front(), k == 0 ? 0 : 37);
      EXPECT_EQ(ids.back(), k == 0 ? 36 : 47);
    }
    EXPECT_EQ(f.attr_int("/", "num_classes"), 10);
    EXPECT_EQ(f.attr_doubles("/", "mean").size(), 1u);
  }
}

// data.label_noise on a real source: exactly round(f * N) training labels flipped, each to
// another class, recorded as noise_truth (kind = label); images, test labels and ids intact;
// the same flips on 1 and 3 ranks. (The plain number is the old form of data.label_noise.rate.)
TEST(DataFormats, LabelNoiseFlipsAKnownSeededSetOfTrainingLabels) {
  std::string dir = test::scratch_dir("data_label_noise");
  IdxSet src = make_idx(dir + "/in", 400, 50, 8, 8, false);
  std::string out;
  const std::string args = cat("--set data.source=mnist --input ", dir, "/in --set data.seed=7 ",
                               "--set data.label_noise=0.3 --set data.chunk_samples=16 -o ");
  ASSERT_EQ(shard(args + dir + "/n1.h5", &out), 0) << out;
  ASSERT_EQ(shard(args + dir + "/n3.h5", &out, 3), 0) << out;
  h5::File f = h5::File::open(dir + "/n1.h5");
  auto labels = f.read_all<int32_t>("/train/labels");
  auto truth = f.read_all<uint8_t>("/train/noise_truth");
  auto kind = f.read_all<uint8_t>("/train/noise_kind");
  ASSERT_EQ(labels.size(), 400u);
  ASSERT_EQ(truth.size(), 400u);
  int64_t flipped = 0;
  std::vector<int> to(10, 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    const bool changed = labels[i] != src.labels[0][i];
    EXPECT_EQ(truth[i], changed ? 1 : 0) << i;  // every flip changes the class
    EXPECT_EQ(kind[i], changed ? 1 : 0) << i;
    EXPECT_GE(labels[i], 0);
    EXPECT_LT(labels[i], 10);
    flipped += changed;
    if (changed) ++to[size_t((labels[i] - src.labels[0][i] + 10) % 10)];
  }
  EXPECT_EQ(flipped, 120);  // round(0.3 * 400)
  EXPECT_EQ(to[0], 0);
  for (int s = 1; s < 10; ++s) EXPECT_GT(to[size_t(s)], 0) << "shift " << s;  // all other classes
  EXPECT_EQ(f.read_all<uint8_t>("/train/images"), src.images[0]);
  auto test_labels = f.read_all<int32_t>("/test/labels");
  for (size_t i = 0; i < test_labels.size(); ++i) EXPECT_EQ(test_labels[i], src.labels[1][i]);
  h5::File g = h5::File::open(dir + "/n3.h5");
  EXPECT_EQ(g.read_all<int32_t>("/train/labels"), labels);
  EXPECT_EQ(g.read_all<uint8_t>("/train/noise_truth"), truth);
  // Another seed flips other rows; the synthetic source refuses the key.
  ASSERT_EQ(shard(cat("--set data.source=mnist --input ", dir, "/in --set data.seed=8 ",
                      "--set data.label_noise=0.3 -o ", dir, "/s8.h5"),
                  &out),
            0)
      << out;
  EXPECT_NE(h5::File::open(dir + "/s8.h5").read_all<uint8_t>("/train/noise_truth"), truth);
  // The label before the flip is kept (test_data_label_noise.cpp covers the other kinds).
  EXPECT_EQ(f.read_all<int32_t>("/train/clean_labels"),
            std::vector<int32_t>(src.labels[0].begin(), src.labels[0].end()));
  EXPECT_EQ(f.attr_string("/", "label_noise_kind"), "symmetric");
}

TEST(DataFormats, IdxNonSquareImagesAndClassNamesOverride) {
  std::string dir = test::scratch_dir("data_idx_rect");
  IdxSet src = make_idx(dir + "/in", 5, 3, 7, 5, false);
  std::string out;
  ASSERT_EQ(shard(cat("--set data.source=mnist --input ", dir, "/in -o ", dir, "/m.h5 ",
                      "--set 'data.class_names=[t-shirt,trouser,pullover,dress,coat,sandal,shirt,sneaker,bag,boot]'"),
                  &out),
            0)
      << out;
  DatasetFile ds = DatasetFile::open(dir + "/m.h5");
  EXPECT_EQ(ds.height(), 7);
  EXPECT_EQ(ds.width(), 5);
  EXPECT_EQ(ds.channels(), 1);
  EXPECT_EQ(ds.class_names()[9], "boot");
  EXPECT_EQ(ds.read_images(Split::Test, 0, 3), src.images[1]);
}

namespace {
struct IrisRow {
  std::vector<float> x;
  std::string species;
};
std::vector<IrisRow> read_iris(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<IrisRow> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    IrisRow r;
    std::stringstream ss(line);
    std::string cell;
    for (int c = 0; c < 4; ++c) {
      std::getline(ss, cell, ',');
      r.x.push_back(std::stof(cell));
    }
    std::getline(ss, r.species);
    if (!r.species.empty() && r.species.back() == '\r') r.species.pop_back();
    rows.push_back(r);
  }
  return rows;
}
}  // namespace

TEST(DataFormats, IrisCsvConvertsWithStratifiedSplit) {
  std::string iris = test::shared_data("iris.csv");
  if (!std::filesystem::exists(iris)) GTEST_SKIP() << iris << " not present";
  std::string dir = test::scratch_dir("data_iris");
  std::string out;
  std::string base = cat("--set data.source=csv --set data.csv.label_column=species --input ", iris);
  ASSERT_EQ(shard(base + " -o " + dir + "/iris.h5", &out), 0) << out;
  DatasetFile ds = DatasetFile::open(dir + "/iris.h5");
  EXPECT_FALSE(ds.is_image());
  EXPECT_EQ(ds.features(), 4);
  EXPECT_EQ(ds.num_classes(), 3);
  EXPECT_EQ(ds.class_names(), (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  EXPECT_EQ(ds.feature_names()[0], "sepal_length_cm");
  ASSERT_EQ(ds.rows(Split::Train) + ds.rows(Split::Test), 150);
  EXPECT_EQ(ds.rows(Split::Test), 30);  // 20 % of 50 per class
  std::map<int, int> per_class[2];
  for (Split s : sieve::data::kSplits)
    for (int32_t l : ds.labels(s)) per_class[int(s)][l]++;
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(per_class[0][c], 40) << c;
    EXPECT_EQ(per_class[1][c], 10) << c;
  }
  // Every source row appears exactly once, with its label; ids 0..149; file order kept.
  auto src = read_iris(iris);
  ASSERT_EQ(src.size(), 150u);
  std::multiset<std::string> want, got;
  for (auto& r : src)
    want.insert(cat(r.x[0], ",", r.x[1], ",", r.x[2], ",", r.x[3], ",", r.species));
  std::vector<int64_t> all_ids;
  for (Split s : sieve::data::kSplits) {
    auto f = ds.read_features(s, 0, ds.rows(s));
    auto l = ds.labels(s);
    auto ids = ds.sample_ids(s);
    all_ids.insert(all_ids.end(), ids.begin(), ids.end());
    for (int64_t i = 0; i < ds.rows(s); ++i)
      got.insert(cat(f[size_t(i * 4)], ",", f[size_t(i * 4 + 1)], ",", f[size_t(i * 4 + 2)], ",",
                     f[size_t(i * 4 + 3)], ",", ds.class_names()[size_t(l[size_t(i)])]));
  }
  EXPECT_EQ(want, got);
  for (int64_t i = 0; i < 150; ++i) EXPECT_EQ(all_ids[size_t(i)], i);
  // The first training row is the first source row not held out: the file's order is kept.
  auto train = ds.read_features(Split::Train, 0, ds.rows(Split::Train));
  double mean0 = 0;
  for (int64_t i = 0; i < ds.rows(Split::Train); ++i) mean0 += train[size_t(i * 4)];
  mean0 /= double(ds.rows(Split::Train));
  EXPECT_NEAR(ds.mean()[0], mean0, 1e-6);
  EXPECT_EQ(ds.mean().size(), 4u);
  EXPECT_GT(ds.stddev()[2], 1.0);  // petal length varies a lot

  // Same seed -> same split; another seed -> another split (same class counts).
  ASSERT_EQ(shard(base + " -o " + dir + "/iris2.h5", &out), 0) << out;
  EXPECT_EQ(first_difference(dump_h5(dir + "/iris.h5", true), dump_h5(dir + "/iris2.h5", true)), "");
  ASSERT_EQ(shard(base + " --set data.seed=99 -o " + dir + "/iris3.h5", &out), 0) << out;
  DatasetFile ds3 = DatasetFile::open(dir + "/iris3.h5");
  EXPECT_EQ(ds3.rows(Split::Test), 30);
  EXPECT_NE(ds3.read_features(Split::Test, 0, 30), ds.read_features(Split::Test, 0, 30));
  // test_fraction 0: everything in train, an empty test split.
  ASSERT_EQ(shard(base + " --set data.csv.test_fraction=0 -o " + dir + "/iris4.h5", &out), 0) << out;
  DatasetFile ds4 = DatasetFile::open(dir + "/iris4.h5");
  EXPECT_EQ(ds4.rows(Split::Train), 150);
  EXPECT_EQ(ds4.rows(Split::Test), 0);
}

TEST(DataFormats, CsvIntegerLabelsQuotesAndCrlf) {
  std::string dir = test::scratch_dir("data_csv_int");
  std::ofstream(dir + "/t.csv") << "a,\"b, quoted\",y\r\n1.5,2,0\r\n-3e2,4,2\r\n\r\n5,6,1\r\n7,8,2\r\n";
  std::string out;
  ASSERT_EQ(shard(cat("--set data.source=csv --set data.csv.label_column=y --set data.csv.test_fraction=0 --input ",
                      dir, "/t.csv -o ", dir, "/t.h5"),
                  &out),
            0)
      << out;
  DatasetFile ds = DatasetFile::open(dir + "/t.h5");
  EXPECT_EQ(ds.num_classes(), 3);
  EXPECT_EQ(ds.class_names(), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(ds.feature_names(), (std::vector<std::string>{"a", "b, quoted"}));
  EXPECT_EQ(ds.labels(Split::Train), (std::vector<int32_t>{0, 2, 1, 2}));
  EXPECT_EQ(ds.read_features(Split::Train, 0, 4), (std::vector<float>{1.5f, 2, -300, 4, 5, 6, 7, 8}));
}

// A spreadsheet's UTF-8 byte order mark is not part of the first column's name; a file its
// own tools would reject (one class) is refused at the source, naming the file.
TEST(DataFormats, CsvByteOrderMarkAndSingleClassFile) {
  std::string dir = test::scratch_dir("data_csv_bom");
  std::ofstream(dir + "/bom.csv") << "\xEF\xBB\xBFlabel,x\n0,1.5\n1,2.5\n0,3\n1,4\n";
  std::string out;
  ASSERT_EQ(shard(cat("--set data.source=csv --set data.csv.test_fraction=0 --input ", dir,
                      "/bom.csv -o ", dir, "/bom.h5"),
                  &out),
            0)
      << out;
  DatasetFile ds = DatasetFile::open(dir + "/bom.h5");
  EXPECT_EQ(ds.feature_names(), (std::vector<std::string>{"x"}));
  EXPECT_EQ(ds.num_classes(), 2);
  std::ofstream(dir + "/one.csv") << "label,x\ncat,1\ncat,2\ncat,3\n";
  EXPECT_EQ(shard(cat("--set data.source=csv --set data.csv.test_fraction=0 --input ", dir,
                      "/one.csv -o ", dir, "/one.h5"),
                  &out),
            1)
      << out;
  EXPECT_NE(out.find("one.csv"), std::string::npos) << out;
  EXPECT_NE(out.find("at least 2 classes"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/one.h5"));
}
