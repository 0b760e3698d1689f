// shard_dataset under mpirun -n 1, 2 and 3 writes identical datasets: every dataset and
// attribute byte for byte, for the synthetic generator, CIFAR-10, gzip'd IDX and CSV,
// as one file and as K shard files joined by a virtual-dataset index.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/dataset_file.hpp"
#include "unit/test_data_util.hpp"

using namespace sieve;
using namespace sieve::test::data;
using sieve::data::DatasetFile;
using sieve::data::Split;
namespace fs = std::filesystem;

namespace {

// Runs `args` with 1, 2 and 3 ranks into dir/np<k>/<name>.h5; every file of each run
// (index, shards) must equal the 1-rank run's. Returns the 1-rank output path.
std::string same_for_1_2_3_ranks(const std::string& dir, const std::string& name, const std::string& args,
                                 int shards = 1) {
  std::string first;
  for (int np : {1, 2, 3}) {
    std::string d = dir + "/np" + std::to_string(np);
    fs::create_directories(d);
    std::string out;
    int rc = shard(args + " --set data.shards=" + std::to_string(shards) + " -o " + d + "/" + name + ".h5", &out, np);
    EXPECT_EQ(rc, 0) << "mpirun -n " << np << " " << args << "\n" << out;
    if (rc != 0) return "";
    std::vector<std::string> files = {name + ".h5"};
    for (int k = 0; k < shards && shards > 1; ++k) files.push_back(name + ".shard-" + std::to_string(k) + ".h5");
    if (np == 1) {
      first = d + "/" + name + ".h5";
      auto dump = dump_h5(first);
      EXPECT_TRUE(dump.count("/train/labels") && dump.count("/test/sample_id") && dump.count("/@mean")) << first;
      continue;
    }
    for (auto& f : files)
      EXPECT_EQ(first_difference(dump_h5(dir + "/np1/" + f), dump_h5(d + "/" + f)), "")
          << f << ": " << np << " ranks differ from 1 rank";
  }
  return first;
}

}  // namespace

TEST(DataRanks, SyntheticSingleFileAndShards) {
  std::string dir = test::scratch_dir("data_ranks_synth");
  std::string args =
      "--set data.synthetic.classes=5 --set data.synthetic.train_per_class=61 --set data.synthetic.test_per_class=7"
      " --set data.synthetic.height=12 --set data.synthetic.width=10 --set data.chunk_samples=16"
      " --set data.synthetic.label_noise=0.1 --set data.synthetic.outliers=0.05";
  std::string single = same_for_1_2_3_ranks(dir, "one", args);
  std::string index = same_for_1_2_3_ranks(dir, "sharded", args, 4);
  ASSERT_FALSE(single.empty());
  ASSERT_FALSE(index.empty());
  // The index reads exactly like the single file (virtual datasets over the shards).
  EXPECT_EQ(first_difference(dump_h5(single, true), dump_h5(index, true)), "");
  DatasetFile a = DatasetFile::open(single), b = DatasetFile::open(index);
  EXPECT_EQ(b.num_shards(), 4);
  EXPECT_EQ(a.mean(), b.mean());
  EXPECT_EQ(a.stddev(), b.stddev());
  EXPECT_EQ(b.rows(Split::Train), 305);
  // Every shard is a complete dataset of its slice, with the global statistics.
  int64_t rows = 0;
  for (int k = 0; k < 4; ++k) {
    DatasetFile s = DatasetFile::open(fs::path(index).parent_path().string() + "/sharded.shard-" + std::to_string(k) + ".h5");
    EXPECT_EQ(s.h5().attr_int("/", "train_offset"), rows);
    auto ids = s.sample_ids(Split::Train);
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], rows + int64_t(i));
    EXPECT_EQ(s.read_images(Split::Train, 0, s.rows(Split::Train)),
              a.read_images(Split::Train, rows, rows + s.rows(Split::Train)));
    EXPECT_EQ(s.mean(), a.mean());
    rows += s.rows(Split::Train);
  }
  EXPECT_EQ(rows, 305);
  // A missing shard is an error naming it (HDF5 alone would read zeros).
  std::string dir1 = fs::path(index).parent_path().string();
  fs::rename(dir1 + "/sharded.shard-2.h5", dir1 + "/moved.h5");
  try {
    DatasetFile::open(index);
    ADD_FAILURE() << "missing shard not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sharded.shard-2.h5"), std::string::npos) << e.what();
  }
  fs::rename(dir1 + "/moved.h5", dir1 + "/sharded.shard-2.h5");
  // The index still reads after the whole directory moved (shards are named relative to it).
  fs::rename(dir1, dir + "/moved-dir");
  DatasetFile moved = DatasetFile::open(dir + "/moved-dir/sharded.h5");
  EXPECT_EQ(moved.labels(Split::Train), a.labels(Split::Train));
}

TEST(DataRanks, MoreShardsThanRowsOfASplit) {
  // 3 test rows in 5 shards: some shards hold no test rows; still identical for any rank count.
  std::string dir = test::scratch_dir("data_ranks_tiny");
  std::string args = "--set data.synthetic.classes=3 --set data.synthetic.train_per_class=4 "
                     "--set data.synthetic.test_per_class=1 --set data.synthetic.height=8 --set data.synthetic.width=8";
  std::string index = same_for_1_2_3_ranks(dir, "t", args, 5);
  ASSERT_FALSE(index.empty());
  DatasetFile d = DatasetFile::open(index);
  EXPECT_EQ(d.rows(Split::Test), 3);
  EXPECT_EQ(d.sample_ids(Split::Test), (std::vector<int64_t>{12, 13, 14}));
}

TEST(DataRanks, Cifar10IdxAndCsv) {
  std::string dir = test::scratch_dir("data_ranks_files");
  make_cifar10(dir + "/cifar", {9, 8, 7, 6, 5}, 11);
  std::string c = same_for_1_2_3_ranks(dir, "cifar", "--set data.source=cifar10 --set data.chunk_samples=4 --input " + dir + "/cifar");
  same_for_1_2_3_ranks(dir, "cifar3", "--set data.source=cifar10 --input " + dir + "/cifar", 3);
  make_idx(dir + "/mnist", 29, 13, 28, 28, true);
  same_for_1_2_3_ranks(dir, "mnist", "--set data.source=mnist --set data.chunk_samples=5 --input " + dir + "/mnist");
  std::string iris = test::shared_data("iris.csv");
  if (fs::exists(iris))
    same_for_1_2_3_ranks(dir, "iris",
                         "--set data.source=csv --set data.csv.label_column=species --set data.chunk_samples=7 --input " + iris, 2);
}
