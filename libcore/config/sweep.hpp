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

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "io/metrics.hpp"

namespace sieve {

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

// What identifies the result of one sweep run: the keys of its config that change the
// numbers, path -> canonical value text. Every scaled.* key except the grid itself and the
// keys that only say how the run is carried out (scaled.checkpoint.*, scaled.eval_batch),
// and run.seed while scaled.seed is 0 (the training seed is derived from it).
// train_scaled records it in result.json ("config"); the report and --resume compare it
// with the current grid's point of the same index, so that a result of an earlier grid
// is never taken for this one.
using ResultKeys = std::map<std::string, std::string>;
ResultKeys result_keys(const Config& point);

// result.json's "config" object; empty when it has none (a result of an older train_scaled).
ResultKeys recorded_result_keys(const Json& result);

// Why a result recorded with `recorded` is not the grid point `expected` (result_keys of
// it): the differing keys, "scaled.epochs 1 (grid: 3), scaled.arm filtered (grid: full)";
// "" when they match. Numbers compare by value (5e-4 = 0.0005). A key `recorded` lacks is
// not compared: results of an older train_scaled record fewer keys.
std::string result_mismatch(const ResultKeys& recorded, const ResultKeys& expected);

// Why the result of sweep run `index`, recorded with `recorded`, does not belong to the
// current grid `sweep` over `base`: outside the grid, or result_mismatch; "" when it does.
std::string stale_reason(const Sweep& sweep, const Config& base, int64_t index,
                         const ResultKeys& recorded);

}  // namespace sieve
