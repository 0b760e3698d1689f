// Reader of `sieve.dataset/1` files (docs/formats.md): what later stages use to get at
// the data shard_dataset wrote.
//
//   auto ds = sieve::data::DatasetFile::open(path);          // validates the schema
//   int64_t n = ds.rows(Split::Train);
//   std::vector<uint8_t> img(ds.row_elems() * 64);
//   ds.read_images(Split::Train, 0, 64, img.data());          // rows [0, 64), NHWC
//   auto labels = ds.read_labels(Split::Train, 0, 64);
//
// The file is opened by each rank on its own (no MPI-IO): every rank may read any rows,
// and a sharded dataset's index (virtual datasets over `<stem>.shard-<k>.h5`) reads like a
// single file. open() checks the schema, kind, shapes, types, attribute sizes, that every
// label lies in 0..num_classes-1, that no sample_id repeats and, for a sharded dataset, that every shard file exists
// (HDF5 would silently read zeros from a missing one). Errors name the file and object.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/meta.hpp"
#include "data/names.hpp"
#include "io/h5.hpp"

namespace sieve::data {

class DatasetFile {
 public:
  struct Options {
    bool check_labels = true;  // read every label once to check its range
  };
  static DatasetFile open(const std::string& path) { return open(path, Options{}); }
  static DatasetFile open(const std::string& path, const Options& opt);

  const std::string& path() const { return file_.path(); }
  // Kind, sizes, classes, training-split statistics, fingerprint and source (description
  // and injected-noise fields are left empty: the stages that need them read the attributes).
  const DatasetMeta& meta() const { return meta_; }
  Kind kind() const { return meta_.kind; }
  bool is_image() const { return meta_.is_image(); }
  std::string source() const { return meta_.source; }
  // The content fingerprint (io/lineage.hpp); "" for a file written without one.
  const std::string& fingerprint() const { return meta_.fingerprint; }
  int64_t rows(Split s) const { return meta_.rows(s); }
  int64_t height() const { return meta_.height; }    // images (0 for tabular)
  int64_t width() const { return meta_.width; }
  int64_t channels() const { return meta_.channels; }
  int64_t features() const { return meta_.features; }  // tabular (0 for images)
  // Elements per row: H*W*C (uint8) or F (float32).
  int64_t row_elems() const { return meta_.row_elems(); }
  // Bytes per row of sample data: uint8 images, float32 features.
  int64_t row_bytes() const { return meta_.row_bytes(); }
  int64_t num_classes() const { return meta_.num_classes; }
  const std::vector<std::string>& class_names() const { return meta_.class_names; }
  const std::vector<std::string>& feature_names() const { return meta_.feature_names; }
  // Per channel (images, 0..1 units of pixel/255) or per feature, over the training set.
  const std::vector<double>& mean() const { return meta_.mean; }
  const std::vector<double>& stddev() const { return meta_.std; }
  int num_shards() const { return shards_; }
  bool has_noise_truth(Split s) const { return has_noise_[int(s)]; }
  // The resolved config of the run that wrote the file.
  std::string config_yaml() const;

  // Rows [begin, end) of a split. Buffers hold (end - begin) * row_elems() elements.
  void read_images(Split s, int64_t begin, int64_t end, uint8_t* out) const;
  void read_features(Split s, int64_t begin, int64_t end, float* out) const;
  void read_labels(Split s, int64_t begin, int64_t end, int32_t* out) const;
  void read_sample_ids(Split s, int64_t begin, int64_t end, int64_t* out) const;
  void read_noise_truth(Split s, int64_t begin, int64_t end, uint8_t* out) const;
  std::vector<uint8_t> read_images(Split s, int64_t begin, int64_t end) const;
  std::vector<float> read_features(Split s, int64_t begin, int64_t end) const;
  std::vector<int32_t> read_labels(Split s, int64_t begin, int64_t end) const;
  std::vector<int64_t> read_sample_ids(Split s, int64_t begin, int64_t end) const;
  // Zeros when the split has no noise_truth (real data).
  std::vector<uint8_t> read_noise_truth(Split s, int64_t begin, int64_t end) const;
  // Whole-split conveniences.
  std::vector<int32_t> labels(Split s) const { return read_labels(s, 0, rows(s)); }
  std::vector<int64_t> sample_ids(Split s) const { return read_sample_ids(s, 0, rows(s)); }

  // Rows at arbitrary (sorted or not) indices, for shuffled batches: runs of consecutive
  // indices are read with one call each. out: idx.size() * row_elems() elements.
  void gather_images(Split s, const std::vector<int64_t>& idx, uint8_t* out) const;
  void gather_features(Split s, const std::vector<int64_t>& idx, float* out) const;
  void gather_labels(Split s, const std::vector<int64_t>& idx, int32_t* out) const;

  const h5::File& h5() const { return file_; }

 private:
  DatasetFile() = default;
  void check_range(Split s, int64_t begin, int64_t end) const;
  template <typename T>
  void gather(const std::string& name, Split s, const std::vector<int64_t>& idx, int64_t elems, T* out) const;
  h5::File file_;
  DatasetMeta meta_;  // kind, sizes, classes, statistics, fingerprint
  bool has_noise_[2] = {false, false};
  int shards_ = 1;
};

}  // namespace sieve::data
