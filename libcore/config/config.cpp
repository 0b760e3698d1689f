#include "config/config.hpp"

#include "config/key_path.hpp"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "util/error.hpp"

namespace sieve {
namespace {

const char* type_name(ValueType t) {
  switch (t) {
    case ValueType::Bool:
      return "a boolean (true/false)";
    case ValueType::Int:
      return "an integer";
    case ValueType::Float:
      return "a number";
    case ValueType::String:
      return "a string";
    case ValueType::IntList:
      return "a list of integers";
    case ValueType::FloatList:
      return "a list of numbers";
    case ValueType::StringList:
      return "a list of strings";
    case ValueType::Tree:
      return "a mapping";
  }
  return "?";
}

std::string show(const YAML::Node& n) {
  YAML::Emitter e;
  e << YAML::Flow << n;
  std::string s = e.c_str();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

[[noreturn]] void bad(const KeySpec& spec, const std::string& origin, const std::string& what) {
  throw UsageError(cat("config key '", spec.path, "' (", origin, "): ", what));
}

// Scalars: yaml-cpp's as<T> accepts e.g. "1e3" for double and rejects "abc"; for
// integers we additionally reject fractional values such as "2.5".
int64_t scalar_int(const KeySpec& spec, const YAML::Node& n, const std::string& origin) {
  if (!n.IsScalar())
    bad(spec, origin, cat("expected ", type_name(ValueType::Int), ", got ", show(n)));
  const std::string& s = n.Scalar();
  try {
    size_t pos = 0;
    long long v = std::stoll(s, &pos, 10);
    if (pos == s.size()) return v;
  } catch (...) {
  }
  // Accept integral floats written like 1e4 or 20480.0.
  try {
    size_t pos = 0;
    double d = std::stod(s, &pos);
    if (pos == s.size() && std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18)
      return static_cast<int64_t>(d);
  } catch (...) {
  }
  bad(spec, origin, cat("expected an integer, got '", s, "'"));
}

double scalar_float(const KeySpec& spec, const YAML::Node& n, const std::string& origin) {
  if (!n.IsScalar()) bad(spec, origin, cat("expected a number, got ", show(n)));
  const std::string& s = n.Scalar();
  try {
    size_t pos = 0;
    double d = std::stod(s, &pos);
    if (pos == s.size() && std::isfinite(d)) return d;
  } catch (...) {
  }
  bad(spec, origin, cat("expected a finite number, got '", s, "'"));
}

void check_range(const KeySpec& spec, double v, const std::string& origin) {
  if (spec.min && v < *spec.min)
    bad(spec, origin, cat(v, " is out of range (expected >= ", *spec.min, ")"));
  if (spec.max && v > *spec.max)
    bad(spec, origin, cat(v, " is out of range (expected <= ", *spec.max, ")"));
}

}  // namespace

std::string format_float(double v) {
  // The shortest text that reads back as the same double ("0.05", not 0.050000000000000003).
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  // Keep it a float to the eye and to YAML readers: "2" -> "2.0" (not "1e+20").
  if (std::isfinite(v) && s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

YAML::Node float_node(double v) { return YAML::Node(format_float(v)); }

YAML::Node one_element_list(const YAML::Node& n) {
  YAML::Node list(YAML::NodeType::Sequence);
  list.push_back(YAML::Clone(n));
  return list;
}

YAML::Node validate_value(const KeySpec& spec, const YAML::Node& n, const std::string& origin) {
  switch (spec.type) {
    case ValueType::Bool: {
      bool b;
      if (!n.IsScalar() || !YAML::convert<bool>::decode(n, b))
        bad(spec, origin, cat("expected true or false, got ", show(n)));
      return YAML::Node(b);
    }
    case ValueType::Int: {
      int64_t v = scalar_int(spec, n, origin);
      check_range(spec, double(v), origin);
      return YAML::Node(v);
    }
    case ValueType::Float: {
      double v = scalar_float(spec, n, origin);
      check_range(spec, v, origin);
      return float_node(v);
    }
    case ValueType::String: {
      if (!n.IsScalar()) bad(spec, origin, cat("expected a string, got ", show(n)));
      std::string s = n.Scalar();
      if (!spec.choices.empty()) {
        bool ok = false;
        for (auto& c : spec.choices) ok |= (c == s);
        if (!ok) {
          std::string list;
          for (auto& c : spec.choices) list += (list.empty() ? "" : ", ") + c;
          bad(spec, origin, cat("'", s, "' is not one of: ", list));
        }
      }
      return YAML::Node(s);
    }
    case ValueType::IntList:
    case ValueType::FloatList:
    case ValueType::StringList: {
      // A single value stands for a one-element list. (A fresh node, not `list = n` and
      // then reassigned: yaml-cpp's assignment writes through to `n`, which made the list
      // contain itself.)
      const YAML::Node list = n.IsScalar() ? one_element_list(n) : n;
      if (!list.IsSequence())
        bad(spec, origin, cat("expected ", type_name(spec.type), ", got ", show(n)));
      YAML::Node out(YAML::NodeType::Sequence);
      for (const auto& e : list) {
        if (spec.type == ValueType::IntList) {
          int64_t v = scalar_int(spec, e, origin);
          check_range(spec, double(v), origin);
          out.push_back(v);
        } else if (spec.type == ValueType::FloatList) {
          double v = scalar_float(spec, e, origin);
          check_range(spec, v, origin);
          out.push_back(float_node(v));
        } else {
          if (!e.IsScalar()) bad(spec, origin, cat("expected a list of strings, got ", show(n)));
          out.push_back(e.Scalar());
        }
      }
      out.SetStyle(YAML::EmitterStyle::Flow);
      return out;
    }
    case ValueType::Tree: {
      if (!n.IsMap() && !n.IsNull()) bad(spec, origin, cat("expected a mapping, got ", show(n)));
      YAML::Node out = n.IsNull() ? YAML::Node(YAML::NodeType::Map) : YAML::Clone(n);
      // An empty mapping is always written "{}" inline, so that to_yaml() round-trips.
      if (out.size() == 0) out.SetStyle(YAML::EmitterStyle::Flow);
      return out;
    }
  }
  return n;
}

// ---- schema ----

ConfigSchema& ConfigSchema::add(KeySpec spec) {
  SIEVE_ASSERT(!index_.count(spec.path), "duplicate config key ", spec.path);
  index_[spec.path] = keys_.size();
  keys_.push_back(std::move(spec));
  return *this;
}
ConfigSchema& ConfigSchema::add_bool(const std::string& p, bool d, const std::string& h) {
  return add({p, ValueType::Bool, YAML::Node(d), h, {}, {}, {}});
}
ConfigSchema& ConfigSchema::add_int(const std::string& p, int64_t d, const std::string& h,
                                    std::optional<double> mn, std::optional<double> mx) {
  return add({p, ValueType::Int, YAML::Node(d), h, mn, mx, {}});
}
ConfigSchema& ConfigSchema::add_float(const std::string& p, double d, const std::string& h,
                                      std::optional<double> mn, std::optional<double> mx) {
  return add({p, ValueType::Float, float_node(d), h, mn, mx, {}});
}
ConfigSchema& ConfigSchema::add_string(const std::string& p, const std::string& d,
                                       const std::string& h, std::vector<std::string> choices) {
  return add({p, ValueType::String, YAML::Node(d), h, {}, {}, std::move(choices)});
}
ConfigSchema& ConfigSchema::add_int_list(const std::string& p, std::vector<int64_t> d,
                                         const std::string& h, std::optional<double> mn,
                                         std::optional<double> mx) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (auto v : d) n.push_back(v);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return add({p, ValueType::IntList, n, h, mn, mx, {}});
}
ConfigSchema& ConfigSchema::add_float_list(const std::string& p, std::vector<double> d,
                                           const std::string& h, std::optional<double> mn,
                                           std::optional<double> mx) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (auto v : d) n.push_back(float_node(v));
  n.SetStyle(YAML::EmitterStyle::Flow);
  return add({p, ValueType::FloatList, n, h, mn, mx, {}});
}
ConfigSchema& ConfigSchema::add_string_list(const std::string& p, std::vector<std::string> d,
                                            const std::string& h) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (auto& v : d) n.push_back(v);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return add({p, ValueType::StringList, n, h, {}, {}, {}});
}
ConfigSchema& ConfigSchema::add_tree(const std::string& p, const std::string& h) {
  YAML::Node empty(YAML::NodeType::Map);
  empty.SetStyle(YAML::EmitterStyle::Flow);
  return add({p, ValueType::Tree, empty, h, {}, {}, {}});
}

ConfigSchema& ConfigSchema::add_shorthand(const std::string& section, const std::string& key) {
  SIEVE_ASSERT(find(key) && key.compare(0, section.size() + 1, section + ".") == 0,
               "shorthand ", section, " -> ", key, ": not a key of that section");
  shorthands_[section] = key;
  return *this;
}

const std::string* ConfigSchema::shorthand(const std::string& section) const {
  auto it = shorthands_.find(section);
  return it == shorthands_.end() ? nullptr : &it->second;
}

const KeySpec* ConfigSchema::find(const std::string& path) const {
  auto it = index_.find(path);
  return it == index_.end() ? nullptr : &keys_[it->second];
}

const KeySpec* ConfigSchema::enclosing_tree(const std::string& path) const {
  for (auto& k : keys_)
    if (k.type == ValueType::Tree && path.size() > k.path.size() &&
        path.compare(0, k.path.size(), k.path) == 0 && path[k.path.size()] == '.')
      return &k;
  return nullptr;
}

bool ConfigSchema::is_section(const std::string& path) const {
  std::string prefix = path + ".";
  for (auto& k : keys_)
    if (k.path.compare(0, prefix.size(), prefix) == 0) return true;
  return false;
}

std::string ConfigSchema::describe() const {
  std::ostringstream os;
  for (auto& k : keys_) {
    YAML::Emitter e;
    e << YAML::Flow << k.default_value;
    os << "  " << k.path << " = " << e.c_str();
    if (k.min || k.max)
      os << "  [" << (k.min ? cat(*k.min) : "") << ".." << (k.max ? cat(*k.max) : "") << "]";
    if (!k.choices.empty()) {
      os << "  {";
      for (size_t i = 0; i < k.choices.size(); ++i) os << (i ? "|" : "") << k.choices[i];
      os << "}";
    }
    os << "\n      " << k.help << "\n";
  }
  return os.str();
}

// ---- config ----

namespace {

// The one YAML document of a config; a second document ("---") would be ignored by
// YAML::Load, so it is an error.
YAML::Node load_one_document(const std::string& text, const std::string& origin) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    throw UsageError(cat(origin, ": invalid YAML at line ", e.mark.line + 1, ": ", e.msg));
  }
  if (docs.size() > 1)
    throw UsageError(cat(origin, ": holds ", docs.size(),
                         " YAML documents (separated by ---), expected one"));
  return docs.empty() ? YAML::Node() : docs[0];
}

void apply_tree(Config& cfg, const ConfigSchema& schema, const YAML::Node& node,
                const std::string& prefix, const std::string& origin) {
  if (!node.IsMap()) {
    if (prefix.empty() && node.IsNull()) return;  // empty file
    throw UsageError(cat("config (", origin, "): expected a mapping",
                         prefix.empty() ? "" : " at '" + prefix + "'"));
  }
  std::set<std::string> seen;
  for (const auto& kv : node) {
    std::string key = kv.first.Scalar();
    std::string path = prefix.empty() ? key : prefix + "." + key;
    // yaml-cpp keeps both entries of a repeated key; silently taking the last would hide
    // a typo'd or pasted-twice section.
    if (!seen.insert(key).second)
      throw UsageError(cat("config (", origin, "): key '", path, "' appears twice"));
    if (schema.find(path) || (kv.second.IsScalar() && schema.shorthand(path))) {
      cfg.set(path, kv.second, origin);
    } else if (schema.is_section(path)) {
      apply_tree(cfg, schema, kv.second, path, origin);
    } else {
      throw UsageError(cat("config (", origin, "): unknown key '", path, "'"));
    }
  }
}

}  // namespace

void Config::set(const std::string& path, const YAML::Node& value, const std::string& origin) {
  const KeySpec* spec = schema_->find(path);
  if (!spec) {
    if (const KeySpec* tree = schema_->enclosing_tree(path)) {
      // Setting inside a free-form tree: splice the value into it.
      put_at_key_path(values_[tree->path], path.substr(tree->path.size() + 1), value);
      return;
    }
    if (const std::string* key = schema_->shorthand(path); key && value.IsScalar()) {
      set(*key, value, origin);
      return;
    }
    if (schema_->is_section(path)) {
      apply_tree(*this, *schema_, value, path, origin);
      return;
    }
    throw UsageError(cat("config (", origin, "): unknown key '", path, "'"));
  }
  values_[path] = validate_value(*spec, value, origin);
}

Config Config::load(const ConfigSchema& schema, const std::string& yaml_file,
                    const std::vector<std::string>& overrides) {
  std::vector<std::string> files;
  if (!yaml_file.empty()) files.push_back(yaml_file);
  return load(schema, files, overrides);
}

Config Config::load(const ConfigSchema& schema, const std::vector<std::string>& yaml_files,
                    const std::vector<std::string>& overrides) {
  Config cfg;
  cfg.schema_ = &schema;
  for (auto& k : schema.keys()) cfg.values_[k.path] = YAML::Clone(k.default_value);
  for (const auto& yaml_file : yaml_files) {
    std::error_code ec;
    if (std::filesystem::is_directory(yaml_file, ec))
      throw UsageError(cat("--config ", yaml_file, ": is a directory, expected a YAML file"));
    std::ifstream in(yaml_file);
    if (!in) throw UsageError(cat("--config ", yaml_file, ": cannot open file"));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw UsageError(cat("--config ", yaml_file, ": cannot read file"));
    apply_tree(cfg, schema, load_one_document(text.str(), "--config " + yaml_file), "", yaml_file);
  }
  for (const auto& ov : overrides) {
    auto eq = ov.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(cat("--set '", ov, "': expected key.path=value"));
    std::string path = ov.substr(0, eq);
    YAML::Node value;
    try {
      value = YAML::Load(ov.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      throw UsageError(cat("--set '", ov, "': value is not valid YAML: ", e.msg));
    }
    if (value.IsNull()) value = YAML::Node(std::string());
    cfg.set(path, value, "--set " + path);
  }
  return cfg;
}

Config Config::from_yaml_text(const ConfigSchema& schema, const std::string& text,
                              const std::string& origin) {
  Config cfg;
  cfg.schema_ = &schema;
  for (auto& k : schema.keys()) cfg.values_[k.path] = YAML::Clone(k.default_value);
  YAML::Node root;
  try {
    root = load_one_document(text, origin);
  } catch (const UsageError& e) {
    throw Error(cat(origin, ": stored config: ", e.what()));
  }
  apply_tree(cfg, schema, root, "", origin);
  return cfg;
}

const KeySpec& Config::spec(const std::string& path, ValueType expected) const {
  SIEVE_ASSERT(schema_, "config not loaded");
  const KeySpec* s = schema_->find(path);
  SIEVE_ASSERT(s, "config key '", path, "' is not in the schema");
  SIEVE_ASSERT(s->type == expected, "config key '", path, "' read with the wrong type");
  return *s;
}

bool Config::get_bool(const std::string& p) const {
  spec(p, ValueType::Bool);
  return values_.at(p).as<bool>();
}
int64_t Config::get_int(const std::string& p) const {
  spec(p, ValueType::Int);
  return values_.at(p).as<int64_t>();
}
double Config::get_float(const std::string& p) const {
  spec(p, ValueType::Float);
  return values_.at(p).as<double>();
}
std::string Config::get_string(const std::string& p) const {
  spec(p, ValueType::String);
  return values_.at(p).as<std::string>();
}
std::vector<int64_t> Config::get_int_list(const std::string& p) const {
  spec(p, ValueType::IntList);
  return values_.at(p).as<std::vector<int64_t>>();
}
std::vector<double> Config::get_float_list(const std::string& p) const {
  spec(p, ValueType::FloatList);
  return values_.at(p).as<std::vector<double>>();
}
std::vector<std::string> Config::get_string_list(const std::string& p) const {
  spec(p, ValueType::StringList);
  return values_.at(p).as<std::vector<std::string>>();
}
YAML::Node Config::get_tree(const std::string& p) const {
  spec(p, ValueType::Tree);
  return YAML::Clone(values_.at(p));
}

std::string Config::to_yaml(const std::string& section) const {
  // Rebuild the nested mapping in schema order so the output reads like the input.
  YAML::Node root(YAML::NodeType::Map);
  for (auto& k : schema_->keys())
    if (section.empty() || k.path == section || k.path.rfind(section + ".", 0) == 0)
      put_at_key_path(root, k.path, values_.at(k.path));
  YAML::Emitter e;
  e << root;
  return std::string(e.c_str()) + "\n";
}

}  // namespace sieve
