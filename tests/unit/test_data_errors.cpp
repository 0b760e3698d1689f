// Bad input to shard_dataset: each case gives one clear error line naming the file or key,
// the documented exit code, and no output file (nor a leftover temporary).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "unit/test_data_util.hpp"

using namespace sieve;
using namespace sieve::test::data;
namespace fs = std::filesystem;

namespace {

struct Case {
  std::string dir;  // scratch directory; outputs go to dir + "/out"
  std::string out_dir() const { return dir + "/out"; }
  std::string output() const { return dir + "/out/ds.h5"; }
};

Case make_case(const std::string& name) {
  Case c{test::scratch_dir("data_err_" + name)};
  fs::create_directories(c.out_dir());
  return c;
}

// Runs the tool and checks exit code, message and that nothing was written.
void expect_failure(const Case& c, const std::string& args, int code, const std::vector<std::string>& needles) {
  std::string out;
  int rc = shard(args + " -o " + c.output(), &out);
  EXPECT_EQ(rc, code) << args << "\n" << out;
  for (auto& n : needles) EXPECT_NE(out.find(n), std::string::npos) << "'" << n << "' not in: " << out;
  EXPECT_NE(out.find("shard_dataset: error: "), std::string::npos) << out;
  // One line of error.
  size_t errors = 0;
  for (size_t p = 0; (p = out.find("error:", p)) != std::string::npos; ++p) ++errors;
  EXPECT_EQ(errors, 1u) << out;
  EXPECT_TRUE(list_dir(c.out_dir()).empty()) << "output left behind for: " << args;
}

std::string cifar_args(const std::string& dir) { return "--set data.source=cifar10 --input " + dir; }
std::string mnist_args(const std::string& dir) { return "--set data.source=mnist --input " + dir; }
std::string csv_args(const std::string& file, const std::string& label = "y") {
  return "--set data.source=csv --set data.csv.label_column=" + label + " --input " + file;
}

}  // namespace

TEST(DataErrors, MissingInputs) {
  Case c = make_case("missing");
  expect_failure(c, cifar_args(c.dir + "/nope"), 1, {c.dir + "/nope", "no such directory"});
  make_cifar10(c.dir + "/in", {2, 2, 2, 2, 2}, 2);
  fs::remove(c.dir + "/in/data_batch_3.bin");
  expect_failure(c, cifar_args(c.dir + "/in"), 1, {"data_batch_3.bin", "no such file"});
  fs::create_directories(c.dir + "/empty");
  expect_failure(c, mnist_args(c.dir + "/empty"), 1, {"train-images-idx3-ubyte", "no such file"});
  expect_failure(c, csv_args(c.dir + "/none.csv"), 1, {c.dir + "/none.csv", "no such file"});
  expect_failure(c, "--set data.source=cifar10", 2, {"data.path"});
}

TEST(DataErrors, TruncatedAndOversizedCifar) {
  Case c = make_case("cifar_size");
  make_cifar10(c.dir + "/in", {3, 3, 3, 3, 3}, 3);
  std::string f = c.dir + "/in/data_batch_2.bin";
  auto good = read_bytes(f);
  auto cut = good;
  cut.resize(cut.size() - 100);
  write_bytes(f, cut);
  expect_failure(c, cifar_args(c.dir + "/in"), 1, {"data_batch_2.bin", "truncated or oversized"});
  auto extra = good;
  extra.insert(extra.end(), 5, 0);
  write_bytes(f, extra);
  expect_failure(c, cifar_args(c.dir + "/in"), 1, {"data_batch_2.bin", "not a whole number"});
  write_bytes(f, good);
  // More records than a CIFAR-10 batch holds.
  write_bytes(c.dir + "/in/test_batch.bin", std::vector<uint8_t>(size_t(10001) * 3073, 0));
  expect_failure(c, cifar_args(c.dir + "/in"), 1, {"test_batch.bin", "oversized", "10001"});
  write_bytes(c.dir + "/in/test_batch.bin", {});
  expect_failure(c, cifar_args(c.dir + "/in"), 1, {"test_batch.bin", "empty"});
}

TEST(DataErrors, CifarLabelOutOfRange) {
  Case c = make_case("cifar_label");
  make_cifar10(c.dir + "/in", {3, 3, 3, 5, 3}, 3);
  std::string f = c.dir + "/in/data_batch_4.bin";
  auto b = read_bytes(f);
  b[size_t(3) * 3073] = 10;  // record 3's label
  write_bytes(f, b);
  expect_failure(c, cifar_args(c.dir + "/in"), 1, {"data_batch_4.bin", "record 3", "label 10", "out of range"});
  // CIFAR-100: fine label 100.
  make_cifar100(c.dir + "/in100", 4, 2);
  auto t = read_bytes(c.dir + "/in100/test.bin");
  t[3074 + 1] = 100;
  write_bytes(c.dir + "/in100/test.bin", t);
  expect_failure(c, "--set data.source=cifar100 --input " + c.dir + "/in100", 1, {"test.bin", "record 1", "label 100"});
}

TEST(DataErrors, BadIdxFiles) {
  Case c = make_case("idx");
  std::string in = c.dir + "/in";
  IdxSet s = make_idx(in, 10, 4, 6, 6, false);
  std::string img = in + "/train-images-idx3-ubyte";
  std::string lab = in + "/train-labels-idx1-ubyte";
  auto good_img = read_bytes(img);
  auto good_lab = read_bytes(lab);

  auto bad = good_img;
  bad[3] = 0x04;  // magic 0x00000804
  write_bytes(img, bad);
  expect_failure(c, mnist_args(in), 1, {img, "bad IDX magic 0x00000804", "expected 0x00000803"});
  write_bytes(img, good_lab);  // a label file where images belong
  expect_failure(c, mnist_args(in), 1, {img, "magic 0x00000801"});

  bad = good_img;
  bad.resize(bad.size() - 7);  // header says 10 images, data holds less
  write_bytes(img, bad);
  expect_failure(c, mnist_args(in), 1, {img, "truncated"});
  bad = good_img;
  bad.push_back(1);
  write_bytes(img, bad);
  expect_failure(c, mnist_args(in), 1, {img, "oversized", "1 trailing bytes"});
  // Dimensions that disagree with the size: 11 images declared.
  bad = good_img;
  bad[7] = 11;
  write_bytes(img, bad);
  expect_failure(c, mnist_args(in), 1, {img, "truncated"});
  write_bytes(img, good_img);

  // Image and label counts differ.
  std::vector<uint8_t> nine(s.labels[0].begin(), s.labels[0].begin() + 9);
  write_bytes(lab, idx_labels(nine));
  expect_failure(c, mnist_args(in), 1, {img, lab, "10 images", "9 labels"});
  // A label out of range.
  auto l = s.labels[0];
  l[4] = 10;
  write_bytes(lab, idx_labels(l));
  expect_failure(c, mnist_args(in), 1, {lab, "label 10 at index 4", "out of range"});
  write_bytes(lab, good_lab);

  // Corrupt gzip: the first half of a compressed file.
  fs::remove(img);
  write_gz(img + ".gz", good_img);
  auto gz = read_bytes(img + ".gz");
  gz.resize(gz.size() / 2);
  write_bytes(img + ".gz", gz);
  expect_failure(c, mnist_args(in), 1, {img + ".gz"});
  // Test images of another size than the training images.
  write_gz(img + ".gz", good_img);
  write_bytes(in + "/t10k-images-idx3-ubyte", idx_images(4, 5, 6, std::vector<uint8_t>(120, 1)));
  expect_failure(c, mnist_args(in), 1, {"t10k-images-idx3-ubyte", "5x6"});
}

TEST(DataErrors, BadCsvFiles) {
  Case c = make_case("csv");
  std::string f = c.dir + "/t.csv";
  std::ofstream(f) << "a,b,y\n1,2,cat\n3,4\n";
  expect_failure(c, csv_args(f), 1, {f + ":3", "2 fields", "ragged"});
  std::ofstream(f) << "a,b,y\n1,2,cat\n3,x4,dog\n";
  expect_failure(c, csv_args(f), 1, {f + ":3", "column 'b'", "'x4' is not a number"});
  std::ofstream(f) << "a,b,y\n1,2,cat\n3,,dog\n";
  expect_failure(c, csv_args(f), 1, {f + ":3", "column 'b'", "is not a number"});
  // Found by fuzz_data_csv: finite as a double, but inf as the float32 feature it is stored as.
  std::ofstream(f) << "a,b,y\n1,2,cat\n3,-1e300,dog\n";
  expect_failure(c, csv_args(f), 1, {f + ":3", "column 'b'", "-1e300 is outside the float32 range"});
  std::ofstream(f) << "a,b,y\n1,2,cat\n3,4,dog\n";
  expect_failure(c, csv_args(f, "label"), 2, {"data.csv.label_column 'label'", f, "columns: a, b, y"});
  std::ofstream(f) << "a,b,y\n1,2,0\n3,4,2\n";
  expect_failure(c, csv_args(f) + " --set 'data.class_names=[no,yes]'", 1, {f + ":3", "label 2 out of range 0..1"});
  std::ofstream(f) << "a,b,y\n1,2,-1\n";
  expect_failure(c, csv_args(f), 1, {f + ":2", "label -1 out of range"});
  std::ofstream(f) << "";
  expect_failure(c, csv_args(f), 1, {f, "empty"});
  std::ofstream(f) << "a,b,y\n";
  expect_failure(c, csv_args(f), 1, {f, "no data rows"});
}

TEST(DataErrors, UnusableOutputs) {
  Case c = make_case("output");
  std::string small = " --set data.synthetic.train_per_class=4 --set data.synthetic.test_per_class=1";
  std::string out;
  // Directory missing / not a directory / not writable (root may write anywhere but /proc).
  int rc = shard(small + " -o " + c.dir + "/missing/ds.h5", &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(c.dir + "/missing/ds.h5"), std::string::npos) << out;
  EXPECT_NE(out.find("does not exist"), std::string::npos) << out;
  rc = shard(small + " -o /proc/sieve-test-ds.h5", &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("not writable"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists("/proc/sieve-test-ds.h5"));

  // An existing output is kept without --overwrite (exit 2), replaced with it.
  ASSERT_EQ(shard(small + " -o " + c.output(), &out), 0) << out;
  auto before = read_bytes(c.output());
  rc = shard(small + " --set data.seed=3 -o " + c.output(), &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find(c.output()), std::string::npos) << out;
  EXPECT_NE(out.find("--overwrite"), std::string::npos) << out;
  EXPECT_EQ(read_bytes(c.output()), before);
  // The same for a shard file of a sharded output.
  ASSERT_EQ(shard(small + " --set data.shards=2 -o " + c.out_dir() + "/sh.h5", &out), 0) << out;
  fs::remove(c.out_dir() + "/sh.h5");
  rc = shard(small + " --set data.shards=2 -o " + c.out_dir() + "/sh.h5", &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("sh.shard-0.h5"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(c.out_dir() + "/sh.h5"));
  // --overwrite replaces; going from 2 shards to 1 file removes the stale shards.
  ASSERT_EQ(shard(small + " --set data.seed=3 --overwrite -o " + c.output(), &out), 0) << out;
  EXPECT_NE(read_bytes(c.output()), before);
  ASSERT_EQ(shard(small + " --overwrite -o " + c.out_dir() + "/sh.h5", &out), 0) << out;
  EXPECT_FALSE(fs::exists(c.out_dir() + "/sh.shard-0.h5"));
  for (auto& name : list_dir(c.out_dir())) EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
}

TEST(DataErrors, BadFlagsAndConfig) {
  Case c = make_case("flags");
  expect_failure(c, "--no-such-flag", 2, {"no-such-flag"});
  expect_failure(c, "--set data.synthetic.channels=2", 2, {"data.synthetic.channels"});
  expect_failure(c, "--set data.synthetic.label_noise=0.6 --set data.synthetic.outliers=0.6", 2,
                 {"label_noise", "outliers"});
  expect_failure(c, "--set data.source=imagenet", 2, {"data.source"});
  expect_failure(c, "--set data.synthetic.classes=3 --set 'data.class_names=[a,b]'", 2, {"data.class_names"});
}

// data.label_noise: each bad key named in one line, nothing written.
TEST(DataErrors, LabelNoiseKeys) {
  Case c = make_case("label_noise");
  const std::string tiny = "--set data.synthetic.train_per_class=10 --set data.synthetic.test_per_class=1 ";
  expect_failure(c, tiny + "--set data.label_noise=0.95", 2, {"data.label_noise.rate"});
  expect_failure(c, tiny + "--set data.label_noise.kind=flip", 2, {"data.label_noise.kind"});
  expect_failure(c, tiny + "--set data.label_noise.rate=0.1 --set 'data.label_noise.pairs={a: 1}'", 2,
                 {"data.label_noise.pairs", "'a'"});
  expect_failure(c, tiny + "--set data.label_noise.rate=0.1 --set data.label_noise.kind=pairwise "
                 "--set 'data.label_noise.pairs={0: 10}'", 2, {"data.label_noise.pairs", "10 out of range 0..9"});
  expect_failure(c, tiny + "--set data.label_noise.rate=0.1 --set data.label_noise.kind=pairwise "
                 "--set 'data.label_noise.pairs={3: 3}'", 2, {"data.label_noise.pairs", "itself"});
  expect_failure(c, tiny + "--set data.label_noise.rate=0.1 --set 'data.label_noise.pairs={0: 1}'", 2,
                 {"data.label_noise.pairs", "pairwise"});
  expect_failure(c, tiny + "--set 'data.label_noise.pairs=[[0, 1]]'", 2, {"data.label_noise.pairs"});
  // More flips than the generator's own noise leaves clean rows, or than the mapped classes hold.
  expect_failure(c, tiny + "--set data.label_noise.rate=0.9 --set data.synthetic.label_noise=0.5", 2,
                 {"data.label_noise.rate"});
  expect_failure(c, tiny + "--set data.label_noise.rate=0.5 --set data.label_noise.kind=pairwise "
                 "--set 'data.label_noise.pairs={0: 1}'", 2, {"data.label_noise.rate", "data.label_noise.pairs"});
}
