#include "train/dynamics.hpp"

#include <cmath>
#include <limits>

#include "io/h5.hpp"
#include "io/schemas.hpp"
#include "util/error.hpp"

namespace sieve::train {

float margin_of(const float* logits, int k, int y) {
  float other = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < k; ++j)
    if (j != y && logits[j] > other) other = logits[j];
  return k > 1 ? logits[y] - other : 0.0f;
}

TrainingDynamics::TrainingDynamics(const SplitData& split, int64_t epochs,
                                   const std::vector<int64_t>& heldout_rows)
    : epochs_(epochs), ids_(split.sample_id), labels_(split.labels), heldout_(ids_.size(), 0) {
  column_.reserve(ids_.size());
  for (size_t i = 0; i < ids_.size(); ++i) column_[ids_[i]] = int64_t(i);
  for (int64_t row : heldout_rows) {
    SIEVE_ASSERT(row >= 0 && size_t(row) < ids_.size(), "training dynamics: held-out row ", row,
                 " of ", ids_.size());
    heldout_[size_t(row)] = 1;
  }
  epoch_sum_.assign(ids_.size(), 0.0f);
  epoch_seen_.assign(ids_.size(), 0.0f);
}

void TrainingDynamics::record(int64_t epoch, const SplitData& data,
                              const std::vector<int64_t>& rows, const float* logits, int k) {
  (void)epoch;  // the accumulators are per epoch; end_epoch files them under its number
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t row = rows[r];
    auto it = column_.find(data.sample_id[size_t(row)]);
    SIEVE_ASSERT(it != column_.end(), "training dynamics: sample id ", data.sample_id[size_t(row)],
                 " is not in the training split");
    const size_t c = size_t(it->second);
    epoch_sum_[c] += margin_of(logits + r * size_t(k), k, data.labels[size_t(row)]);
    epoch_seen_[c] += 1.0f;
  }
}

void TrainingDynamics::end_epoch(const Comm& comm, int64_t epoch) {
  SIEVE_ASSERT(epoch >= 0 && epoch < epochs_, "training dynamics: epoch ", epoch, " of ", epochs_);
  // A sample is trained by one rank per epoch: the sums are that rank's value (or, when a
  // sample appears twice in one epoch — padding of an uneven last step — their sum / count).
  comm.allreduce_sum(epoch_sum_.data(), epoch_sum_.size());
  comm.allreduce_sum(epoch_seen_.data(), epoch_seen_.size());
  if (comm.is_root()) {
    const size_t n = ids_.size();
    if (table_.empty()) table_.assign(size_t(epochs_) * n, std::nanf(""));
    float* row = table_.data() + size_t(epoch) * n;
    for (size_t i = 0; i < n; ++i)
      row[i] = epoch_seen_[i] > 0 ? epoch_sum_[i] / epoch_seen_[i] : std::nanf("");
  }
  std::fill(epoch_sum_.begin(), epoch_sum_.end(), 0.0f);
  std::fill(epoch_seen_.begin(), epoch_seen_.end(), 0.0f);
}

void write_dynamics(const Comm& comm, const std::string& path, const TrainingDynamics& d,
                    const std::string& config_yaml, const lineage::Lineage& from) {
  on_root_agreed(comm, [&] {
    const hsize_t n = hsize_t(d.samples()), e = hsize_t(d.epochs());
    std::vector<float> table = d.margins();
    if (table.empty()) table.assign(size_t(n * e), std::nanf(""));  // no epoch trained
    h5::File f = h5::File::create(path);
    f.create_dataset<float>("/margin", {e, n});
    if (e > 0) f.write_rows<float>("/margin", 0, e, table.data());
    f.create_dataset<int64_t>("/sample_id", {n});
    f.write_rows<int64_t>("/sample_id", 0, n, d.sample_ids().data());
    f.create_dataset<int32_t>("/labels", {n});
    f.write_rows<int32_t>("/labels", 0, n, d.labels().data());
    f.create_dataset<uint8_t>("/heldout", {n});
    f.write_rows<uint8_t>("/heldout", 0, n, d.heldout().data());
    f.set_attr("/", "epochs", int64_t(e));
    h5::stamp(f, schema::kDynamics, config_yaml);
    lineage::stamp_derived(f, schema::kDynamics, config_yaml, from);
    f.close();
  });
}

}  // namespace sieve::train
