// Loader, sampler, augmentation, keep-mask join and sweep expansion.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "config/sweep.hpp"
#include "pipeline/schema.hpp"
#include "support/test_util.hpp"
#include "test_train_util.hpp"
#include "train/holdout.hpp"
#include "train/loader.hpp"

using namespace sieve;
using namespace sieve::train;

TEST(TrainData, GlobalOrderDoesNotDependOnRankCount) {
  std::vector<int64_t> active;
  for (int64_t i = 0; i < 103; ++i) active.push_back(i * 2);
  for (int64_t epoch : {0, 1}) {
    std::vector<int64_t> ref;
    for (int size : {1, 2, 3, 5}) {
      Sampler s(active, 16, 42);
      EXPECT_EQ(s.steps_per_epoch(), 6);  // 103/16, partial batch dropped
      std::vector<int64_t> seq;
      for (int64_t step = 0; step < s.steps_per_epoch(); ++step)
        for (int r = 0; r < size; ++r) {
          auto p = s.rank_part(epoch, step, r, size);
          seq.insert(seq.end(), p.begin(), p.end());
        }
      if (ref.empty()) ref = seq;
      EXPECT_EQ(seq, ref) << "ranks " << size;
    }
    std::set<int64_t> uniq(ref.begin(), ref.end());
    EXPECT_EQ(uniq.size(), ref.size());
    for (auto v : ref) EXPECT_EQ(v % 2, 0);
  }
  Sampler s(active, 16, 42);
  EXPECT_NE(s.rank_part(0, 0, 0, 1), s.rank_part(1, 0, 0, 1));  // reshuffled per epoch
  Sampler whole(active, 103, 42);                               // a batch of all the data: one step
  EXPECT_EQ(whole.steps_per_epoch(), 1);
  EXPECT_EQ(whole.rank_part(0, 0, 1, 2).size(), 51u);
  // A global batch larger than the data is refused, not clamped (it used to train at 103
  // whatever was asked, so a sweep's 1024 and 4096 were the same run).
  try {
    Sampler big(active, 4096, 42);
    FAIL() << "a global batch larger than the data was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("4096"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("103"), std::string::npos) << e.what();
  }
}

// The epoch order is a draw per row: a subset of the rows (a filtered or random arm) comes in
// the order of the whole with the other rows left out, so the sweep's arms meet their common
// rows in the same order; the order is a permutation, changes with the epoch, and is the same
// for the same key. The Sampler's global batches follow it.
TEST(TrainData, KeyedOrderOfASubsetIsTheWholeOrderWithoutTheOthers) {
  std::vector<int64_t> rows(1000);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = int64_t(i) * 7 + 3;  // any row ids
  std::vector<int64_t> subset;
  for (int64_t r : rows)
    if (r % 5 != 0) subset.push_back(r);
  const uint64_t key = epoch_order_key(11, 2);
  auto ids = [](const std::vector<int64_t>& of, const std::vector<int64_t>& order) {
    std::vector<int64_t> out;
    for (int64_t p : order) out.push_back(of[size_t(p)]);
    return out;
  };
  const std::vector<int64_t> whole = ids(rows, keyed_order(rows, key));
  std::vector<int64_t> whole_without;
  for (int64_t r : whole)
    if (r % 5 != 0) whole_without.push_back(r);
  EXPECT_EQ(ids(subset, keyed_order(subset, key)), whole_without);
  std::vector<int64_t> sorted = whole;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, rows);  // a permutation
  EXPECT_NE(whole, rows);   // not the identity
  EXPECT_NE(ids(rows, keyed_order(rows, epoch_order_key(11, 3))), whole);
  EXPECT_EQ(ids(rows, keyed_order(rows, key)), whole);
  Sampler all(rows, 100, 11), fewer(subset, 100, 11);
  const std::vector<int64_t> first = all.rank_part(2, 0, 0, 1);
  EXPECT_EQ(first, std::vector<int64_t>(whole.begin(), whole.begin() + 100));
  EXPECT_EQ(fewer.rank_part(2, 0, 0, 1),
            std::vector<int64_t>(whole_without.begin(), whole_without.begin() + 100));
}

TEST(TrainData, ReadSplitNormalisesAndAugmentsByAShiftScaledToTheImageAndAFlip) {
  std::string dir = test::scratch_dir("train_data_read");
  std::string path = dir + "/d.h5";
  test::write_image_dataset(path, 12, 4, 4);
  DatasetMeta meta = read_dataset_meta(path);
  SplitData d = read_split(path, "train");
  ASSERT_EQ(d.n, 12);
  ASSERT_EQ(d.h, 8);
  ASSERT_EQ(d.c, 3);
  ASSERT_TRUE(has_split(path, "test"));
  std::vector<int64_t> idx = {3, 7, 0};
  Batch plain, aug, aug2;
  make_batch(d, meta, idx.data(), 3, Augmentation{}, 9, 0, &plain);
  // Independent reference: NCHW, (x/255 - 0.5)/0.25.
  auto px = [&](int64_t s, int c, int y, int x) {
    return (d.images[((size_t(s) * 8 + y) * 8 + x) * 3 + c] / 255.0 - 0.5) / 0.25;
  };
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 8; ++x)
          ASSERT_NEAR(plain.x[((size_t(i) * 3 + c) * 8 + y) * 8 + x], px(idx[i], c, y, x), 1e-5);
  EXPECT_EQ(plain.y[1], d.labels[7]);
  const Augmentation both{true, true};
  make_batch(d, meta, idx.data(), 3, both, 9, 5, &aug);
  make_batch(d, meta, idx.data(), 3, both, 9, 5, &aug2);
  EXPECT_EQ(aug.x, aug2.x);  // seeded: reproducible
  // Which shifts (|dy|, |dx| <= `reach`) and flips reproduce sample i of `b` from its source.
  auto matches = [&](const Batch& b, int i, int reach, bool allow_flip, bool* moved,
                     bool* flipped) {
    bool found = false;
    for (int dy = -reach; dy <= reach; ++dy)
      for (int dx = -reach; dx <= reach; ++dx)
        for (int flip = 0; flip < (allow_flip ? 2 : 1); ++flip) {
          bool ok = true;
          for (int c = 0; c < 3 && ok; ++c)
            for (int y = 0; y < 8 && ok; ++y)
              for (int x = 0; x < 8 && ok; ++x) {
                int sx = (flip ? 7 - x : x) + dx, sy = y + dy;
                double ref =
                    (sy < 0 || sy >= 8 || sx < 0 || sx >= 8) ? -2.0 : px(idx[i], c, sy, sx);
                ok = std::abs(b.x[((size_t(i) * 3 + c) * 8 + y) * 8 + x] - ref) < 1e-5;
              }
          if (ok && !found) {
            found = true;
            *moved = dy != 0 || dx != 0;
            *flipped = flip != 0;
          }
        }
    return found;
  };
  // On an 8-pixel side the shift reaches one pixel (an eighth), not CIFAR's four.
  EXPECT_EQ(max_shift(8), 1);
  EXPECT_EQ(max_shift(28), 4);
  EXPECT_EQ(max_shift(32), 4);
  EXPECT_EQ(max_shift(224), 28);
  // Over 40 epochs: with both, every sample some shift +/- flip, about half of them flipped;
  // with the shift alone, every sample a plain shift, and most of them moved.
  int flipped_count = 0, moved_count = 0;
  for (int64_t epoch = 0; epoch < 40; ++epoch) {
    Batch flipped_too, shifted;
    make_batch(d, meta, idx.data(), 3, both, 9, epoch, &flipped_too);
    make_batch(d, meta, idx.data(), 3, Augmentation{true, false}, 9, epoch, &shifted);
    for (int i = 0; i < 3; ++i) {
      bool moved = false, flipped = false;
      ASSERT_TRUE(matches(flipped_too, i, 1, true, &moved, &flipped)) << "epoch " << epoch;
      flipped_count += flipped;
      ASSERT_TRUE(matches(shifted, i, 1, false, &moved, &flipped)) << "epoch " << epoch;
      moved_count += moved;
    }
  }
  EXPECT_GT(flipped_count, 30);  // a fair coin: ~60 of 120 expected
  EXPECT_GT(moved_count, 60);    // 8 of 9 shifts move: ~107 of 120 expected
  // Augmentation depends on (seed, epoch, sample id), not on the batch position.
  std::vector<int64_t> one = {0};
  Batch single;
  make_batch(d, meta, one.data(), 1, both, 9, 5, &single);
  EXPECT_TRUE(std::equal(single.x.begin(), single.x.end(), aug.x.begin() + 2 * 192));
}

TEST(TrainData, PrefetcherDeliversTheRequestedBatch) {
  std::string dir = test::scratch_dir("train_data_prefetch");
  test::write_image_dataset(dir + "/d.h5", 8, 0, 4);
  DatasetMeta meta = read_dataset_meta(dir + "/d.h5");
  auto d = std::make_shared<const SplitData>(read_split(dir + "/d.h5", "train"));
  Prefetcher pf(meta);
  pf.request(d, {1, 2}, Augmentation{true, true}, 3, 1);
  Batch b = pf.take();
  Batch ref;
  std::vector<int64_t> idx = {1, 2};
  make_batch(*d, meta, idx.data(), 2, Augmentation{true, true}, 3, 1, &ref);
  EXPECT_EQ(b.x, ref.x);
  EXPECT_EQ(b.y, ref.y);
}

TEST(TrainData, KeepMaskJoinsOnSampleId) {
  std::string dir = test::scratch_dir("train_data_keep");
  test::write_image_dataset(dir + "/d.h5", 20, 0, 4);
  SplitData d = read_split(dir + "/d.h5", "train");
  int64_t nk = 0, nr = 0;
  test::write_filter(dir + "/f.h5", d.sample_id, &nk, &nr);
  const JoinTarget ds{dir + "/d.h5", "", d.sample_id, d.labels};
  auto keep = read_keep_indices(dir + "/f.h5", "keep", ds);
  auto rkeep = read_keep_indices(dir + "/f.h5", "random_keep", ds);
  EXPECT_EQ(int64_t(keep.size()), nk);
  EXPECT_EQ(int64_t(rkeep.size()), nr);
  for (auto i : keep) EXPECT_NE(i % 4, 0);
  for (auto i : rkeep) EXPECT_EQ(i % 2, 0);
  // A filter from another dataset: ids do not match -> clear error.
  std::vector<int64_t> other = d.sample_id;
  other[3] += 1000000;
  try {
    read_keep_indices(dir + "/f.h5", "keep", {dir + "/d.h5", "", other, d.labels});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sample_id"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_split(dir + "/f.h5", "train"), Error);  // wrong schema
}

TEST(TrainData, SweepExpandsInFixedOrder) {
  Config cfg =
      Config::load(pipeline_schema(), "",
                   {"scaled.sweep.arm=[full,filtered,random]", "scaled.sweep.seed=[1,2]",
                    "scaled.sweep.global_batch=[16,256]", "scaled.sweep.weight_decay=[0.005]"});
  Sweep s(cfg);
  ASSERT_EQ(s.size(), 12);
  ASSERT_EQ(s.axes().size(), 4u);
  EXPECT_EQ(s.axes()[0].key, "global_batch");
  EXPECT_EQ(s.axes()[1].key, "weight_decay");
  EXPECT_EQ(s.axes()[2].key, "seed");
  EXPECT_EQ(s.axes()[3].key, "arm");
  auto v = s.values(7);  // 7 = gb 256 (index 1), seed 1 (0), arm filtered (1)
  EXPECT_EQ(v[0].second, "256");
  EXPECT_EQ(v[2].second, "1");
  EXPECT_EQ(v[3].second, "filtered");
  Config c = s.apply(cfg, 7);
  EXPECT_EQ(c.get_int("scaled.global_batch"), 256);
  EXPECT_EQ(c.get_string("scaled.arm"), "filtered");
  EXPECT_DOUBLE_EQ(c.get_float("scaled.optimizer.weight_decay"), 0.005);
  EXPECT_EQ(cfg.get_string("scaled.arm"), "full");  // base untouched
  std::string t = s.table();
  EXPECT_EQ(t.substr(0, t.find('\n')), "index\tglobal_batch\tweight_decay\tseed\tarm");
  EXPECT_NE(t.find("\n11\t256\t0.005\t2\trandom\n"), std::string::npos) << t;
  EXPECT_THROW(s.values(12), UsageError);
  Config bad = Config::load(pipeline_schema(), "", {"scaled.sweep.nope=[1]"});
  EXPECT_THROW(Sweep{bad}, UsageError);
  Config badv = Config::load(pipeline_schema(), "", {"scaled.sweep.arm=[full,half]"});
  EXPECT_THROW(Sweep{badv}, UsageError);
  EXPECT_EQ(Sweep(Config::load(pipeline_schema(), "", {})).size(), 1);
}

TEST(TrainData, LabelOutsideTheClassesIsAnErrorNamingTheRow) {
  std::string dir = test::scratch_dir("train_data_labels");
  auto tr = test::synthetic_images(6, 4, 1, 0);
  tr.labels[2] = 9;
  test::write_dataset(dir + "/d.h5", tr, nullptr, 4, 8, 0, {0.5, 0.5, 0.5}, {0.2, 0.2, 0.2});
  try {
    read_split(dir + "/d.h5", "train");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/train/labels[2] = 9"), std::string::npos) << e.what();
  }
}

// The held-out split: stratified, a function of (seed, sample id) only, disjoint.
TEST(TrainData, HoldoutIsStratifiedKeyedBySampleIdAndDisjoint) {
  SplitData d;
  d.image = false;
  d.f = 1;
  for (int64_t i = 0; i < 300; ++i) {  // class sizes 50, 100, 150
    int32_t c = i < 50 ? 0 : i < 150 ? 1 : 2;
    d.labels.push_back(c);
    d.sample_id.push_back(1000 + 7 * i);
    d.features.push_back(float(i));
  }
  d.n = 300;
  HoldoutSplit s = split_holdout(d, 0.1, 42);
  EXPECT_EQ(s.train.size() + s.holdout.size(), 300u);
  std::map<int32_t, int> held;
  std::set<int64_t> ids;
  for (auto r : s.holdout) {
    ++held[d.labels[size_t(r)]];
    ids.insert(d.sample_id[size_t(r)]);
  }
  EXPECT_EQ(held[0], 5);
  EXPECT_EQ(held[1], 10);
  EXPECT_EQ(held[2], 15);
  for (auto r : s.train) EXPECT_EQ(ids.count(d.sample_id[size_t(r)]), 0u);
  EXPECT_TRUE(std::is_sorted(s.train.begin(), s.train.end()));
  // Reversing the rows holds out the same samples (by id), and another seed other ones.
  SplitData rev = d;
  std::reverse(rev.labels.begin(), rev.labels.end());
  std::reverse(rev.sample_id.begin(), rev.sample_id.end());
  std::set<int64_t> rev_ids;
  for (auto r : split_holdout(rev, 0.1, 42).holdout) rev_ids.insert(rev.sample_id[size_t(r)]);
  EXPECT_EQ(rev_ids, ids);
  std::set<int64_t> other;
  for (auto r : split_holdout(d, 0.1, 43).holdout) other.insert(d.sample_id[size_t(r)]);
  EXPECT_NE(other, ids);
  // A class of one sample keeps it for training; fraction 0 holds out nothing.
  SplitData one = d;
  one.labels[0] = 7;
  HoldoutSplit h = split_holdout(one, 0.5, 1);
  EXPECT_EQ(h.holdout.size(), 25u + 50u + 75u);  // llround(24.5) = 25 of class 0's 49
  EXPECT_TRUE(std::find(h.train.begin(), h.train.end(), 0) != h.train.end());
  EXPECT_TRUE(split_holdout(d, 0.0, 1).holdout.empty());
}

// Issue 15: an index of a sharded dataset copied without its shards read as zeros
// ("test acc 1", all labels and sample_ids 0). Every reader now refuses it.
TEST(TrainData, ShardedDatasetWithAMissingShardIsAnErrorNamingIt) {
  std::string dir = test::scratch_dir("train_data_missing_shard");
  const std::string path = dir + "/d.h5";
  test::write_image_dataset(path, 12, 4, 4);
  {
    h5::File f = h5::File::open_rw(path);
    f.set_attr("/", "shards", std::vector<std::string>{"d.shard-0.h5", "d.shard-1.h5"});
  }
  for (auto fn : std::vector<std::function<void()>>{
           [&] { read_split(path, "train"); }, [&] { read_dataset_meta(path); },
           [&] { has_split(path, "test"); }, [&] { h5::File::open(path); }}) {
    try {
      fn();
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("shard file " + dir + "/d.shard-0.h5 is missing"),
                std::string::npos)
          << e.what();
    }
  }
}
