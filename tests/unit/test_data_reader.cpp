// DatasetFile: the reader other stages use. Reads rows, ranges and gathers; rejects files
// that break the schema with an error naming the file and the object.
#include <gtest/gtest.h>

#include "data/dataset_file.hpp"
#include "io/h5.hpp"
#include "io/schemas.hpp"
#include "unit/test_data_util.hpp"

using namespace sieve;
using namespace sieve::data;
using namespace sieve::test::data;

namespace {

// A minimal valid image dataset written by hand: N train rows, 2 test rows, 2x3x1 images.
void write_minimal(const std::string& path, int n, const std::function<void(h5::File&)>& tweak = {}) {
  h5::File f = h5::File::create(path);
  h5::stamp(f, schema::kDataset, "run: {}\n");
  f.set_attr("/", "kind", std::string("image"));
  f.set_attr("/", "num_classes", int64_t(3));
  f.set_attr("/", "class_names", std::vector<std::string>{"a", "b", "c"});
  f.set_attr("/", "mean", std::vector<double>{0.5});
  f.set_attr("/", "std", std::vector<double>{0.25});
  int rows[2] = {n, 2};
  const char* splits[2] = {"/train", "/test"};
  for (int k = 0; k < 2; ++k) {
    std::string g = splits[k];
    std::vector<uint8_t> img(size_t(rows[k]) * 6);
    for (size_t i = 0; i < img.size(); ++i) img[i] = uint8_t(i + 100 * k);
    std::vector<int32_t> labels(size_t(rows[k]));
    std::vector<int64_t> ids(size_t(rows[k]));
    for (int i = 0; i < rows[k]; ++i) {
      labels[size_t(i)] = i % 3;
      ids[size_t(i)] = (k ? n : 0) + i;
    }
    f.write_small<uint8_t>(g + "/images", {hsize_t(rows[k]), 2, 3, 1}, img);
    f.write_small<int32_t>(g + "/labels", {hsize_t(rows[k])}, labels);
    f.write_small<int64_t>(g + "/sample_id", {hsize_t(rows[k])}, ids);
  }
  if (tweak) tweak(f);
  f.close();
}

std::string open_error(const std::string& path) {
  try {
    DatasetFile::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(DataReader, ReadsRowsRangesAndGathers) {
  std::string dir = test::scratch_dir("data_reader_ok");
  write_minimal(dir + "/d.h5", 10);
  DatasetFile d = DatasetFile::open(dir + "/d.h5");
  EXPECT_TRUE(d.is_image());
  EXPECT_EQ(d.rows(Split::Train), 10);
  EXPECT_EQ(d.rows(Split::Test), 2);
  EXPECT_EQ(d.row_elems(), 6);
  EXPECT_EQ(d.num_classes(), 3);
  EXPECT_FALSE(d.has_noise_truth(Split::Train));
  EXPECT_EQ(d.read_noise_truth(Split::Train, 0, 10), std::vector<uint8_t>(10, 0));
  auto rows = d.read_images(Split::Train, 3, 5);
  ASSERT_EQ(rows.size(), 12u);
  EXPECT_EQ(rows[0], 18);
  EXPECT_EQ(d.read_images(Split::Test, 1, 2)[0], uint8_t(106));
  std::vector<uint8_t> g(3 * 6);
  d.gather_images(Split::Train, {7, 2, 3}, g.data());
  EXPECT_EQ(g[0], 42);
  EXPECT_EQ(g[6], 12);
  EXPECT_EQ(g[12], 18);
  std::vector<int32_t> gl(3);
  d.gather_labels(Split::Train, {9, 8, 0}, gl.data());
  EXPECT_EQ(gl, (std::vector<int32_t>{0, 2, 0}));
  EXPECT_EQ(d.sample_ids(Split::Test), (std::vector<int64_t>{10, 11}));
  EXPECT_EQ(d.config_yaml(), "run: {}\n");
  EXPECT_THROW(d.read_images(Split::Train, 9, 11), Error);
  EXPECT_THROW(d.read_features(Split::Train, 0, 1), Error);
  std::vector<uint8_t> tmp(6);
  EXPECT_THROW(d.gather_images(Split::Test, {2}, tmp.data()), Error);
}

TEST(DataReader, RejectsBrokenFilesNamingTheProblem) {
  std::string dir = test::scratch_dir("data_reader_bad");
  std::string p = dir + "/d.h5";
  EXPECT_NE(open_error(dir + "/none.h5").find("no such file"), std::string::npos);

  write_minimal(p, 4, [](h5::File& f) { f.set_attr("/", "schema", std::string("sieve.features/1")); });
  EXPECT_NE(open_error(p).find("expected 'sieve.dataset/1'"), std::string::npos) << open_error(p);

  write_minimal(p, 4, [](h5::File& f) { f.set_attr("/", "kind", std::string("video")); });
  EXPECT_NE(open_error(p).find("'video'"), std::string::npos);

  write_minimal(p, 4, [](h5::File& f) {
    H5Ldelete(f.id(), "/train/labels", H5P_DEFAULT);
    f.write_small<int32_t>("/train/labels", {4}, {0, 1, 7, 0});
  });
  EXPECT_NE(open_error(p).find("/train/labels[2] = 7: out of range 0..2"), std::string::npos) << open_error(p);

  write_minimal(p, 4, [](h5::File& f) {
    H5Ldelete(f.id(), "/train/sample_id", H5P_DEFAULT);
    f.write_small<int64_t>("/train/sample_id", {3}, {0, 1, 2});
  });
  EXPECT_NE(open_error(p).find("/train/sample_id: 3 rows"), std::string::npos) << open_error(p);

  write_minimal(p, 4, [](h5::File& f) {
    H5Ldelete(f.id(), "/test/images", H5P_DEFAULT);
    f.write_small<uint8_t>("/test/images", {2, 3, 2, 1}, std::vector<uint8_t>(12));
  });
  EXPECT_NE(open_error(p).find("/test/images: images are 3x2x1"), std::string::npos) << open_error(p);

  write_minimal(p, 4, [](h5::File& f) {
    H5Ldelete(f.id(), "/train/labels", H5P_DEFAULT);
    f.write_small<int64_t>("/train/labels", {4}, {0, 1, 2, 0});
  });
  EXPECT_NE(open_error(p).find("/train/labels: expected int32"), std::string::npos) << open_error(p);

  write_minimal(p, 4, [](h5::File& f) { f.set_attr("/", "mean", std::vector<double>{0.5, 0.5, 0.5}); });
  EXPECT_NE(open_error(p).find("mean/std have 3/1 values, expected 1"), std::string::npos) << open_error(p);

  write_minimal(p, 4, [](h5::File& f) { f.set_attr("/", "class_names", std::vector<std::string>{"a"}); });
  EXPECT_NE(open_error(p).find("class_names has 1 names"), std::string::npos) << open_error(p);

  // Each message names the file.
  EXPECT_NE(open_error(p).find(p), std::string::npos);
}

TEST(DataReader, TabularDatasetsFromTheTool) {
  std::string dir = test::scratch_dir("data_reader_tab");
  std::ofstream(dir + "/t.csv") << "f1,f2,c\n1,10,x\n2,20,y\n3,30,x\n4,40,y\n";
  std::string out;
  ASSERT_EQ(shard("--set data.source=csv --set data.csv.label_column=c --set data.csv.test_fraction=0 --input " +
                      dir + "/t.csv -o " + dir + "/t.h5",
                  &out),
            0)
      << out;
  DatasetFile d = DatasetFile::open(dir + "/t.h5");
  EXPECT_EQ(d.kind(), Kind::Tabular);
  EXPECT_EQ(d.row_elems(), 2);
  std::vector<float> g(4);
  d.gather_features(Split::Train, {3, 0}, g.data());
  EXPECT_EQ(g, (std::vector<float>{4, 40, 1, 10}));
  EXPECT_DOUBLE_EQ(d.mean()[1], 25.0);
  EXPECT_NEAR(d.stddev()[0], std::sqrt(1.25), 1e-12);
  EXPECT_THROW(d.read_images(Split::Train, 0, 1), Error);
}
