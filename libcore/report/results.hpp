// What the train_scaled sweep shows, as numbers and as sentences: the accuracy of each arm
// per global batch with a 95 % t-interval, the paired differences filtered − full and
// filtered − random, and a headline per batch that says no more than the intervals do.
//
// Rules (docs/report.md, "Accuracy vs global batch"):
//   * runs are grouped by the global batch they TRAINED at; a run whose sweep asked for
//     another batch (train_scaled caps the batch at the data size) forms its own group,
//     keyed by (actual, requested), so seeds of different batches are never pooled and arms
//     at different actual batches are never compared;
//   * per (group, arm), where several weight decays were run, the one with the best mean is
//     shown (the paper tunes weight decay per batch); this is a choice made after seeing the
//     data and the text says so;
//   * diverged runs are left out of every mean and counted; collapsed runs (near chance)
//     stay in, flagged;
//   * differences are paired by seed (the same seed in both arms); a seed run more than once
//     in an arm at the chosen weight decay is ambiguous and is not paired;
//   * helped / hurt only when the whole 95 % interval is above / below 0; an interval that
//     contains 0 is "no measurable difference", fewer than 2 pairs "too few seeds to tell".
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "report/run_data.hpp"
#include "report/stats.hpp"

namespace sieve::report {

struct BatchKey {
  int64_t batch = 0;      // global batch trained at
  int64_t requested = 0;  // what the sweep asked for
  bool capped() const { return requested != batch; }
  // "64", or "5000 (asked 20480)"
  std::string label() const;
  auto operator<=>(const BatchKey&) const = default;
};

// One arm at one batch group, at the chosen weight decay.
struct ArmPoint {
  std::string arm;
  BatchKey key;
  double wd = kNaN;  // NaN: not recorded
  int64_t wd_tried = 1;
  MeanCI acc;              // final test accuracy over non-diverged runs
  Stats acc_range;         // min/max/std of the same values
  Stats best, gap;         // best-epoch accuracy, generalization gap (given labels)
  Stats clean_gap;         // train accuracy on the clean labels − test (runs that know it)
  int64_t runs = 0;        // at the chosen weight decay, diverged included
  int64_t diverged = 0;    // left out of acc
  int64_t collapsed = 0;   // in acc, flagged
  int64_t duplicate_seeds = 0;           // seeds with more than one run: not paired
  std::map<int64_t, double> by_seed;     // final accuracy per seed, for pairing
};

struct Comparison {
  std::string other;  // "full" or "random" (filtered − other)
  bool available = false;  // both arms ran at this batch group
  std::string missing;     // else: the arm(s) without runs here, "filtered and full"
  PairedDiff pd;
  Verdict verdict = Verdict::TooFew;
};

struct BatchResult {
  BatchKey key;
  int point[3] = {-1, -1, -1};  // index into ResultsAnalysis::points for full/filtered/random
  Comparison vs_full, vs_random;
  int64_t diverged = 0, collapsed = 0;  // every run of this group, all weight decays
  std::string headline;
};

struct ResultsAnalysis {
  std::vector<ArmPoint> points;  // ordered by arm (full, filtered, random), then batch group
  std::vector<BatchResult> batches;  // ordered by batch group
  std::vector<const RunResult*> marked;  // diverged or collapsed runs, by index
  int64_t diverged = 0, collapsed = 0, unchecked = 0;  // unchecked: no class count known
  std::string summary;  // one or two sentences for the top of the report
};

// The arm names in report order.
inline const char* const kArmNames[3] = {"full", "filtered", "random"};

ResultsAnalysis analyze_results(const std::vector<RunResult>& runs);

// "filtering helped", "filtering hurt", "no measurable difference (interval contains 0)",
// "too few seeds to tell".
std::string verdict_words(Verdict v);

}  // namespace sieve::report
