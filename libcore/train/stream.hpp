// Where a rank's training samples come from, step by step: the whole split in memory
// (MemorySource, the exact global permutation of loader.hpp's Sampler) or streamed from the
// dataset file in bounded windows (StreamSource), chosen by data.loader / data.memory_budget_mb.
//
// Streaming order (docs/training.md, "Data larger than memory"): the active rows of the split
// are cut into chunks of consecutive rows (chunk_rows). Epoch e permutes the chunks with
// (seed, e); rank r of R takes every R-th chunk of that permutation. A rank walks its chunks
// W at a time ("windows"): a window holds those chunks' active rows (plus the few samples
// the previous window left over) in memory, permuted with (seed, e, window), and yields this
// rank's per-step parts of b_r = block_range(G, r, R).size() samples; what is left (< b_r)
// is carried into the next window, the last carry of the epoch is dropped. So:
//   * each rank reads only its own chunks, in large sequential reads, once per epoch;
//   * memory per rank is two windows (the current one and the next, read ahead on a
//     thread) plus the batches being built: bounded by data.memory_budget_mb;
//   * the order is deterministic for a given seed and rank count, and CHANGES with the rank
//     count (which rank reads which chunk), unlike the in-memory path; with one rank and one
//     window covering the split it is exactly the in-memory order (tested);
//   * samples mix within a window (W chunks), not across the whole split: the chunk
//     permutation is what spreads classes over the epoch.
// The plan of an epoch (which rows, in which order, at which step) is computed from row
// indices alone, so a run resumed at (epoch, step) continues exactly without replaying data.
#pragma once
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "train/loader.hpp"

namespace sieve::train {

// This rank's samples of one step: rows of `data` (which stays alive while held).
struct StepPart {
  std::shared_ptr<const SplitData> data;
  std::vector<int64_t> rows;
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t steps_per_epoch() const = 0;
  virtual int64_t batch_size() const = 0;  // global samples per step
  virtual int64_t num_active() const = 0;
  // This rank's part of global batch `step` of `epoch`. Called in step order (a resumed run
  // starts anywhere); earlier windows are released as later steps are asked for.
  virtual StepPart rank_part(int64_t epoch, int64_t step) = 0;
  // What a checkpoint must match for an exact resume ("memory", or the stream's geometry).
  virtual std::string describe() const = 0;
  // Wait for background reads of the dataset file: call before the caller's own HDF5 work
  // (Debian's HDF5 is not thread-safe).
  virtual void quiesce() {}
};

// The split in memory: Sampler's global permutation (rank-count independent).
class MemorySource final : public SampleSource {
 public:
  MemorySource(const SplitData& split, std::vector<int64_t> active, int64_t global_batch,
               uint64_t seed, int rank, int size);
  int64_t steps_per_epoch() const override { return sampler_.steps_per_epoch(); }
  int64_t batch_size() const override { return sampler_.batch_size(); }
  int64_t num_active() const override { return sampler_.num_active(); }
  StepPart rank_part(int64_t epoch, int64_t step) override;
  std::string describe() const override { return "memory"; }

 private:
  std::shared_ptr<const SplitData> split_;  // non-owning alias of the caller's split
  Sampler sampler_;
  int rank_, size_;
};

struct StreamGeometry {
  int64_t chunk_rows = 0;     // consecutive rows per chunk
  int64_t window_chunks = 0;  // chunks per window
};
// Chunk and window sizes for a per-rank budget: a window is at most a quarter of the budget
// (two windows resident, batches and the model beside them), a chunk at most 4 MiB and at
// most 1/16 of a window, so every window mixes at least 16 chunks when it can.
StreamGeometry stream_geometry(int64_t row_bytes, int64_t budget_bytes);

class StreamSource final : public SampleSource {
 public:
  // `active`: sorted indices into the split that take part (all, or a keep-mask's survivors);
  // this is rank `rank` of `size` (the plan needs no communication).
  StreamSource(const std::string& path, data::Split split, std::vector<int64_t> active,
               int64_t global_batch, uint64_t seed, int rank, int size, StreamGeometry geometry);
  ~StreamSource() override;
  int64_t steps_per_epoch() const override { return steps_; }
  int64_t batch_size() const override { return global_; }
  int64_t num_active() const override { return int64_t(active_.size()); }
  StepPart rank_part(int64_t epoch, int64_t step) override;
  std::string describe() const override;
  void quiesce() override;

  // Bytes of sample data this rank holds now (windows resident + being read): for tests.
  int64_t resident_bytes() const;

 private:
  struct Window {
    std::vector<int64_t> rows;   // storage order: carried rows, then the chunks' active rows
    std::vector<int64_t> order;  // permutation of storage positions (consumption order)
    int64_t first_step = 0, steps = 0;
  };
  void plan_epoch(int64_t epoch);
  // Reads window w's rows (prev: window w-1's data, for the carried rows, if held). Touches
  // only `windows_` (fixed for the epoch) and the file: safe on the read-ahead thread.
  std::shared_ptr<const SplitData> load(size_t w, std::shared_ptr<const SplitData> prev) const;
  std::shared_ptr<const SplitData> window_data(size_t w);

  std::string path_;
  data::Split split_;
  std::vector<int64_t> active_;
  int64_t global_, steps_ = 0;
  uint64_t seed_;
  int rank_, size_;
  std::vector<int64_t> parts_;  // every rank's samples per step: block_range(G, q, R)
  int64_t part_ = 0;            // this rank's: parts_[rank_]
  StreamGeometry geo_;
  int64_t planned_epoch_ = -1;
  std::vector<Window> windows_;
  // Resident window data by window index; the read-ahead of the next window.
  std::vector<std::shared_ptr<const SplitData>> resident_;
  std::future<std::shared_ptr<const SplitData>> ahead_;
  size_t ahead_window_ = 0;
};

// A split to evaluate on: in memory, or read from the dataset file a block at a time (the
// streaming path: the test split, and pretrain's held-out rows of the training split).
struct EvalSplit {
  const SplitData* mem = nullptr;  // in memory, or else:
  std::string path;                // streamed from this dataset file
  data::Split split = data::Split::Test;
  int64_t block_rows = 0;          // rows spanned by one read
  int64_t rows = 0;                // rows of the split
  bool empty() const { return mem == nullptr && path.empty(); }
};

// Calls fn(block, local) over this rank's share (block_range over `positions`, or over the
// whole split when null) of `eval`: `block` holds rows, `local` the indices into it, in order.
// In memory: one call; streamed: one call per read of at most block_rows consecutive rows
// (sparse positions, like held-out rows, cost the rows between them).
void for_each_eval_block(const EvalSplit& eval, const std::vector<int64_t>* positions, int rank,
                         int size,
                         const std::function<void(const SplitData&, const std::vector<int64_t>&)>& fn);

// data.loader (auto | memory | stream) and data.memory_budget_mb decide: stream when asked, or
// (auto) when the training split's sample bytes exceed the per-rank budget.
bool use_stream(const std::string& loader, int64_t split_bytes, int64_t budget_bytes);

// A training tool's input, as data.loader decides: in memory, the splits themselves; streamed,
// the training split's index only (geometry, labels, sample ids: what holdout and keep-mask
// joins need) and the file to stream from.
struct TrainInput {
  std::string path;
  DatasetMeta meta;
  SplitData train;  // whole split (memory) or index only (stream)
  SplitData test;   // memory only
  bool has_test = false, stream = false;
  StreamGeometry geometry;  // stream only
  int64_t budget_bytes = 0;
  int64_t row_bytes = 0;                 // bytes of sample data per row
  int64_t train_rows = 0, test_rows = 0;
};
// Reads the dataset per data.loader / data.memory_budget_mb (cfg), logging the choice once.
TrainInput load_train_input(const std::string& path, const Config& cfg);
// The sample source over `active` (sorted indices into the training split).
std::unique_ptr<SampleSource> make_source(const TrainInput& in, std::vector<int64_t> active,
                                          int64_t global_batch, uint64_t seed, const Comm& comm);
// The test split, or the training split (for held-out rows), to evaluate on.
EvalSplit eval_split(const TrainInput& in, data::Split split);

}  // namespace sieve::train
