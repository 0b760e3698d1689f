#include "train/holdout.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "data/rng.hpp"

namespace sieve::train {

HoldoutSplit split_holdout(const SplitData& d, double fraction, uint64_t seed) {
  HoldoutSplit out;
  std::map<int32_t, std::vector<std::pair<uint64_t, int64_t>>> by_class;  // (key, row)
  for (int64_t i = 0; i < d.n; ++i)
    by_class[d.labels[size_t(i)]].push_back(
        {data::hash_combine(seed, uint64_t(d.sample_id[size_t(i)])), i});
  std::vector<uint8_t> held(size_t(d.n), 0);
  for (auto& [cls, v] : by_class) {
    std::sort(v.begin(), v.end());
    const auto take = size_t(std::llround(fraction * double(v.size())));
    for (size_t k = 0; k < take && k + 1 < v.size(); ++k)  // keep one to train on
      held[size_t(v[k].second)] = 1;
  }
  for (int64_t i = 0; i < d.n; ++i) (held[size_t(i)] ? out.holdout : out.train).push_back(i);
  return out;
}

}  // namespace sieve::train
