// The train_scaled sweep grid: `scaled.sweep` maps keys to lists of values and expands to
// the cartesian product, numbered 0..size-1 in a fixed documented order:
//   * key order: global_batch, weight_decay, lr, seed, then every other key alphabetically,
//     then arm; the LAST key varies fastest (row-major), so the three arms of one batch
//     size / weight decay / seed are neighbours in the job array;
//   * values in the order the list gives them.
// Key names: global_batch, arm, seed, micro_batch, epochs are scaled.<key>; weight_decay and
// lr are scaled.optimizer.<key>; anything else is a path under scaled. (e.g.
// optimizer.lars, schedule.warmup_epochs). An empty grid is one run: the base config.
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"

namespace sieve::train {

struct SweepAxis {
  std::string key;   // as written in the grid
  std::string path;  // full config path, e.g. scaled.optimizer.weight_decay
  std::vector<YAML::Node> values;  // validated
  std::vector<std::string> texts;   // as written in the grid (for tables and results)
};

class Sweep {
 public:
  // Validates every value against the schema (UsageError naming scaled.sweep.<key>).
  explicit Sweep(const Config& cfg);
  int64_t size() const;
  const std::vector<SweepAxis>& axes() const { return axes_; }
  // (key, value-as-text) of run `index`.
  std::vector<std::pair<std::string, std::string>> values(int64_t index) const;
  // The base config with run `index`'s values applied.
  Config apply(const Config& base, int64_t index) const;
  // Table for --list-sweep: header "index<TAB>key...", one row per run.
  std::string table() const;

 private:
  std::vector<size_t> digits(int64_t index) const;
  std::vector<SweepAxis> axes_;
};

}  // namespace sieve::train
