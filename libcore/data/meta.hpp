// What a dataset is: its kind, sizes, classes and the label noise injected into it. One
// struct for both ends of the dataset file: a Source describes the dataset it will produce
// with it (shard_dataset), and DatasetFile::meta() reads it back from a written file for the
// stages after (pretrain, extract_features, train_scaled), where the per-channel statistics
// and the content fingerprint are filled in too.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/names.hpp"

namespace sieve::data {

struct DatasetMeta {
  Kind kind = Kind::Image;
  std::string source;                           // "synthetic", "cifar10", ...
  std::string description;                      // human-readable: where the data came from
  int64_t n[2] = {0, 0};                        // rows per split (Train, Test)
  int64_t height = 0, width = 0, channels = 0;  // images
  int64_t features = 0;                         // tabular
  std::vector<std::string> feature_names;       // tabular: column names
  int64_t num_classes = 0;
  std::vector<std::string> class_names;
  bool has_noise = false;         // writes noise_truth / noise_kind
  bool has_clean_labels = false;  // writes clean_labels (the label before any flip)
  // data.label_noise as applied (root attributes label_noise_*); kind empty: none.
  struct InjectedNoise {
    std::string kind;  // symmetric, pairwise, instance, projection
    double rate = 0;
    int64_t seed = 0, count = 0;  // count: training rows flipped by data.label_noise
    std::vector<int64_t> pairs;   // pairwise: partner of each class, -1 for none
  } injected;
  std::vector<std::string> skipped;  // input files left out (attribute skipped_inputs)
  // Written datasets only (DatasetFile::meta()): per-channel (image, 0..1 units) or
  // per-feature mean and standard deviation of the training split, and the content
  // fingerprint that lineage records (io/lineage.hpp).
  std::vector<double> mean, std;
  std::string fingerprint;

  int64_t rows(Split s) const { return n[int(s)]; }
  bool is_image() const { return kind == Kind::Image; }
  // Elements per row: H*W*C (uint8) or F (float32).
  int64_t row_elems() const { return is_image() ? height * width * channels : features; }
  int64_t row_bytes() const { return is_image() ? row_elems() : row_elems() * 4; }
};

}  // namespace sieve::data
