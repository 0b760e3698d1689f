#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/metrics.hpp"
#include "support/test_util.hpp"

using namespace sieve;
namespace fs = std::filesystem;

TEST(H5, RowsAttributesAndSchemaRoundTrip) {
  std::string dir = test::scratch_dir("h5_roundtrip");
  std::string path = dir + "/a.h5";
  {
    h5::File f = h5::File::create(path);
    f.create_dataset<float>("/g/x", {5, 3}, 2);
    std::vector<float> rows(15);
    for (int i = 0; i < 15; ++i) rows[i] = float(i) * 0.5f;
    f.write_rows<float>("/g/x", 0, 2, rows.data());
    f.write_rows<float>("/g/x", 2, 3, rows.data() + 6);
    f.write_small<int64_t>("/ids", {3}, {7, 8, 9});
    h5::stamp(f, "sieve.test/1", "a: 1\n");
    f.set_attr("/", "names", std::vector<std::string>{"cat", "dog"});
    f.set_attr("/g/x", "scale", 2.5);
    f.set_attr("/", "mean", std::vector<double>{0.1, 0.2});
    f.close();
  }
  h5::File f = h5::File::open(path);
  EXPECT_NO_THROW(h5::require_schema(f, "sieve.test/1"));
  EXPECT_EQ(f.attr_string("/", "config"), "a: 1\n");
  EXPECT_EQ(f.attr_strings("/", "names"), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_DOUBLE_EQ(f.attr_double("/g/x", "scale"), 2.5);
  EXPECT_EQ(f.attr_doubles("/", "mean").size(), 2u);
  auto x = f.read_all<float>("/g/x");
  ASSERT_EQ(x.size(), 15u);
  for (int i = 0; i < 15; ++i) EXPECT_FLOAT_EQ(x[i], float(i) * 0.5f);
  EXPECT_EQ(f.read_all<int64_t>("/ids"), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(f.require<float>("/g/x", 2), (std::vector<hsize_t>{5, 3}));
  EXPECT_TRUE(f.exists("/g/x"));
  EXPECT_FALSE(f.exists("/nope/x"));
}

TEST(H5, BadFilesGiveErrorsNamingThePath) {
  std::string dir = test::scratch_dir("h5_bad");
  auto msg = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg([&] { h5::File::open(dir + "/missing.h5"); }).find("no such file"), std::string::npos);
  std::ofstream(dir + "/text.h5") << "not hdf5 at all";
  EXPECT_NE(msg([&] { h5::File::open(dir + "/text.h5"); }).find("not an HDF5 file"), std::string::npos);
  {
    h5::File f = h5::File::create(dir + "/typed.h5");
    f.write_small<int32_t>("/labels", {4}, {1, 2, 3, 4});
    f.close();
  }
  h5::File f = h5::File::open(dir + "/typed.h5");
  std::string m = msg([&] { f.require<int64_t>("/labels", 1); });
  EXPECT_NE(m.find("typed.h5: /labels: expected int64"), std::string::npos) << m;
  EXPECT_NE(msg([&] { h5::require_schema(f, "sieve.dataset/1"); }).find("not a Sieve file"),
            std::string::npos);
  EXPECT_NE(msg([&] { f.dims("/absent"); }).find("missing dataset"), std::string::npos);
}

TEST(AtomicOutput, OutputAppearsOnlyOnCommit) {
  Comm world = Comm::world();
  std::string dir = test::scratch_dir("atomic");
  std::string final_path = dir + "/out.h5";
  {
    AtomicOutput out(final_path, false, world);
    std::ofstream(out.tmp_path()) << "partial";
    EXPECT_FALSE(fs::exists(final_path));
    // destroyed without commit: as if the stage crashed
  }
  EXPECT_FALSE(fs::exists(final_path));
  EXPECT_TRUE(fs::is_empty(dir)) << "temporary left behind";
  {
    AtomicOutput out(final_path, false, world);
    std::ofstream(out.tmp_path()) << "complete";
    out.commit();
  }
  EXPECT_TRUE(fs::exists(final_path));
  EXPECT_THROW(AtomicOutput(final_path, false, world), UsageError);
  // Not a Sieve output ("complete" is plain text): --overwrite does not replace it.
  EXPECT_THROW(AtomicOutput(final_path, true, world), Error);
  EXPECT_THROW(AtomicOutput(dir + "/no/such/dir/x.h5", false, world), Error);
  EXPECT_EQ(config_sidecar_path("a/b/model.h5"), "a/b/model.config.yaml");
}

TEST(Metrics, JsonLinesSurviveATornLastLine) {
  std::string dir = test::scratch_dir("metrics");
  std::string path = dir + "/m.jsonl";
  {
    MetricsWriter w(path, true, true);
    w.write({{"epoch", 1}, {"loss", 0.5}});
    w.write({{"epoch", 2}, {"loss", 0.25}});
  }
  std::ofstream(path, std::ios::app) << "{\"epoch\": 3, \"lo";  // crash mid-line
  auto lines = read_json_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_DOUBLE_EQ(lines[1]["loss"].get<double>(), 0.25);
}

namespace {
void write_sieve_file(const std::string& path, const std::string& schema, int64_t marker) {
  h5::File f = h5::File::create(path);
  h5::stamp(f, schema, "a: 1\n");
  f.set_attr("/", "marker", marker);
  f.close();
}
int64_t marker_of(const std::string& path) {
  return h5::File::open(path).attr_int("/", "marker");
}
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// Issue 15: --overwrite replaces only the tool's own previous output.
TEST(AtomicOutput, OverwriteReplacesOnlyItsOwnKindNeverAForeignFileOrAnInput) {
  Comm world = Comm::world();
  std::string dir = test::scratch_dir("atomic_overwrite");
  const std::string foreign = dir + "/notes.txt", data = dir + "/dataset.h5",
                    feats = dir + "/features.h5";
  std::ofstream(foreign) << "mine";
  write_sieve_file(data, "sieve.dataset/1", 1);
  write_sieve_file(feats, "sieve.features/1", 2);
  EXPECT_EQ(output_kind(foreign), "");
  EXPECT_EQ(output_kind(data), "sieve.dataset/1");
  EXPECT_EQ(output_kind(dir + "/absent"), "");

  std::string m = error_of([&] { AtomicOutput o(foreign, true, world); });
  EXPECT_NE(m.find("not a Sieve output"), std::string::npos) << m;
  m = error_of([&] { AtomicOutput o(data, true, world, false, "sieve.features/1"); });
  EXPECT_NE(m.find("'sieve.dataset/1'"), std::string::npos) << m;
  m = error_of([&] { check_output_path(feats, true, "sieve.features/1", {feats}); });
  EXPECT_NE(m.find("is the input"), std::string::npos) << m;
  m = error_of([&] { check_output_path(dir, true, "sieve.report/1", {data}); });
  EXPECT_NE(m.find("contains the input"), std::string::npos) << m;

  // Kind unknown up front (any Sieve output passes): commit still refuses another kind.
  {
    AtomicOutput o(data, true, world);
    write_sieve_file(o.tmp_path(), "sieve.features/1", 3);
    m = error_of([&] { o.commit(); });
    EXPECT_NE(m.find("not replaced"), std::string::npos) << m;
  }
  EXPECT_EQ(marker_of(data), 1);
  // Its own kind is replaced.
  {
    AtomicOutput o(feats, true, world, false, "sieve.features/1");
    write_sieve_file(o.tmp_path(), "sieve.features/1", 4);
    o.commit();
  }
  EXPECT_EQ(marker_of(feats), 4);
  EXPECT_EQ(std::ifstream(foreign).rdbuf() ? "ok" : "", std::string("ok"));
  std::vector<std::string> left;
  for (auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left.size(), 3u) << "temporary left behind";
}

TEST(AtomicOutput, ADirectoryOutputReplacesOnlyAPreviousReport) {
  Comm world = Comm::world();
  std::string dir = test::scratch_dir("atomic_report_dir");
  const std::string run = dir + "/run";
  fs::create_directories(run + "/pretrain");
  std::ofstream(run + "/dataset.h5") << "x";
  std::ofstream(run + "/pretrain/model.h5") << "y";
  auto write_report = [](const std::string& d, const std::string& text) {
    fs::create_directories(d + "/figures");
    std::ofstream(d + "/index.html") << text;
    std::ofstream(d + "/report.config.yaml") << "a: 1\n";
  };
  // The run directory itself (the reported bug: `report --output RUN --overwrite`).
  std::string m = error_of([&] { AtomicOutput o(run, true, world, true, "sieve.report/1"); });
  EXPECT_NE(m.find("not a Sieve output"), std::string::npos) << m;
  m = error_of([&] { AtomicOutput o(run, true, world, true, "sieve.report/1", {run}); });
  EXPECT_NE(m.find("is the input"), std::string::npos) << m;
  EXPECT_TRUE(fs::exists(run + "/pretrain/model.h5"));
  // A previous report is replaced whole.
  write_report(run + "/report", "old");
  std::ofstream(run + "/report/figures/stale.png") << "z";
  {
    AtomicOutput o(run + "/report", true, world, true, "sieve.report/1", {run + "/dataset.h5"});
    write_report(o.tmp_path(), "new");
    o.commit();
  }
  std::string text;
  std::getline(std::ifstream(run + "/report/index.html"), text);
  EXPECT_EQ(text, "new");
  EXPECT_FALSE(fs::exists(run + "/report/figures/stale.png"));
  // A report directory holding a file of the user's is not a report any more.
  std::ofstream(run + "/report/my_notes.txt") << "keep";
  m = error_of([&] { AtomicOutput o(run + "/report", true, world, true, "sieve.report/1"); });
  EXPECT_NE(m.find("not a Sieve output"), std::string::npos) << m;
  EXPECT_TRUE(fs::exists(run + "/report/my_notes.txt"));
  for (auto& e : fs::directory_iterator(run))
    EXPECT_NE(e.path().filename().string()[0], '.') << "temporary left: " << e.path();
}
