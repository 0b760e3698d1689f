#include "train/clean_accuracy.hpp"

#include <algorithm>

#include "io/h5.hpp"
#include "util/error.hpp"

namespace sieve::train {

std::optional<CleanLabelAccuracy> CleanLabelAccuracy::open(const std::string& dataset_path) {
  const h5::File f = h5::File::open(dataset_path);
  if (!f.exists("/train/clean_labels")) return std::nullopt;
  const auto labels = f.read_all<int32_t>("/train/clean_labels");
  const auto ids = f.read_all<int64_t>("/train/sample_id");
  SIEVE_CHECK(labels.size() == ids.size(), dataset_path, ": /train/clean_labels has ",
              labels.size(), " rows but /train/sample_id has ", ids.size());
  CleanLabelAccuracy a;
  a.clean_.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) a.clean_.emplace(ids[i], labels[i]);
  return a;
}

void CleanLabelAccuracy::record(const SplitData& data, const std::vector<int64_t>& rows,
                                const float* logits, int k) {
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t id = data.sample_id[size_t(rows[r])];
    const auto it = clean_.find(id);
    SIEVE_ASSERT(it != clean_.end(), "clean-label accuracy: sample id ", id,
                 " is not in the training split");
    const float* z = logits + r * size_t(k);
    // The first maximum, as nn::softmax_cross_entropy counts the trainer's accuracy.
    counts_[0] += int(std::max_element(z, z + k) - z) == it->second ? 1 : 0;
    counts_[1] += 1;
  }
}

std::optional<double> CleanLabelAccuracy::end_epoch(const Comm& comm) {
  double c[2] = {counts_[0], counts_[1]};
  comm.allreduce_sum(c, 2);
  counts_[0] = counts_[1] = 0;
  if (c[1] <= 0) return std::nullopt;
  return c[0] / c[1];
}

}  // namespace sieve::train
