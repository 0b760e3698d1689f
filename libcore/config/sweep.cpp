#include "config/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "util/error.hpp"

namespace sieve {

namespace {

std::string path_of(const std::string& key) {
  if (key == "weight_decay" || key == "lr") return "scaled.optimizer." + key;
  if (key.rfind("scaled.", 0) == 0) return key;
  return "scaled." + key;
}

int rank_of(const std::string& key) {
  static const char* order[] = {"global_batch", "weight_decay", "lr", "seed"};
  for (int i = 0; i < 4; ++i)
    if (key == order[i]) return i;
  if (key == "arm") return 6;
  return 5;
}

std::string text_of(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// The node at a dotted path of a YAML tree (an undefined node when absent). Rebinding with
// reset() and looking up through a const reference: assignment and non-const [] would
// write into the tree.
YAML::Node at_path(const YAML::Node& root, const std::string& path) {
  YAML::Node n;
  n.reset(root);
  for (size_t from = 0;;) {
    if (!n || !n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const size_t dot = path.find('.', from);
    const YAML::Node& map = n;
    YAML::Node next = map[path.substr(from, dot == std::string::npos ? dot : dot - from)];
    n.reset(next);
    if (dot == std::string::npos) return n;
    from = dot + 1;
  }
}

bool as_number(const std::string& t, double* v) {
  if (t.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && std::isfinite(*v);
}

// Equal texts, or numbers of equal value ("5e-4" and "0.0005", "3" and "3.0").
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  double x = 0, y = 0;
  if (!as_number(a, &x) || !as_number(b, &y)) return false;
  return std::fabs(x - y) <= 1e-12 * std::max(std::fabs(x), std::fabs(y));
}

bool decides_result(const std::string& path) {
  if (path.rfind("scaled.", 0) != 0) return false;
  return path != "scaled.sweep" && path != "scaled.eval_batch" &&
         path.rfind("scaled.checkpoint.", 0) != 0;
}

}  // namespace

Sweep::Sweep(const Config& cfg) {
  YAML::Node grid = cfg.get_tree("scaled.sweep");
  if (!grid || grid.IsNull()) return;
  if (!grid.IsMap())
    throw UsageError("scaled.sweep: expected a map of key -> list of values");
  for (const auto& kv : grid) {
    SweepAxis a;
    a.key = kv.first.as<std::string>();
    a.path = path_of(a.key);
    const KeySpec* spec = cfg.schema().find(a.path);
    if (!spec || a.path == "scaled.sweep")
      throw UsageError(cat("scaled.sweep.", a.key, ": unknown key (", a.path,
                           " is not a scaled.* config key)"));
    // A single value is a one-element list (a new node: assigning over `vals` would write
    // through into the grid and make it contain itself).
    const YAML::Node vals = kv.second.IsScalar() ? one_element_list(kv.second) : kv.second;
    if (!vals.IsSequence() || vals.size() == 0)
      throw UsageError(cat("scaled.sweep.", a.key, ": expected a non-empty list of values"));
    for (const auto& v : vals) {
      a.values.push_back(validate_value(*spec, v, "scaled.sweep." + a.key));
      a.texts.push_back(text_of(v));
    }
    axes_.push_back(std::move(a));
  }
  std::stable_sort(axes_.begin(), axes_.end(), [](const SweepAxis& x, const SweepAxis& y) {
    const int rx = rank_of(x.key), ry = rank_of(y.key);
    if (rx != ry) return rx < ry;
    return x.key < y.key;
  });
}

int64_t Sweep::size() const {
  int64_t n = 1;
  for (const auto& a : axes_) n *= int64_t(a.values.size());
  return n;
}

std::vector<size_t> Sweep::digits(int64_t index) const {
  if (index < 0 || index >= size())
    throw UsageError(cat("--sweep-index ", index, ": expected 0..", size() - 1, " (the sweep has ",
                         size(), " runs; see --list-sweep)"));
  std::vector<size_t> d(axes_.size());
  for (size_t i = axes_.size(); i-- > 0;) {
    d[i] = size_t(index % int64_t(axes_[i].values.size()));
    index /= int64_t(axes_[i].values.size());
  }
  return d;
}

std::vector<std::pair<std::string, std::string>> Sweep::values(int64_t index) const {
  auto d = digits(index);
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < axes_.size(); ++i)
    out.push_back({axes_[i].key, axes_[i].texts[d[i]]});
  return out;
}

Config Sweep::apply(const Config& base, int64_t index) const {
  auto d = digits(index);
  // A deep copy: Config copies share YAML nodes, and set() must not touch `base`.
  Config c = Config::from_yaml_text(base.schema(), base.to_yaml(), "resolved config");
  for (size_t i = 0; i < axes_.size(); ++i)
    c.set(axes_[i].path, axes_[i].values[d[i]], "scaled.sweep." + axes_[i].key);
  return c;
}

std::string Sweep::table() const {
  std::ostringstream os;
  os << "index";
  for (const auto& a : axes_) os << '\t' << a.key;
  os << '\n';
  for (int64_t i = 0; i < size(); ++i) {
    os << i;
    for (auto& [k, v] : values(i)) os << '\t' << v;
    os << '\n';
  }
  return os.str();
}

ResultKeys result_keys(const Config& point) {
  const YAML::Node tree = YAML::Load(point.to_yaml());
  ResultKeys out;
  for (const KeySpec& k : point.schema().keys())
    if (decides_result(k.path)) {
      const YAML::Node v = at_path(tree, k.path);
      out[k.path] = v ? text_of(v) : "";
    }
  if (point.get_int("scaled.seed") == 0) out["run.seed"] = std::to_string(point.get_int("run.seed"));
  return out;
}

ResultKeys recorded_result_keys(const Json& result) {
  ResultKeys out;
  auto it = result.find("config");
  if (it == result.end() || !it->is_object()) return out;
  for (auto& [path, v] : it->items()) out[path] = v.is_string() ? v.get<std::string>() : v.dump();
  return out;
}

std::string result_mismatch(const ResultKeys& recorded, const ResultKeys& expected) {
  std::string why;
  for (const auto& [path, want] : expected) {
    auto it = recorded.find(path);
    if (it == recorded.end() || same_value(it->second, want)) continue;
    why += cat(why.empty() ? "" : ", ", path, " ", it->second, " (grid: ", want, ")");
  }
  return why;
}

std::string stale_reason(const Sweep& sweep, const Config& base, int64_t index,
                         const ResultKeys& recorded) {
  if (index < 0 || index >= sweep.size())
    return cat("run ", index, " is outside the current grid (", sweep.size(), " run",
               sweep.size() == 1 ? "" : "s", ")");
  return result_mismatch(recorded, result_keys(sweep.apply(base, index)));
}

}  // namespace sieve
