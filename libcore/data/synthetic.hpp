// Built-in synthetic image dataset: K classes of procedurally drawn shapes and textures.
//
// Class c is a family: a shape (disc, square, triangle, ring, plus, flower, bar, crescent),
// a texture (solid, stripes, checker, radial shading) and a hue (a quarter of the samples
// take any hue, so colour alone is not enough), with per-sample random position, scale,
// rotation, colour jitter, a random gradient background, an occasional distractor disc
// and Gaussian pixel noise. Train sample i and test sample j belong to
// class i % K and j % K (exactly balanced). A configured fraction of training samples gets
// a wrong label (label noise) and another fraction is replaced by an outlier image (static
// or soft colour blobs, unlike any class); the counts are exact (round(fraction * N)) and
// the chosen samples come from a keyed permutation of the indices. The test split is clean.
//
// Every sample is a pure function of (seed, split, index): the same seed gives the same
// dataset whatever the number of ranks or threads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/names.hpp"

namespace sieve::data {

struct SyntheticSpec {
  int classes = 10;
  int64_t train_per_class = 500, test_per_class = 100;
  int height = 32, width = 32, channels = 3;
  double label_noise = 0.05, outliers = 0.02, pixel_noise = 0.10;
  uint64_t seed = 1234;
};

struct SyntheticSample {
  int32_t label;       // label as written (wrong for label noise)
  int32_t true_class;  // the class the image was drawn from (nominal class for outliers)
  uint8_t noise;       // kNoiseClean, kNoiseLabel or kNoiseOutlier
};

class SyntheticGenerator {
 public:
  explicit SyntheticGenerator(const SyntheticSpec& spec);
  const SyntheticSpec& spec() const { return spec_; }
  int64_t rows(Split s) const { return s == Split::Train ? n_train_ : n_test_; }
  int64_t row_bytes() const { return int64_t(spec_.height) * spec_.width * spec_.channels; }
  int64_t label_noise_count() const { return n_label_noise_; }
  int64_t outlier_count() const { return n_outliers_; }
  std::vector<std::string> class_names() const;

  // Draw sample `index` of `split` into `image` (H*W*C bytes, HWC).
  SyntheticSample generate(Split split, int64_t index, uint8_t* image) const;
  // Only the label / noise decision (cheap; no drawing).
  SyntheticSample describe(Split split, int64_t index) const;
  // Rows [row0, row0+count), OpenMP over samples. `noise` may be null.
  void generate_batch(Split split, int64_t row0, int64_t count, uint8_t* images, int32_t* labels,
                      uint8_t* noise) const;

 private:
  void draw_class(int cls, uint64_t sample_seed, uint8_t* image) const;
  void draw_outlier(uint64_t sample_seed, uint8_t* image) const;
  SyntheticSpec spec_;
  int64_t n_train_, n_test_, n_label_noise_, n_outliers_;
  uint64_t noise_key_;
};

}  // namespace sieve::data
