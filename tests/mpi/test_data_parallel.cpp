// The dataset writer inside an MPI job (run under mpiexec -n 2 and -n 3): every rank
// writes its blocks collectively, and the result is exactly what one process computes on
// its own, for one file and for shards, with uneven blocks and many small write batches.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "comm/comm.hpp"
#include "data/dataset_file.hpp"
#include "data/rng.hpp"
#include "data/source.hpp"
#include "data/synthetic.hpp"
#include "data/writer.hpp"
#include "io/lineage.hpp"
#include "pipeline/schema.hpp"
#include "support/test_util.hpp"

using namespace sieve;
using namespace sieve::data;

namespace {

Config synthetic_config(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> ov = {
      "data.synthetic.classes=4",        "data.synthetic.train_per_class=53",
      "data.synthetic.test_per_class=5", "data.synthetic.height=9",
      "data.synthetic.width=11",         "data.synthetic.label_noise=0.1",
      "data.synthetic.outliers=0.1",     "data.seed=21"};
  ov.insert(ov.end(), extra.begin(), extra.end());
  return Config::load(pipeline_schema(), "", ov);
}

// Every row of `path`, read by this rank, equals the generator's output computed here, and
// the file's content fingerprint is the one of those rows (io/lineage.hpp: a sum of per-row
// hashes at their positions), whatever the rank count, write batches or shards.
void expect_matches_generator(const std::string& path, const SyntheticSpec& spec) {
  SyntheticGenerator g(spec);
  DatasetFile ds = DatasetFile::open(path);
  const int64_t rb = g.row_bytes();
  int64_t sum[3] = {0, 0, 0}, sumsq[3] = {0, 0, 0};
  lineage::Fingerprint fp;
  for (Split s : kSplits) {
    const int64_t n = ds.rows(s);
    ASSERT_EQ(n, g.rows(s));
    auto img = ds.read_images(s, 0, n);
    auto labels = ds.labels(s);
    auto ids = ds.sample_ids(s);
    auto truth = ds.read_noise_truth(s, 0, n);
    std::vector<uint8_t> want(static_cast<size_t>(rb));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      SyntheticSample smp = g.generate(s, i, want.data());
      bad += !std::equal(want.begin(), want.end(), img.begin() + i * rb);
      EXPECT_EQ(labels[size_t(i)], smp.label);
      EXPECT_EQ(truth[size_t(i)], smp.noise != kNoiseClean ? 1 : 0);
      EXPECT_EQ(ids[size_t(i)], (s == Split::Train ? 0 : g.rows(Split::Train)) + i);
      fp.add_row(
          hash3(lineage::hash_bytes(want.data(), size_t(rb), uint64_t(i) * 2 + (s == Split::Test)),
                uint64_t(uint32_t(smp.label)), uint64_t(ids[size_t(i)])));
      if (s == Split::Train)
        for (int64_t p = 0; p < rb; ++p) {
          int c = int(p % 3);
          sum[c] += want[size_t(p)];
          sumsq[c] += int64_t(want[size_t(p)]) * want[size_t(p)];
        }
    }
    EXPECT_EQ(bad, 0) << path << " " << split_name(s) << ": rows differ from the generator";
  }
  EXPECT_EQ(ds.fingerprint(), fp.hex()) << path;
  double npx = double(g.rows(Split::Train)) * spec.height * spec.width;
  for (int c = 0; c < 3; ++c) {
    double mu = double(sum[c]) / npx;
    EXPECT_DOUBLE_EQ(ds.mean()[size_t(c)], mu / 255.0);
    EXPECT_DOUBLE_EQ(ds.stddev()[size_t(c)], std::sqrt(double(sumsq[c]) / npx - mu * mu) / 255.0);
  }
}

}  // namespace

TEST(DataParallel, OneFileManySmallBatchesMatchesTheGenerator) {
  Comm comm = Comm::world();
  std::string dir = test::scratch_dir("data_mpi_one_np" + std::to_string(comm.size()));
  Config cfg = synthetic_config();
  auto src = open_source(cfg, "", comm);
  for (int64_t chunk : {1, 64}) {
    WriteOptions opt;
    opt.output = dir + "/one-" + std::to_string(chunk) + ".h5";
    opt.chunk_rows = chunk;
    opt.batch_bytes = 3000;  // ~10 rows per write: many collective iterations, uneven per rank
    opt.progress = false;
    opt.config_yaml = cfg.to_yaml();
    WriteSummary s = write_dataset(*src, opt, comm);
    EXPECT_EQ(s.rows[0], 212);
    EXPECT_EQ(s.label_noise, 21);  // round(0.1 * 212)
    EXPECT_EQ(s.outliers, 21);
    expect_matches_generator(opt.output, synthetic_spec(cfg));
  }
}

TEST(DataParallel, ShardsMatchTheGenerator) {
  Comm comm = Comm::world();
  std::string dir = test::scratch_dir("data_mpi_shards_np" + std::to_string(comm.size()));
  Config cfg = synthetic_config();
  auto src = open_source(cfg, "", comm);
  for (int shards : {2, 5}) {
    WriteOptions opt;
    opt.output = dir + "/s" + std::to_string(shards) + ".h5";
    opt.shards = shards;
    opt.chunk_rows = 7;
    opt.batch_bytes = 2000;
    opt.progress = false;
    opt.config_yaml = cfg.to_yaml();
    WriteSummary s = write_dataset(*src, opt, comm);
    EXPECT_EQ(int(s.files.size()), shards + 1);
    expect_matches_generator(opt.output, synthetic_spec(cfg));
  }
}

TEST(DataParallel, CsvTableWrittenByAllRanks) {
  Comm comm = Comm::world();
  std::string dir = test::scratch_dir("data_mpi_csv_np" + std::to_string(comm.size()));
  const int rows = 101;
  if (comm.is_root()) {
    std::ofstream f(dir + "/t.csv");
    f << "x0,x1,x2,label\n";
    for (int i = 0; i < rows; ++i)
      f << i << "," << i * 0.5 << "," << -i << "," << (i % 3 == 0 ? "a" : "b") << "\n";
  }
  comm.barrier();
  auto src = open_csv(dir + "/t.csv", "label", 0.25, 5, {}, comm);
  WriteOptions opt;
  opt.output = dir + "/t.h5";
  opt.chunk_rows = 4;
  opt.batch_bytes = 64;
  opt.progress = false;
  write_dataset(*src, opt, comm);
  DatasetFile ds = DatasetFile::open(opt.output);
  EXPECT_EQ(ds.rows(Split::Train) + ds.rows(Split::Test), rows);
  EXPECT_EQ(ds.rows(Split::Test), 9 + 17);  // round(0.25 * 34) + round(0.25 * 67)
  std::vector<int> seen(rows, 0);
  for (Split s : kSplits) {
    auto f = ds.read_features(s, 0, ds.rows(s));
    auto l = ds.labels(s);
    for (int64_t i = 0; i < ds.rows(s); ++i) {
      int x = int(f[size_t(i * 3)]);
      ASSERT_TRUE(x >= 0 && x < rows);
      seen[size_t(x)]++;
      EXPECT_FLOAT_EQ(f[size_t(i * 3 + 1)], x * 0.5f);
      EXPECT_EQ(l[size_t(i)], x % 3 == 0 ? 0 : 1);
    }
  }
  for (int i = 0; i < rows; ++i) EXPECT_EQ(seen[size_t(i)], 1) << i;
}

TEST(DataParallel, ErrorsAreAgreedOnEveryRank) {
  Comm comm = Comm::world();
  // The lowest failing rank's message reaches every rank.
  std::string msg = comm.size() > 1
                        ? (comm.rank() >= 1 ? "boom on rank " + std::to_string(comm.rank()) : "")
                        : "boom on rank 1";
  try {
    agree_on_error(comm, msg);
    ADD_FAILURE() << "agree did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "boom on rank 1");
    EXPECT_EQ(e.exit_code(), 1);
  }
  // A missing input fails on every rank with the same message.
  try {
    open_cifar("/nonexistent/cifar", false, {}, comm);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cifar"), std::string::npos) << e.what();
  }
  // An existing output without overwrite: a usage error everywhere, before any work.
  std::string dir = test::scratch_dir("data_mpi_err_np" + std::to_string(comm.size()));
  if (comm.is_root()) std::ofstream(dir + "/x.h5") << "x";
  comm.barrier();
  WriteOptions opt;
  opt.output = dir + "/x.h5";
  try {
    check_outputs(opt, comm);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--overwrite"), std::string::npos);
  }
}
