// Inputs of shard_dataset: each kind of source (CIFAR, IDX, CSV, synthetic) describes the
// dataset it will produce (DatasetMeta) and produces any range of rows of a split on demand.
//
// The writer gives every rank chunk-aligned slices of every split and asks the source for
// those rows only; produce() must be a pure function of (split, rows) so that the output
// does not depend on the number of ranks. The writer's producer threads call produce()
// concurrently for disjoint row ranges while the main thread writes the previous batch:
// it must be thread-safe and must not call MPI or HDF5.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "config/config.hpp"
#include "data/meta.hpp"
#include "data/names.hpp"

namespace sieve::data {

// Where produce() puts rows: pointers to the first row's slot in each buffer (the writer
// hands each thread a slice of one batch). Null where the dataset has no such column.
struct Rows {
  uint8_t* images = nullptr;   // count * H*W*C (image sources)
  float* features = nullptr;   // count * F (tabular sources)
  int32_t* labels = nullptr;   // count
  uint8_t* noise = nullptr;    // count, kNoiseClean/Label/Outlier (sources with has_noise)
  int32_t* clean_labels = nullptr;  // count (sources with has_clean_labels)
};

class Source {
 public:
  virtual ~Source() = default;
  virtual const DatasetMeta& meta() const = 0;
  // Rows [row0, row0+count) of `split` into `out` (serial; the writer parallelises).
  virtual void produce(Split split, int64_t row0, int64_t count, const Rows& out) const = 0;
  // Only the labels (and noise, clean labels where the source has them) of those rows:
  // `out.images`/`out.features` are ignored. The default produces the rows in full.
  virtual void produce_labels(Split split, int64_t row0, int64_t count, const Rows& out) const;
  // Per-column mean/std of the training set when the source computes them itself
  // (tabular: every rank holds the whole table, so the result is rank-independent).
  // Empty: the writer accumulates exact integer pixel sums instead.
  virtual std::vector<double> exact_mean() const { return {}; }
  virtual std::vector<double> exact_std() const { return {}; }
};

// Build the source named by data.source from `cfg` (data.path may be overridden by
// `input`). Validates the input on the ranks and fails collectively with one message
// (see fail_collectively) before anything is written.
std::unique_ptr<Source> open_source(const Config& cfg, const std::string& input, const Comm& comm);

// Individual sources (also used by tests).
std::unique_ptr<Source> open_cifar(const std::string& dir, bool cifar100,
                                   const std::vector<std::string>& class_names, const Comm& comm);
std::unique_ptr<Source> open_idx(const std::string& dir, const std::vector<std::string>& class_names,
                                 const Comm& comm);
std::unique_ptr<Source> open_csv(const std::string& path, const std::string& label_column,
                                 double test_fraction, uint64_t seed,
                                 const std::vector<std::string>& class_names, const Comm& comm);

struct FolderOptions {
  int size = 224, resize = 0, channels = 3;
  bool skip_bad = false;
  double test_fraction = 0.1;
  uint64_t seed = 0;
};
std::unique_ptr<Source> open_folder(const std::string& root, const FolderOptions& opt,
                                    const std::vector<std::string>& class_names, const Comm& comm);

// The generator/split seed: data.seed, or (when -1) one derived from run.seed.
uint64_t data_seed(const Config& cfg);

struct SyntheticSpec;
// The synthetic generator's parameters as configured (`data.synthetic.*`, data_seed),
// before the consistency checks open_source makes.
SyntheticSpec synthetic_spec(const Config& cfg);

// Errors every rank must see alike go through agree_on_error / on_root_agreed /
// agreed_step (comm/comm.hpp): the user sees one message, not one per rank.
// Run `fn` on every rank and agree on the outcome.
template <typename Fn>
void all_checked(const Comm& comm, Fn&& fn) {
  std::string err;
  int code = 1;
  try {
    fn();
  } catch (const Error& e) {
    err = e.what();
    code = e.exit_code();
  }
  int c = comm.allreduce_max(err.empty() ? 0 : code);
  agree_on_error(comm, err, c ? c : 1);
}

}  // namespace sieve::data
