// The streaming loader (train/stream.hpp): its order against the in-memory one, what every
// rank count guarantees (each active sample at most once per epoch, full parts, the same
// steps everywhere), a deterministic plan, resume at any step, and memory within the budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "support/test_util.hpp"
#include "test_train_util.hpp"
#include "train/stream.hpp"

using namespace sieve;
using namespace sieve::train;

namespace {

std::string dataset(const std::string& name, int n) {
  const std::string dir = test::scratch_dir(name);
  test::write_image_dataset(dir + "/d.h5", n, 8, 4);
  return dir + "/d.h5";
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

// The sample ids of a step part (what a batch is made of).
std::vector<int64_t> ids_of(const StepPart& p) {
  std::vector<int64_t> out;
  for (int64_t r : p.rows) out.push_back(p.data->sample_id[size_t(r)]);
  return out;
}

}  // namespace

// One rank, one window holding the whole split: exactly the in-memory permutation, epoch
// after epoch (so the two paths train the same model; the tool test checks the weights).
TEST(TrainStream, OneRankOneWindowIsTheInMemoryOrder) {
  const std::string path = dataset("stream_same_order", 200);
  const SplitData split = read_split(path, "train");
  MemorySource mem(split, iota(200), 32, 7, 0, 1);
  StreamSource stream(path, data::Split::Train, iota(200), 32, 7, 0, 1, {10, 100});
  ASSERT_EQ(stream.steps_per_epoch(), mem.steps_per_epoch());
  for (int64_t e = 0; e < 3; ++e)
    for (int64_t s = 0; s < mem.steps_per_epoch(); ++s)
      ASSERT_EQ(ids_of(stream.rank_part(e, s)), ids_of(mem.rank_part(e, s))) << e << " " << s;
}

// Any rank count and window size: per epoch every rank yields its full part at every step,
// the same number of steps, only active samples, and no sample twice across ranks and steps;
// a sample's data is its own (label matches the file).
TEST(TrainStream, EveryRankCountCoversEachActiveSampleAtMostOncePerEpoch) {
  const std::string path = dataset("stream_cover", 300);
  const SplitData split = read_split(path, "train");
  std::map<int64_t, int32_t> label_of;
  for (int64_t i = 0; i < split.n; ++i) label_of[split.sample_id[size_t(i)]] = split.labels[size_t(i)];
  std::vector<int64_t> active;  // a keep-mask: every third sample dropped
  for (int64_t i = 0; i < 300; ++i)
    if (i % 3 != 1) active.push_back(i);
  std::set<int64_t> active_ids;
  for (int64_t i : active) active_ids.insert(split.sample_id[size_t(i)]);
  for (int ranks : {1, 2, 3}) {
    for (StreamGeometry g : {StreamGeometry{7, 3}, StreamGeometry{16, 1}, StreamGeometry{5, 100}}) {
      std::vector<std::unique_ptr<StreamSource>> src;
      for (int r = 0; r < ranks; ++r)
        src.push_back(std::make_unique<StreamSource>(path, data::Split::Train, active, 24, 11, r,
                                                     ranks, g));
      const int64_t steps = src[0]->steps_per_epoch();
      ASSERT_GE(steps, 1);
      // Within a chunk of the proportional share: at most ranks chunks' worth lost.
      EXPECT_GE(steps * 24, int64_t(active.size()) - 24 - ranks * g.chunk_rows)
          << ranks << " ranks, chunk " << g.chunk_rows;
      for (int64_t e = 0; e < 2; ++e) {
        std::set<int64_t> seen;
        for (int64_t s = 0; s < steps; ++s)
          for (int r = 0; r < ranks; ++r) {
            EXPECT_EQ(src[size_t(r)]->steps_per_epoch(), steps);
            const StepPart p = src[size_t(r)]->rank_part(e, s);
            ASSERT_EQ(int64_t(p.rows.size()), block_range(24, r, ranks).size());
            for (int64_t row : p.rows) {
              const int64_t id = p.data->sample_id[size_t(row)];
              EXPECT_TRUE(active_ids.count(id)) << "inactive sample " << id;
              EXPECT_TRUE(seen.insert(id).second) << "sample " << id << " twice in epoch " << e;
              EXPECT_EQ(p.data->labels[size_t(row)], label_of[id]);
            }
          }
        EXPECT_EQ(int64_t(seen.size()), steps * 24);
      }
    }
  }
}

// The plan is a function of (seed, epoch, rank count): a second source, or one that starts in
// the middle of an epoch (a resumed run), yields the same samples; another seed does not.
TEST(TrainStream, DeterministicAndResumableMidEpoch) {
  const std::string path = dataset("stream_resume", 240);
  const StreamGeometry g{8, 4};
  StreamSource a(path, data::Split::Train, iota(240), 16, 5, 1, 2, g);
  StreamSource b(path, data::Split::Train, iota(240), 16, 5, 1, 2, g);
  StreamSource other(path, data::Split::Train, iota(240), 16, 6, 1, 2, g);
  const int64_t steps = a.steps_per_epoch();
  ASSERT_GE(steps, 6);
  std::vector<std::vector<int64_t>> first;
  bool differs = false;
  for (int64_t s = 0; s < steps; ++s) {
    first.push_back(ids_of(a.rank_part(1, s)));
    differs |= ids_of(other.rank_part(1, s)) != first.back();
  }
  EXPECT_TRUE(differs) << "the seed must change the order";
  for (int64_t s = steps / 2; s < steps; ++s)  // starts mid-epoch, in a later window
    EXPECT_EQ(ids_of(b.rank_part(1, s)), first[size_t(s)]) << s;
  EXPECT_NE(ids_of(a.rank_part(2, 0)), first[0]) << "each epoch has its own order";
}

// Memory: what the source holds stays within two windows of the geometry a budget gives.
TEST(TrainStream, ResidentDataStaysWithinTheBudget) {
  const std::string path = dataset("stream_budget", 600);
  const int64_t row_bytes = 8 * 8 * 3;
  const int64_t budget = 600 * row_bytes / 4;  // a quarter of the split
  const StreamGeometry g = stream_geometry(row_bytes, budget);
  EXPECT_LE(g.chunk_rows * g.window_chunks * row_bytes, budget / 4);
  EXPECT_GE(g.window_chunks, 1);
  StreamSource src(path, data::Split::Train, iota(600), 20, 3, 0, 1, g);
  int64_t peak = 0;
  for (int64_t s = 0; s < src.steps_per_epoch(); ++s) {
    src.rank_part(0, s);
    src.quiesce();
    peak = std::max(peak, src.resident_bytes());
  }
  EXPECT_GT(peak, 0);
  // One resident window plus the carried rows and per-row labels/ids.
  EXPECT_LE(peak, budget / 4 + 20 * (row_bytes + 12) + g.chunk_rows * g.window_chunks * 12);
  EXPECT_TRUE(use_stream("auto", 600 * row_bytes, budget));
  EXPECT_FALSE(use_stream("auto", 600 * row_bytes, 600 * row_bytes));
  EXPECT_TRUE(use_stream("stream", 1, budget));
  EXPECT_FALSE(use_stream("memory", 600 * row_bytes, budget));
}
