#include "report/results.hpp"

#include <cmath>
#include <set>

#include "util/error.hpp"

namespace sieve::report {

std::string BatchKey::label() const {
  return capped() ? cat(batch, " (asked ", requested, ")") : std::to_string(batch);
}

std::string verdict_words(Verdict v) {
  switch (v) {
    case Verdict::Higher: return "filtering helped";
    case Verdict::Lower: return "filtering hurt";
    case Verdict::NoDifference: return "no measurable difference (interval contains 0)";
    case Verdict::TooFew: break;
  }
  return "too few seeds to tell";
}

namespace {

using RunPtrs = std::vector<const RunResult*>;

int arm_index(const std::string& arm) {
  for (int a = 0; a < 3; ++a)
    if (arm == kArmNames[a]) return a;
  return -1;
}

// The point of one arm at one batch group and one weight decay.
ArmPoint point_of(const std::string& arm, const BatchKey& key, double wd, const RunPtrs& rs) {
  ArmPoint p;
  p.arm = arm;
  p.key = key;
  p.wd = wd < 0 ? kNaN : wd;
  std::vector<double> acc, best, gap, clean_gap;
  std::map<int64_t, int> seen;
  for (const RunResult* r : rs) {
    ++p.runs;
    if (r->diverged) {
      ++p.diverged;
      continue;
    }
    p.collapsed += r->collapsed ? 1 : 0;
    acc.push_back(r->final_test_acc);
    best.push_back(r->best_test_acc);
    gap.push_back(r->gen_gap);
    clean_gap.push_back(r->train_acc_clean - r->final_test_acc);  // NaN where either is
    if (!std::isnan(r->final_test_acc)) {
      p.by_seed[r->seed] = r->final_test_acc;
      ++seen[r->seed];
    }
  }
  // A seed with several runs here (another swept key, say lr) has no single partner.
  for (auto& [seed, n] : seen)
    if (n > 1) {
      p.by_seed.erase(seed);
      ++p.duplicate_seeds;
    }
  p.acc = mean_ci(acc);
  p.acc_range = stats_of(acc);
  p.best = stats_of(best);
  p.gap = stats_of(gap);
  p.clean_gap = stats_of(clean_gap);
  return p;
}

Comparison compare(const ResultsAnalysis& a, const BatchResult& b, int other) {
  Comparison c;
  c.other = kArmNames[other];
  if (b.point[1] < 0 || b.point[other] < 0) {
    c.missing = b.point[1] >= 0       ? c.other
                : b.point[other] >= 0 ? std::string("filtered")
                                      : cat("filtered and ", c.other);
    return c;
  }
  c.available = true;
  c.pd = paired_difference(a.points[size_t(b.point[1])].by_seed,
                           a.points[size_t(b.point[other])].by_seed);
  c.verdict = verdict_of(c.pd.diff);
  return c;
}

std::string comparison_phrase(const Comparison& c) {
  const std::string what = cat("filtered − ", c.other);
  if (!c.available) return cat("vs ", c.other, ": not compared (no ", c.missing, " runs at this batch)");
  if (c.pd.diff.n == 0) return cat("vs ", c.other, ": not compared (no seed ran in both arms)");
  return cat("vs ", c.other, ": ", verdict_words(c.verdict), ", ", what, " = ",
             format_ci(c.pd.diff, 100, 2, true, " points"));
}

std::string headline(const ResultsAnalysis& a, const BatchResult& b) {
  std::string h = cat("Global batch ", b.key.label(), " — ", comparison_phrase(b.vs_full), "; ",
                      comparison_phrase(b.vs_random), ".");
  if (b.diverged > 0)
    h += cat(" ", b.diverged, " run", b.diverged == 1 ? "" : "s",
             " diverged and ", b.diverged == 1 ? "is" : "are", " left out of the means.");
  if (b.collapsed > 0)
    h += cat(" ", b.collapsed, " run", b.collapsed == 1 ? "" : "s",
             " collapsed to near chance (kept in the means, flagged below).");
  if (b.key.capped()) {
    std::string others;
    for (auto& o : a.batches)
      if (o.key.requested == b.key.requested && o.key.batch != b.key.batch)
        others += cat(others.empty() ? "" : ", ", o.key.batch);
    h += cat(" The sweep asked for global batch ", b.key.requested, " but these runs trained at ",
             b.key.batch, "; they are a row of their own, not pooled with any other batch");
    h += others.empty() ? "." : cat(", and not compared with the runs of the same request that "
                                    "trained at ", others, ".");
  }
  return h;
}

// "helped at batch 64, 128; no measurable difference at batch 16" for one comparison.
std::string summary_part(const ResultsAnalysis& a, bool vs_full) {
  std::map<std::string, std::string> lists;  // words -> batches
  const char* order[] = {"helped", "hurt", "no measurable difference", "too few seeds to tell",
                         "not compared"};
  for (auto& b : a.batches) {
    const Comparison& c = vs_full ? b.vs_full : b.vs_random;
    std::string w = !c.available || c.pd.diff.n == 0 ? "not compared"
                    : c.verdict == Verdict::Higher    ? "helped"
                    : c.verdict == Verdict::Lower     ? "hurt"
                    : c.verdict == Verdict::NoDifference ? "no measurable difference"
                                                         : "too few seeds to tell";
    lists[w] += cat(lists[w].empty() ? "" : ", ", b.key.label());
  }
  std::string s;
  for (const char* w : order)
    if (!lists[w].empty()) s += cat(s.empty() ? "" : "; ", w, " at batch ", lists[w]);
  return s;
}

}  // namespace

ResultsAnalysis analyze_results(const std::vector<RunResult>& runs) {
  ResultsAnalysis a;
  // (arm, batch group) -> weight decay (-1: not recorded) -> runs
  std::map<std::pair<int, BatchKey>, std::map<double, RunPtrs>> g;
  std::map<BatchKey, BatchResult> by_key;
  for (const RunResult& r : runs) {
    const BatchKey key{r.global_batch, r.requested_batch > 0 ? r.requested_batch : r.global_batch};
    const int arm = arm_index(r.arm);
    SIEVE_CHECK(arm >= 0, r.path, ": unknown arm '", r.arm, "'");
    g[{arm, key}][std::isnan(r.weight_decay) ? -1.0 : r.weight_decay].push_back(&r);
    BatchResult& b = by_key[key];
    b.key = key;
    b.diverged += r.diverged ? 1 : 0;
    b.collapsed += r.collapsed ? 1 : 0;
    a.diverged += r.diverged ? 1 : 0;
    a.collapsed += r.collapsed ? 1 : 0;
    a.unchecked += !r.diverged && std::isnan(r.chance) ? 1 : 0;
    if (r.diverged || r.collapsed) a.marked.push_back(&r);
  }
  // The weight decay with the best mean accuracy over its non-diverged runs; the first on
  // a tie, and one with no accuracy at all only when nothing else was run.
  for (auto& [ak, by_wd] : g) {
    ArmPoint chosen;
    bool have = false;
    for (auto& [wd, rs] : by_wd) {
      ArmPoint p = point_of(kArmNames[ak.first], ak.second, wd, rs);
      if (!have || (!std::isnan(p.acc.mean) && !(p.acc.mean <= chosen.acc.mean))) chosen = p;
      have = true;
    }
    chosen.wd_tried = int64_t(by_wd.size());
    by_key[ak.second].point[ak.first] = int(a.points.size());
    a.points.push_back(chosen);
  }
  for (auto& [key, b] : by_key) a.batches.push_back(b);
  for (auto& b : a.batches) {
    b.vs_full = compare(a, b, 0);
    b.vs_random = compare(a, b, 2);
  }
  for (auto& b : a.batches) b.headline = headline(a, b);

  if (a.batches.empty()) {
    a.summary = "No train_scaled results: nothing to compare yet.";
    return a;
  }
  a.summary = cat("Summary (95 % Student-t intervals of the accuracy difference over seeds paired "
                  "by seed): filtered vs full data — ",
                  summary_part(a, true), ". Filtered vs the random control — ",
                  summary_part(a, false), ".");
  if (a.diverged > 0)
    a.summary += cat(" ", a.diverged, " run", a.diverged == 1 ? "" : "s",
                     " diverged (left out of the means).");
  if (a.collapsed > 0)
    a.summary += cat(" ", a.collapsed, " run", a.collapsed == 1 ? "" : "s",
                     " collapsed to near chance (flagged).");
  std::string capped;
  for (auto& b : a.batches)
    if (b.key.capped()) capped += cat(capped.empty() ? "" : ", ", b.key.requested, " → ", b.key.batch);
  if (!capped.empty())
    a.summary += cat(" Runs that trained at another batch than the sweep asked for (", capped,
                     ") are reported on their own rows.");
  return a;
}

}  // namespace sieve::report
