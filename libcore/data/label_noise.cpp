#include "data/label_noise.hpp"

#include <algorithm>
#include <cmath>

#include "data/names.hpp"
#include "data/rng.hpp"
#include "util/error.hpp"

namespace sieve::data {
namespace {

class LabelNoiseSource final : public Source {
 public:
  LabelNoiseSource(std::unique_ptr<Source> inner, double fraction, uint64_t seed)
      : inner_(std::move(inner)), meta_(inner_->meta()), seed_(seed) {
    SIEVE_ASSERT(!meta_.has_noise);
    SIEVE_CHECK(meta_.num_classes >= 2, "data.label_noise needs at least 2 classes, found ",
                meta_.num_classes);
    const int64_t n = meta_.rows(Split::Train);
    const auto flips = int64_t(std::llround(fraction * double(n)));
    // The `flips` rows of smallest hash: nth_element over (hash, row) pairs.
    std::vector<std::pair<uint64_t, int64_t>> keyed(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) keyed[size_t(i)] = {hash3(seed_, uint64_t(i), 1), i};
    flipped_.assign(size_t(n), 0);
    if (flips > 0) {
      std::nth_element(keyed.begin(), keyed.begin() + (flips - 1), keyed.end());
      for (int64_t k = 0; k < flips; ++k) flipped_[size_t(keyed[size_t(k)].second)] = 1;
    }
    meta_.has_noise = true;
    meta_.description += cat("; ", flips, " of ", n, " training labels flipped (data.label_noise=",
                             fraction, ")");
  }

  const DatasetMeta& meta() const override { return meta_; }

  void produce(Split split, int64_t row0, int64_t count, const Rows& out) const override {
    Rows inner_out = out;
    inner_out.noise = nullptr;  // the inner source has no noise column
    inner_->produce(split, row0, count, inner_out);
    if (out.noise) std::fill_n(out.noise, count, uint8_t(kNoiseClean));
    if (split != Split::Train) return;
    const int64_t C = meta_.num_classes;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = row0 + i;
      if (!flipped_[size_t(row)]) continue;
      const auto shift = int64_t(1 + hash3(seed_, uint64_t(row), 2) % uint64_t(C - 1));
      out.labels[i] = int32_t((int64_t(out.labels[i]) + shift) % C);
      if (out.noise) out.noise[i] = uint8_t(kNoiseLabel);
    }
  }

  std::vector<double> exact_mean() const override { return inner_->exact_mean(); }
  std::vector<double> exact_std() const override { return inner_->exact_std(); }

 private:
  std::unique_ptr<Source> inner_;
  DatasetMeta meta_;
  uint64_t seed_;
  std::vector<uint8_t> flipped_;  // [train rows]
};

}  // namespace

std::unique_ptr<Source> with_label_noise(std::unique_ptr<Source> inner, double fraction,
                                         uint64_t seed) {
  return std::make_unique<LabelNoiseSource>(std::move(inner), fraction, seed);
}

}  // namespace sieve::data
