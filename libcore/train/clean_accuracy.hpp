// Training accuracy against the clean labels, beside the usual one against the given labels.
//
// Why: train_scaled's train accuracy is measured against the labels it trains on. Where
// they are partly wrong (synthetic noise, data.label_noise), a model that generalises gets
// the wrong ones "wrong", so train accuracy sits below test accuracy and the gap
// (train − test) goes negative; the filtered arm's gap looks better only because its wrong
// labels are gone. Counted on the same training forward passes (the Trainer's batch hook),
// with the same argmax, only the labels differ: against the dataset's /train/clean_labels
// (docs/formats.md), the figure says how well the model fits the true classes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/comm.hpp"
#include "train/loader.hpp"

namespace sieve::train {

class CleanLabelAccuracy {
 public:
  // From the dataset's /train/clean_labels and /train/sample_id; nullopt without them.
  static std::optional<CleanLabelAccuracy> open(const std::string& dataset_path);

  // One training micro-batch: rows of `data` and their logits [rows.size(), k].
  void record(const SplitData& data, const std::vector<int64_t>& rows, const float* logits,
              int k);
  // Collective: the accuracy since the last call over every rank (none if nothing was
  // recorded: an epoch resumed at its end), and a new count.
  std::optional<double> end_epoch(const Comm& comm);

 private:
  std::unordered_map<int64_t, int32_t> clean_;  // sample id -> clean label
  double counts_[2] = {0, 0};                   // correct, seen (this rank)
};

}  // namespace sieve::train
