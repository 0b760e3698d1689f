#include "train/holdout.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "data/rng.hpp"
#include "util/error.hpp"

namespace sieve::train {

namespace {

// Per class, the rows ordered by the keyed hash of (seed, sample id): (key, row).
std::map<int32_t, std::vector<std::pair<uint64_t, int64_t>>> keyed_by_class(const SplitData& d,
                                                                            uint64_t seed) {
  std::map<int32_t, std::vector<std::pair<uint64_t, int64_t>>> by_class;
  for (int64_t i = 0; i < d.n; ++i)
    by_class[d.labels[size_t(i)]].push_back(
        {data::hash_combine(seed, uint64_t(d.sample_id[size_t(i)])), i});
  for (auto& [cls, v] : by_class) std::sort(v.begin(), v.end());
  return by_class;
}

}  // namespace

HoldoutSplit split_holdout(const SplitData& d, double fraction, uint64_t seed) {
  HoldoutSplit out;
  std::vector<uint8_t> held(size_t(d.n), 0);
  for (auto& [cls, v] : keyed_by_class(d, seed)) {
    const auto take = size_t(std::llround(fraction * double(v.size())));
    for (size_t k = 0; k < take && k + 1 < v.size(); ++k)  // keep one to train on
      held[size_t(v[k].second)] = 1;
  }
  for (int64_t i = 0; i < d.n; ++i) (held[size_t(i)] ? out.holdout : out.train).push_back(i);
  return out;
}

std::vector<int32_t> split_folds(const SplitData& d, int folds, uint64_t seed) {
  SIEVE_ASSERT(folds >= 2, "split_folds: folds must be at least 2");
  std::vector<int32_t> fold(size_t(d.n), -1);
  // Each class continues the rotation where the previous one stopped, so that the classes'
  // remainders do not all land in fold 0 (fold sizes differ by at most one overall too).
  size_t next = 0;
  for (const auto& [cls, v] : keyed_by_class(d, seed))
    for (const auto& kv : v) fold[size_t(kv.second)] = int32_t(next++ % size_t(folds));
  return fold;
}

}  // namespace sieve::train
