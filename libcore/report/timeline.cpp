#include "report/timeline.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>

#include "util/error.hpp"

namespace sieve::report {
namespace {

struct Span {
  std::string cat;
  double ts, dur, excl;
};

// Index of the summed part for a category, or -1 (not part of the split).
enum Part { kCompute, kComm, kNegotiate, kData, kOptimizer, kOther, kParts };
int part_of(const std::string& cat) {
  if (cat == "compute" || cat == "layer") return kCompute;
  if (cat == "wait") return kComm;
  if (cat == "negotiate") return kNegotiate;
  if (cat == "data") return kData;
  if (cat == "optimizer") return kOptimizer;
  return -1;
}

}  // namespace

StepSplit summarize_trace(const std::string& path) {
  std::ifstream f(path);
  SIEVE_CHECK(f.good(), "cannot read trace ", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw Error(cat(path, ": not JSON: ", e.what()));
  }
  SIEVE_CHECK(j.contains("traceEvents") && j["traceEvents"].is_array(), path,
              ": not a trace (no traceEvents)");
  StepSplit out;
  const auto meta = j.value("otherData", nlohmann::json::object());
  out.strategy = meta.value("strategy", "?");
  out.arch = meta.value("arch", "?");
  out.width = meta.value("width", 0.0);
  out.global_batch = meta.value("global_batch", 0LL);
  out.params = meta.value("params", 0.0);
  out.bucket_mb = meta.value("bucket_mb", 4.0);
  out.cycle_ms = meta.value("cycle_ms", 1.0);
  out.fusion_mb = meta.value("fusion_mb", 64.0);
  out.servers = meta.value("servers", 1);
  out.tensors = meta.value("tensors", 64);
  std::map<int, std::vector<Span>> lanes;  // pid -> main-lane spans
  for (const auto& e : j["traceEvents"])
    if (e.value("ph", "") == "X" && e.value("tid", 0) == 0)
      lanes[e.value("pid", 0)].push_back(
          {e.value("cat", ""), e.value("ts", 0.0), e.value("dur", 0.0), e.value("dur", 0.0)});
  SIEVE_CHECK(!lanes.empty(), path, ": no spans on the main lane");
  double sum[kParts + 1] = {};  // + step
  int ranks = 0;
  for (auto& [pid, spans] : lanes) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
    });
    // Exclusive times: each span is subtracted from the innermost span enclosing it.
    std::vector<size_t> stack;
    for (size_t i = 0; i < spans.size(); ++i) {
      while (!stack.empty() &&
             spans[stack.back()].ts + spans[stack.back()].dur <= spans[i].ts + 1e-3)
        stack.pop_back();
      if (!stack.empty()) spans[stack.back()].excl -= spans[i].dur;
      stack.push_back(i);
    }
    std::vector<std::array<double, kParts + 1>> steps;  // per step: parts + step duration
    std::vector<std::pair<double, double>> bounds;
    for (const Span& s : spans)
      if (s.cat == "step") {
        std::array<double, kParts + 1> row{};
        row[kOther] = s.excl;
        row[kParts] = s.dur;
        steps.push_back(row);
        bounds.push_back({s.ts, s.ts + s.dur});
      }
    if (steps.empty()) continue;
    for (const Span& s : spans) {
      const int p = part_of(s.cat);
      if (p < 0) continue;
      // The step containing the span (steps are disjoint and sorted).
      auto it = std::upper_bound(bounds.begin(), bounds.end(), std::make_pair(s.ts + 1e-3, 1e300));
      if (it == bounds.begin()) continue;
      const size_t k = size_t(it - bounds.begin()) - 1;
      if (s.ts + s.dur > bounds[k].second + 1e-3) continue;
      steps[k][p == kNegotiate ? kComm : p] += s.excl;
      if (p == kNegotiate) steps[k][kNegotiate] += s.excl;
    }
    const size_t first = steps.size() > 1 ? 1 : 0;  // the first step warms up
    for (size_t k = first; k < steps.size(); ++k)
      for (int p = 0; p <= kParts; ++p) sum[p] += steps[k][p] / double(steps.size() - first);
    out.steps = (long long)(steps.size() - first);
    ++ranks;
  }
  SIEVE_CHECK(ranks > 0, path, ": no step spans (was the trace written by a training run?)");
  out.ranks = meta.value("ranks", ranks);
  const double scale = 1e-6 / ranks;  // us summed over ranks -> mean seconds
  out.compute_s = sum[kCompute] * scale;
  out.exposed_comm_s = sum[kComm] * scale;
  out.negotiate_s = sum[kNegotiate] * scale;
  out.data_s = sum[kData] * scale;
  out.optimizer_s = sum[kOptimizer] * scale;
  out.other_s = sum[kOther] * scale;
  out.step_s = sum[kParts] * scale;
  return out;
}

std::vector<StepSplit> summarize_traces(const std::string& dir) {
  std::vector<StepSplit> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("trace-", 0) == 0 && e.path().extension() == ".json")
      out.push_back(summarize_trace(e.path().string()));
  }
  std::sort(out.begin(), out.end(), [](const StepSplit& a, const StepSplit& b) {
    return a.strategy != b.strategy ? a.strategy < b.strategy : a.ranks < b.ranks;
  });
  return out;
}

}  // namespace sieve::report
