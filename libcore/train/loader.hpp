// Training data: the dataset split in memory, the rank-count-independent distributed
// sampler, augmentation, and batch assembly with a one-batch prefetch thread.
//
// Reading (the in-memory path; train/stream.hpp streams data larger than memory): every
// rank reads the whole split once, in a few large sequential row-block reads (images are
// uint8, so CIFAR-10 is 150 MB). A per-epoch global permutation touches
// every sample from every rank over an epoch, so holding the split is what makes the
// sample order independent of the rank count; sharded inputs (virtual datasets) read the
// same way.
//
// Order: epoch e uses permutation P_e = keyed_order(active samples, seed, e). Global batch b of
// the epoch is P_e[b*G, (b+1)*G); rank r of R takes the contiguous part block_range(G, r, R)
// of it. So the multiset of samples per step, and the order of samples inside the global
// batch, do not depend on R. Augmentation draws come from hash(seed, epoch, sample_id), so
// a sample is cropped/flipped identically whichever rank processes it.
#pragma once
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "data/dataset_file.hpp"
#include "util/hash.hpp"

namespace sieve::train {

// One split ("train" or "test") of a dataset file, in memory.
struct SplitData {
  bool image = true;
  int64_t n = 0;
  int h = 0, w = 0, c = 0;  // images: [n,h,w,c] uint8 NHWC
  int f = 0;                // tabular: [n,f] float32
  std::vector<uint8_t> images;
  std::vector<float> features;
  std::vector<int32_t> labels;     // [n]
  std::vector<int64_t> sample_id;  // [n]
  size_t sample_floats() const { return image ? size_t(c) * h * w : size_t(f); }
};

// The dataset's kind, sizes, classes, statistics and fingerprint (data/meta.hpp).
using data::DatasetMeta;

DatasetMeta read_dataset_meta(const std::string& path);
// Whole split; Error naming file/dataset for a wrong schema, type or shape.
SplitData read_split(const std::string& path, const std::string& split);
// Rows [begin, end) of a split of an open dataset (extract_features streams blocks of them).
SplitData read_rows(const data::DatasetFile& ds, data::Split s, int64_t begin, int64_t end);
bool has_split(const std::string& path, const std::string& split);

// The training split a filter is joined with: its file, fingerprint, ids and labels.
struct JoinTarget {
  std::string path, fingerprint;
  const std::vector<int64_t>& ids;
  const std::vector<int32_t>& labels;
};
// Keep-mask from a filter file (`which` = "keep" or "random_keep"), joined on sample_id
// against the dataset's training split. Returns the indices (into ids) to keep. Errors name
// the filter file when it was made from another dataset (io/lineage.hpp), when a dataset
// sample has no entry or the filter lists other ids, repeats an id, or gives a sample
// another label than the dataset.
std::vector<int64_t> read_keep_indices(const std::string& filter_path, const std::string& which,
                                       const JoinTarget& dataset);

// Every seeded draw in training uses the one 64-bit mixer (util/hash.hpp).
using ::sieve::mix64;

// Throws a UsageError naming `key` (e.g. "scaled.global_batch") when a global batch of
// `global_batch` samples does not fit the `samples` that take part (`what` says which, e.g.
// "the filtered arm's training samples").
void check_global_batch(int64_t global_batch, int64_t samples, const std::string& key,
                        const std::string& what);

// Optimizer steps in one epoch over `samples`: whole global batches only, the last partial
// batch left to the next epoch's order (every sampler, and scaled.budget: steps, count so).
inline int64_t whole_batches(int64_t samples, int64_t global_batch) {
  return samples / global_batch;
}

// One warning line (rank 0) when a global batch does not split evenly over the ranks: the
// gradients are still weighted exactly (each rank's part by its share of the batch), but
// the ranks' BatchNorm statistics see slightly different batch sizes.
void warn_uneven_split(int64_t global_batch, int ranks, const std::string& key);

// The order of an epoch: every row's place is its own draw, hash(key, row), and rows go in
// ascending draw. So the order of any subset of rows is the order of the whole with the other
// rows left out: two runs that differ only in which rows take part (the sweep's full,
// filtered and random arms of one seed) meet their common rows in the same order (common
// random numbers), and their paired difference measures the rows removed rather than another
// shuffle. Returns positions into `rows` in that order. Identical on every platform and rank.
std::vector<int64_t> keyed_order(const std::vector<int64_t>& rows, uint64_t key);
// The key of epoch e's order under a training seed.
uint64_t epoch_order_key(uint64_t seed, int64_t epoch);

class Sampler {
 public:
  // `active`: indices into the split that take part (all, or a keep-mask's survivors).
  // Steps per epoch: floor(active/G) (last partial batch dropped). A global batch larger
  // than `active` is refused (check_global_batch): it would silently train at a smaller
  // batch than asked, and runs at different asked batches would look alike.
  Sampler(std::vector<int64_t> active, int64_t global_batch, uint64_t seed);
  int64_t steps_per_epoch() const { return steps_; }
  int64_t batch_size() const { return batch_; }  // samples per step (= G)
  int64_t num_active() const { return int64_t(active_.size()); }
  // This rank's contiguous part of global batch `step` of `epoch` (indices into the split).
  std::vector<int64_t> rank_part(int64_t epoch, int64_t step, int rank, int size);

 private:
  void ensure_epoch(int64_t epoch);
  std::vector<int64_t> active_, perm_;
  int64_t global_, batch_, steps_;
  uint64_t seed_;
  int64_t perm_epoch_ = -1;
};

struct Batch {
  int n = 0;
  std::vector<float> x;    // [n, C, H, W] NCHW normalised (or [n, F])
  std::vector<int32_t> y;  // [n]
};

// What make_batch does to an image before it normalises it (tables are never changed).
struct Augmentation {
  bool shift = false;  // a random translation, zero padding (a crop of the padded image)
  bool flip = false;   // left to right, with probability 1/2
};

// The largest shift each way along an image side of `side` pixels: an eighth of it, rounded
// (4 on 32 and 28, CIFAR's crop with padding 4; 2 on 16; 1 on 8), so that a small image keeps
// most of itself: 4 pixels of an 8x8 digit would crop half of it away.
int max_shift(int side);

// Assemble samples `idx` into a batch, each image shifted and/or flipped as `aug` says (the
// draws hash (seed, epoch, sample id)), then (x/255 - mean)/std per channel (tabular: per
// feature).
void make_batch(const SplitData& d, const DatasetMeta& meta, const int64_t* idx, int n,
                Augmentation aug, uint64_t seed, int64_t epoch, Batch* out);

// Builds batches on a background thread one ahead of the consumer (pure CPU work; the
// thread never calls MPI or HDF5). request() queues a job on rows `idx` of `d` (held until
// the job is done); take() waits for the oldest one.
class Prefetcher {
 public:
  explicit Prefetcher(const DatasetMeta& meta) : meta_(meta) {}
  ~Prefetcher();
  void request(std::shared_ptr<const SplitData> d, std::vector<int64_t> idx, Augmentation aug,
               uint64_t seed, int64_t epoch);
  Batch take();
  bool pending() const { return fut_.valid(); }

 private:
  const DatasetMeta& meta_;
  std::future<Batch> fut_;
};

}  // namespace sieve::train
